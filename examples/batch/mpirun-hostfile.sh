#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs a peerplan program on the nodes of a hostfile with Open MPI's mpirun,
# one rank per GPU: the recipe for machines without a batch system (or to
# copy into a job script).
#
#   HOSTFILE=hosts.txt RANKS_PER_NODE=8 examples/batch/mpirun-hostfile.sh ./app [args...]
#
# hosts.txt lists one node per line with its slots (one per GPU):
#   gpu-node-01 slots=8
#   gpu-node-02 slots=8
#
# Settings (environment variables of this script):
#   HOSTFILE        the hostfile (required)
#   RANKS_PER_NODE  ranks on each node: its number of GPUs (default 8)
#   BIND_TO         mpirun --bind-to: core (default), numa, none. Binding keeps
#                   each rank on the CPUs it was given, next to its memory;
#                   `none` is for sharing a machine with other jobs or tests.
#   CORES_PER_RANK  cores bound to each rank (default 1): with --map-by
#                   ppr:N:node:PE=C the ranks of a node take consecutive
#                   groups of C cores, so on the usual two-socket GPU server
#                   (GPUs 0-3 on socket 0, 4-7 on socket 1) rank i lands on
#                   the socket of GPU i. Check it: PEERPLAN_DEBUG=INFO logs
#                   on every rank "this process is bound to cpus {...},
#                   NUMA node(s) {...}".
#   MPIRUN_FLAGS    more mpirun flags, e.g. --oversubscribe when the nodes
#                   have fewer cores than ranks (a test on a laptop).
#
# Every PEERPLAN_* variable set when this script runs is passed to every
# rank (mpirun -x), on every node: peerplan fails create() with Mismatch
# when ranks are given different settings, and a variable exported on the
# launch node only would be just that. The ones that matter in batch jobs:
#   PEERPLAN_DEVICE       CUDA device of a rank. Default: the rank's index on
#                         its node (modulo the GPUs it sees), which is right
#                         when every rank sees every GPU of its node. Keep
#                         them visible (no per-rank CUDA_VISIBLE_DEVICES):
#                         the P2P path maps the peers' GPU memory.
#   PEERPLAN_TIMEOUT_MS   bound on every wait (default 30000). A rank that
#                         dies or hangs makes the others raise Timeout naming
#                         it after this long instead of holding the job until
#                         its wall-time limit; raise it if ranks start far apart
#                         (a slow shared file system loading the program).
#   PEERPLAN_DEBUG        WARN (default), INFO (binding, topology, route table
#                         after declare), TRACE (every call's route). Lines
#                         read "peerplan[host:pid rank R] INFO: ...".
#   PEERPLAN_TUNING_FILE  a tuning file written by peerplan_tune on this kind
#                         of node (docs/tuning.md); on a shared file
#                         system every rank reads the same one, as it must.
set -euo pipefail

if [ "$#" -lt 1 ]; then
  echo "usage: HOSTFILE=hosts.txt RANKS_PER_NODE=8 $0 ./app [args...]" >&2
  exit 2
fi
hostfile="${HOSTFILE:?set HOSTFILE to a file listing one node per line, e.g. 'node01 slots=8'}"
if [ ! -r "$hostfile" ]; then
  echo "$0: cannot read hostfile '$hostfile'" >&2
  exit 2
fi
ranks_per_node="${RANKS_PER_NODE:-8}"
cores_per_rank="${CORES_PER_RANK:-1}"
bind_to="${BIND_TO:-core}"

# Nodes = non-blank lines that are not comments.
nodes=$(grep -cEv '^[[:space:]]*(#|$)' "$hostfile" || true)
if [ "$nodes" -lt 1 ]; then
  echo "$0: hostfile '$hostfile' lists no node" >&2
  exit 2
fi

forward=()
for name in $(compgen -e | grep '^PEERPLAN_' || true); do
  forward+=(-x "$name")
done

# shellcheck disable=SC2086  # MPIRUN_FLAGS is a list of flags
exec mpirun --hostfile "$hostfile" -np $((nodes * ranks_per_node)) \
  --map-by "ppr:${ranks_per_node}:node:PE=${cores_per_rank}" --bind-to "$bind_to" \
  "${forward[@]}" ${MPIRUN_FLAGS:-} "$@"
