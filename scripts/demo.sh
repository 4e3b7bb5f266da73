#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what is missing, builds, and runs the main job under mpirun: the
# example program (examples/transformer_decode.cpp) on the host backend
# where no GPU is visible, on the CUDA backend (one rank per GPU) where
# there are GPUs and the CUDA backend was built.
#
# It builds only what it runs: the library and the example, in a build
# directory of its own (PEERPLAN_DEMO_BUILD_DIR, default build-demo/), never
# the tests, benchmarks or tools (scripts/test.sh builds everything, in
# build/). Where no GPU is visible that is the host backend alone, even where
# the CUDA toolkit is installed; where GPUs are visible, the CUDA backend too
# (when the toolkit is found), compiled for the visible GPUs' architectures
# only. PEERPLAN_CMAKE_ARGS (e.g. "-DPEERPLAN_WITH_CUDA=ON") come last on the
# configure line and override these choices.
#
#   PEERPLAN_DEMO_RANKS=n        ranks to run (default: one per GPU where there
#                                are at least two, else 4)
#   PEERPLAN_DEMO_BUILD_DIR=dir  its build directory (default: build-demo/)
#   Arguments are passed to the example (--layers N --hidden H --steps S --prefill T).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup-common.sh"
BUILD_DIR="${PEERPLAN_DEMO_BUILD_DIR:-$PEERPLAN_ROOT/build-demo}"

install_missing_packages
use_ccache_when_present
report_cuda

# Every option is given on every run, so that a build directory configured
# another way (say before a GPU appeared) is brought back to this one.
cmake_args=(-DPEERPLAN_BUILD_EXAMPLES=ON -DPEERPLAN_BUILD_TESTS=OFF
            -DPEERPLAN_BUILD_BENCHMARKS=OFF -DPEERPLAN_BUILD_TOOLS=OFF)
if [ "$PEERPLAN_GPU_COUNT" -gt 0 ]; then
  cmake_args+=(-DPEERPLAN_WITH_CUDA=AUTO)
  # The visible GPUs' compute capabilities ("9.0" -> 90), instead of the
  # default list of four architectures; the default when the driver cannot say.
  if command -v nvcc >/dev/null 2>&1; then
    archs="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
             tr -d ' \r' | grep -E '^[0-9]+\.[0-9]+$' | tr -d . | sort -un | paste -sd ';' || true)"
    if [ -n "$archs" ]; then
      log "CUDA architectures: $archs (the visible GPUs')"
      cmake_args+=("-DCMAKE_CUDA_ARCHITECTURES=$archs")
    fi
  fi
else
  cmake_args+=(-DPEERPLAN_WITH_CUDA=OFF)
  log "building the host backend only, into $BUILD_DIR (no GPU visible)"
fi
BUILD_TARGETS=(peerplan_transformer_decode)
configure_and_build "${cmake_args[@]}"

ranks="${PEERPLAN_DEMO_RANKS:-}"
if [ -z "$ranks" ]; then
  if [ "$PEERPLAN_GPU_COUNT" -ge 2 ]; then ranks="$PEERPLAN_GPU_COUNT"; else ranks=4; fi
fi
example="$BUILD_DIR/examples/peerplan_transformer_decode"

# The command exactly as run, to copy. Open MPI refuses to start as root
# unless these two variables are set (containers and CI run as root); they
# change nothing for other users, so they are set only for root.
run_env=()
if [ "$(id -u)" -eq 0 ]; then
  run_env=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
else
  unset OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
# --oversubscribe: more ranks than cores (4 ranks on a 2-core machine).
cmd=(mpirun -np "$ranks" --oversubscribe "$example" "$@")
printed=""
for word in "${run_env[@]}" "${cmd[@]}"; do printed+="$(printf '%q' "$word") "; done
log "running: ${printed% }"
env "${run_env[@]}" "${cmd[@]}"
