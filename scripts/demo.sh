#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job under mpirun: the
# example program (examples/transformer_decode.cpp) on the host backend
# where no GPU is visible, on the CUDA backend (one rank per GPU) where
# there are GPUs and the CUDA backend was built.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup-common.sh"

install_missing_packages
report_cuda
configure_and_build

ranks="${PEERPLAN_DEMO_RANKS:-}"
if [ -z "$ranks" ]; then
  if [ "${PEERPLAN_GPU_COUNT:-0}" -ge 2 ]; then ranks="$PEERPLAN_GPU_COUNT"; else ranks=4; fi
fi
example="$BUILD_DIR/examples/peerplan_transformer_decode"
log "running: mpirun -np $ranks $example"
mpirun -np "$ranks" --oversubscribe "$example" "$@"
