#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what is missing, checks the sources' format (scripts/format.sh),
# builds, and runs the whole test suite (unit tests,
# MPI tests at 2, 3 and 4 ranks (a few at 1 or 6), the install/consumer test); where the CUDA
# toolkit is found, the same tests again in a build of the CUDA backend
# without NCCL (scripts/nccl-less/stage.sh); then the unit and MPI tests
# again in a build under AddressSanitizer + UBSan (host backend;
# scripts/sanitizers/stage.sh says what runs there and why). Exits non-zero
# on any failure. GPU tests skip visibly where no GPU is visible.
#
#   PEERPLAN_SKIP_NCCL_LESS=1         skip the NCCL-less stage (local runs; CI runs it)
#   PEERPLAN_NCCL_LESS_BUILD_DIR=dir  its build directory (default: build-nonccl/)
#   PEERPLAN_SKIP_SANITIZERS=1        skip the sanitizer stage (local runs; CI runs it)
#   PEERPLAN_SANITIZER_BUILD_DIR=dir  its build directory (default: build-asan/)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup-common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/nccl-less/stage.sh"
source "$(dirname "${BASH_SOURCE[0]}")/sanitizers/stage.sh"

start=$SECONDS
# The Python package's tests need NumPy and mpi4py (the library does not), its
# install test python3-venv;
# plot_results_test needs matplotlib.
PEERPLAN_PACKAGES+=(python3-numpy python3-mpi4py python3-matplotlib python3-venv)
# The format check (scripts/format.sh) needs clang-format.
PEERPLAN_PACKAGES+=(clang-format)
install_missing_packages
use_ccache_when_present
format_status=0
"$PEERPLAN_ROOT/scripts/format.sh" --check || format_status=1
report_cuda
configure_and_build
log "running the test suite"
status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure --parallel "$(nproc)" ${PEERPLAN_CTEST_ARGS:-} || status=$?
[ $status -eq 0 ] || note_failed_tests "test suite" "$BUILD_DIR"
if [ $format_status -ne 0 ]; then status=1; PEERPLAN_FAILED_TESTS+=("format check: run scripts/format.sh"); fi
log "test suite: $([ $status -eq 0 ] && echo passed || echo FAILED) ($((SECONDS - start)) s so far)"

if [ "${PEERPLAN_SKIP_NCCL_LESS:-0}" = 1 ]; then
  log "NCCL-less stage skipped (PEERPLAN_SKIP_NCCL_LESS=1)"
else
  noted=${#PEERPLAN_FAILED_TESTS[@]}
  run_nccl_less_stage || { status=1; [ ${#PEERPLAN_FAILED_TESTS[@]} -gt $noted ] ||
    PEERPLAN_FAILED_TESTS+=("NCCL-less stage: its configure or build (see its log above)"); }
fi

if [ "${PEERPLAN_SKIP_SANITIZERS:-0}" = 1 ]; then
  log "sanitizer stage skipped (PEERPLAN_SKIP_SANITIZERS=1)"
else
  # Runs even when the suite failed: its findings often explain the failure.
  noted=${#PEERPLAN_FAILED_TESTS[@]}
  run_sanitizer_stage || { status=1; [ ${#PEERPLAN_FAILED_TESTS[@]} -gt $noted ] ||
    PEERPLAN_FAILED_TESTS+=("sanitizer stage: its configure or build (see its log above)"); }
fi
print_failed_tests
log "total: $((SECONDS - start)) s"
exit $status
