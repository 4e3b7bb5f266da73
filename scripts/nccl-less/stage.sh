# SPDX-License-Identifier: Apache-2.0
# The NCCL-less stage of scripts/test.sh (sourced after setup-common.sh).
#
# A second build (PEERPLAN_NCCL_LESS_BUILD_DIR, default build-nonccl/) of
# the CUDA backend without NCCL (-DPEERPLAN_WITH_NCCL=OFF), as HPC sites
# with the CUDA toolkit and MPI but no NCCL build it. It must compile
# without <nccl.h> (the build puts an nccl.h that is an #error first on its
# include path, so this holds even on machines where NCCL is installed),
# link without libnccl, and pass the host-side tests:
#   - the unit tests, and every MPI test binary at its rank counts but 3
#     and 4 (1, 2 and 6: the GPU tests skip visibly without a GPU;
#     cuda_nccl_build_test runs anyway);
#   - the install test: the package of a build without NCCL (no libnccl
#     needed, peerplan_HAVE_NCCL OFF, pkg-config nccl=no).
#
# To keep it short on the 2-core CI machine (about 11 minutes there from a
# clean build directory, 9 of them building): CUDA code is compiled for one
# architecture (sm_90), not run (no GPU in CI); the benchmarks, examples and
# tools are not built (the only CUDA benchmark compares against NCCL and
# needs it; the others compile the same way with or without NCCL, and the
# main build covers them); the MPI tests' runs at 3 and 4 ranks (the
# *.np3 / *.np4 ctests, fault scenarios included) are left out: without a
# GPU this build runs the host backend, whose code is the main build's, so
# those runs would repeat the main stage's (about 3 minutes), while each
# binary's run at 2 ranks still shows it links and loads without NCCL.
#
#   PEERPLAN_NCCL_LESS_ALL_RANKS=1      also run the 3- and 4-rank ctests
#   PEERPLAN_NCCL_LESS_CTEST_ARGS=...   more ctest arguments (e.g. -R cuda_)
#
# Skipped, saying why, where no CUDA toolkit (nvcc) is found (a build
# without CUDA has no NCCL either: the main build is then that build) and
# where the main build has no NCCL itself (its tests were this stage's).

run_nccl_less_stage() {
  local dir="${PEERPLAN_NCCL_LESS_BUILD_DIR:-$PEERPLAN_ROOT/build-nonccl}"
  local stage_start=$SECONDS
  if ! command -v nvcc >/dev/null 2>&1; then
    log "NCCL-less stage skipped: no CUDA toolkit (nvcc) found, so there is no CUDA backend to build without NCCL"
    return 0
  fi
  if grep -qx 'cuda_backend=yes' "$BUILD_DIR/peerplan.pc" 2>/dev/null &&
     grep -qx 'nccl=no' "$BUILD_DIR/peerplan.pc" 2>/dev/null; then
    log "NCCL-less stage skipped: the main build ($BUILD_DIR) has the CUDA backend without NCCL already, and its tests ran"
    return 0
  fi
  local generator=()
  if [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
  fi
  log "NCCL-less stage: the CUDA backend without NCCL (MPI fallback only) in $dir"
  cmake -S "$PEERPLAN_ROOT" -B "$dir" "${generator[@]}" \
    -DPEERPLAN_WITH_CUDA=ON -DPEERPLAN_WITH_NCCL=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DPEERPLAN_BUILD_BENCHMARKS=OFF -DPEERPLAN_BUILD_EXAMPLES=OFF -DPEERPLAN_BUILD_TOOLS=OFF \
    || return 1
  cmake --build "$dir" --parallel "$(nproc)" || return 1
  log "NCCL-less stage: built in $((SECONDS - stage_start)) s; running the tests"

  local rc=0 rank_filter=(-E '[.]np[34]$')
  if [ "${PEERPLAN_NCCL_LESS_ALL_RANKS:-0}" = 1 ]; then
    rank_filter=()
  fi
  ctest --test-dir "$dir" --output-on-failure --parallel "$(nproc)" "${rank_filter[@]}" \
        ${PEERPLAN_NCCL_LESS_CTEST_ARGS:-} || rc=$?
  [ $rc -eq 0 ] || note_failed_tests "NCCL-less stage" "$dir"
  log "NCCL-less stage: $([ $rc -eq 0 ] && echo passed || echo FAILED) ($((SECONDS - stage_start)) s)"
  return $rc
}
