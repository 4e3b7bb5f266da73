#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ctest batch_recipes.mpirun_hostfile: runs mpirun-hostfile.sh as a user
# would, on this machine as a one-node "cluster" (localhost, 2 slots), with
# the example program on the host backend, and checks that
#  - the job succeeds and the example finds no wrong element (#wrong 0);
#  - the PEERPLAN_* variables set here reached every rank (the recipe
#    forwards them with mpirun -x): both ranks log at INFO, which only
#    PEERPLAN_DEBUG=INFO makes them do.
#   check_mpirun_hostfile.sh <mpirun-hostfile.sh> <example program>
set -euo pipefail
recipe="$1"
example="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

printf '# one-node cluster for the test\nlocalhost slots=2\n' > "$work/hosts"
# BIND_TO=none and --oversubscribe: ctest runs other jobs on the same cores.
status=0
HOSTFILE="$work/hosts" RANKS_PER_NODE=2 BIND_TO=none MPIRUN_FLAGS=--oversubscribe \
  PEERPLAN_BACKEND=host PEERPLAN_DEBUG=INFO PEERPLAN_TIMEOUT_MS=20000 \
  "$recipe" "$example" --steps 3 > "$work/out" 2>&1 || status=$?
cat "$work/out"
if [ "$status" -ne 0 ]; then
  echo "FAIL: the recipe exited with status $status" >&2
  exit 1
fi
grep -q '^#wrong 0$' "$work/out" || { echo "FAIL: no '#wrong 0' line" >&2; exit 1; }
for rank in 0 1; do
  grep -q "rank $rank\] INFO: " "$work/out" ||
    { echo "FAIL: rank $rank logged no INFO line: PEERPLAN_DEBUG did not reach it" >&2; exit 1; }
done
echo "PASS: 2 ranks via the hostfile recipe"
