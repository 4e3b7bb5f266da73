# SPDX-License-Identifier: Apache-2.0
# The sanitizer stage of scripts/test.sh (sourced after setup-common.sh).
#
# A second build (PEERPLAN_SANITIZER_BUILD_DIR, default build-asan/) of the
# host backend only (-DPEERPLAN_WITH_CUDA=OFF: the CUDA code cannot run
# without a GPU, and nvcc-built objects are not instrumented) with
# AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer, -O1
# and assertions on. Any finding fails the test that made it: UBSan with
# -fno-sanitize-recover=all aborts, ASan stops at its first error, LSan
# makes the process exit non-zero at exit, and the MPI harness turns a
# rank's non-zero exit into a failed ctest.
#
# The unit tests and the MPI tests run at their usual rank counts (1 to 4,
# and 6), except:
#   - the tests labelled install (install_consumer, python_pip_install_test,
#     install_rpath_dirs, install_pkg_config_paths): they install the
#     instrumented library and build or load consumers with plain flags,
#     which cannot start ("ASan runtime does not come first in initial
#     library list") because nothing links the ASan runtime into them. They
#     test packaging, not memory safety, and run in the normal stage;
#   - the soak test runs 30 cycles instead of 1000 (communicator_soak_test.cpp).
#
# Open MPI forwards mpiexec's environment to the ranks it starts on this
# node, so the *_OPTIONS below (and with them the suppression files) reach
# every rank.
#
# Suppressions (scripts/sanitizers/*.supp) cover third-party internals only;
# each entry says what and why.

run_sanitizer_stage() {
  local dir="${PEERPLAN_SANITIZER_BUILD_DIR:-$PEERPLAN_ROOT/build-asan}"
  local here="$PEERPLAN_ROOT/scripts/sanitizers"
  local flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
  local stage_start=$SECONDS
  local generator=()
  if [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
  fi
  log "sanitizer stage: ASan + LSan + UBSan build of the host backend in $dir"
  cmake -S "$PEERPLAN_ROOT" -B "$dir" "${generator[@]}" \
    -DPEERPLAN_WITH_CUDA=OFF -DPEERPLAN_BUILD_BENCHMARKS=OFF -DPEERPLAN_BUILD_EXAMPLES=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" \
    "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$flags" \
    "-DCMAKE_SHARED_LINKER_FLAGS=$flags" || return 1
  cmake --build "$dir" --parallel "$(nproc)" || return 1
  log "sanitizer stage: built in $((SECONDS - stage_start)) s; running the tests"

  local rc=0
  # fast_unwind_on_malloc=0: Open MPI and hwloc have no frame pointers, so
  # the fast unwinder records one frame of their allocations, too few for
  # the suppressions to match (about 2x slower mallocs).
  ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:check_initialization_order=1:strict_init_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
  LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
  UBSAN_OPTIONS="suppressions=$here/ubsan.supp:print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
    ctest --test-dir "$dir" --output-on-failure --parallel "$(nproc)" -LE install \
          ${PEERPLAN_SANITIZER_CTEST_ARGS:-} || rc=$?
  [ $rc -eq 0 ] || note_failed_tests "sanitizer stage" "$dir"
  log "sanitizer stage: $([ $rc -eq 0 ] && echo passed || echo FAILED) ($((SECONDS - stage_start)) s)"
  return $rc
}
