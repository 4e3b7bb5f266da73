#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (unit tests,
# MPI tests at 2, 3 and 4 ranks, the install/consumer test). Exits non-zero
# on any failure. GPU tests skip visibly where no GPU is visible.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup-common.sh"

install_missing_packages
report_cuda
configure_and_build
log "running the test suite"
ctest --test-dir "$BUILD_DIR" --output-on-failure --parallel "$(nproc)" ${PEERPLAN_CTEST_ARGS:-}
