#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds peerplan with the CUDA backend on a GPU host, runs the GPU test
# suite and the example program at each rank count of RANKS (default 2),
# compute-sanitizer (memcheck, racecheck) on small sizes, and the collective
# benchmark (bf16, eager and CUDA graph), in one go. Logs go to $OUT (or
# ./gpu-check-out); a short summary is printed last, with a table of the GPU
# tests and the example: test x rank count -> passed / FAILED / TIMEOUT /
# skipped and seconds.
#   scripts/gpu-check.sh [build-dir]        env: ARCH (default 90), JOBS, SKIP_SANITIZER=1, SKIP_TESTS=1, SKIP_BENCH=1,
#                                            BENCH_MAX, REFERENCE=1 (torch NCCL + symmetric memory), REFERENCE_ARGS,
#                                            FULL=1, FULL_ITERS (100), FULL_DEADLINE (540 s),
#                                            GPU_TESTS="cuda_teardown_test ..." (build and run only these
#                                            test binaries), SKIP_DEMO=1, FALLBACK_BENCH=1,
#                                            RANKS="2 3 4 8" (rank counts of the GPU tests and the example),
#                                            TUNE=1 (peerplan_tune first; the benchmarks then use its file;
#                                            defaults.diff: what its entry would change in the defaults),
#                                            TUNE_MAX (its largest size: 256M with FULL=1, else BENCH_MAX),
#                                            TUNING_FILE=path (the benchmarks use this tuning file),
#                                            TUNE_CHECK=1 (peerplan_tune's paths on any GPU count; writes no file);
#                                            with TUNE or TUNE_CHECK, the kernel loop against the tuner's times
#                                            (agreement.md)
#
# RANKS: the GPU tests (registered at these counts: PEERPLAN_GPU_TEST_RANKS)
# and the example run once per count, 2 to 8. Ranks outnumbering the GPUs
# share them (local rank modulo the GPU count): the P2P kernels then make
# progress as the GPU time-slices the processes, the fallback is MPI, and
# the tests run fewer calls. That checks correctness at any world size on a
# host with one or two GPUs, never speed. Measured on one H200 (16 cores):
# the GPU tests took 51 s at 2 ranks, 65 s at 3, 83 s at 4, 106 s at 5,
# 142 s at 7 and 150 s at 8; with the build and the example, this run took
# 7 minutes:
#   RANKS="2 3 4 8" SKIP_SANITIZER=1 SKIP_BENCH=1 JOBS=16 bash scripts/gpu-check.sh
# The benchmark steps (and TUNE, REFERENCE, FALLBACK_BENCH) run at 2 ranks
# and only where there are 2 GPUs or more: peerplan refuses to benchmark
# ranks that share a GPU.
#
# GPU_TESTS with SKIP_SANITIZER=1 SKIP_BENCH=1 SKIP_DEMO=1 is the quick loop for
# one area, e.g. the teardown tests:
#   GPU_TESTS="cuda_teardown_test cuda_lifecycle_test" SKIP_SANITIZER=1 SKIP_BENCH=1 SKIP_DEMO=1 \
#     bash scripts/gpu-check.sh
# FALLBACK_BENCH=1 times peerplan's NCCL fallback against a plain blocking NCCL
# communicator in the same run (--route nccl, eager and CUDA graphs, 1 KiB-1 MiB).
#
# FULL=1 replaces the benchmark steps by the performance issue's whole
# comparison matrix, all --route auto: for bf16, f16 and f32, CUDA graphs and
# eager, the all-reduce from 1 KiB to 256 MiB (x4) and the fused all-reduce +
# add + RMSNorm (hidden 7168) from 1 to 1024 rows (x4, with a plain all-reduce
# of the same bytes), peerplan_call_overhead_bench (an eager call's host time
# against the launch floor), then benchmarks/reference_allreduce.py (torch NCCL and
# symmetric memory, same sizes and dtypes) when torch is importable, merged by
# benchmarks/compare_results.py into comparison.md (targets, per-dtype
# tables), with the peers (shared/bench/peers: TRT-LLM plain and fused, vLLM,
# FlashInfer PCIe IPC) and the physical limits (shared/bench/limits.cu) when
# a copy of shared/bench is in the checkout (SHARED_BENCH, default
# .shared-bench; carry it to the GPU host). Each FULL step's timeout is cut to what is left before
# FULL_DEADLINE seconds from the start (steps with < 15 s left are skipped),
# so that the call ends in time; for a run under 600 s:
#   FULL=1 SKIP_TESTS=1 SKIP_SANITIZER=1 JOBS=32 bash scripts/gpu-check.sh build-gpu
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
OUT=${OUT:-$PWD/gpu-check-out}
RANKS=${RANKS:-2}
ARCH=${ARCH:-90}
JOBS=${JOBS:-$(nproc)}
BENCH_MAX=${BENCH_MAX:-64M}
FULL=${FULL:-}
FULL_DEADLINE=${FULL_DEADLINE:-540}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)  # ctest writes its JUnit files there from the build directory
# The end replaces OUT's contents by one archive: only an empty folder, or
# one an earlier run made (its marker), is used - never a folder of yours.
if [[ ! -e "$OUT/.gpu-check-out" && -n "$(ls -A "$OUT")" ]]; then
  echo "OUT=$OUT holds files that gpu-check.sh did not write, and the run ends by replacing" \
    "its contents with gpu-check.tgz; name a new or empty folder" >&2
  exit 2
fi
touch "$OUT/.gpu-check-out"
for n in $RANKS; do
  [[ $n =~ ^[2-8]$ ]] || { echo "RANKS=\"$RANKS\": each rank count must be 2 to 8" >&2; exit 2; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The benchmark, the tuner, compute-sanitizer and the reference: 2 ranks.
MPIRUN=(mpiexec -n 2 --oversubscribe --bind-to none)
GPU_COUNT=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# peerplan's benchmark and tuner refuse ranks that share a GPU (and torch's
# NCCL reference cannot run them): those steps need a GPU per rank.
BENCH_BLOCKER=""
((GPU_COUNT < 2)) && BENCH_BLOCKER="skipped: $GPU_COUNT GPU(s), the benchmark needs one per rank (2)"
declare -a SUMMARY
step() {  # step <name> <log> <command...>
  local name=$1 log=$2; shift 2
  local t0=$SECONDS
  "$@" >"$OUT/$log" 2>&1
  local rc=$?
  SUMMARY+=("$(printf '%-28s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$log")")
  return $rc
}
tstep() {  # tstep <name> <log> <timeout s> <command...>: step under `timeout`; with FULL=1 the
           # timeout is cut to what is left before FULL_DEADLINE (keeping 30 s for the end)
  local name=$1 log=$2 t=$3; shift 3
  if [[ -z "$FULL" ]]; then step "$name" "$log" timeout "$t" "$@"; return; fi
  local left=$((FULL_DEADLINE - SECONDS - 30))
  ((left < t)) && t=$left
  if ((t < 15)); then
    SUMMARY+=("$(printf '%-28s skipped: past FULL_DEADLINE=%ss' "$name" "$FULL_DEADLINE")")
    return 124
  fi
  step "$name" "$log" timeout -k 10 "$t" "$@"
}

nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv >"$OUT/gpus.txt" 2>&1
nvidia-smi topo -m >>"$OUT/gpus.txt" 2>&1
step configure build.log cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DPEERPLAN_BUILD_TESTS=ON -DPEERPLAN_BUILD_EXAMPLES=ON \
  -DPEERPLAN_GPU_TEST_RANKS="${RANKS// /;}"
# Only what the steps asked for are built.
TARGETS=()
if [[ -n "$BENCH_BLOCKER" ]]; then
  if [[ -n "$FULL" || -z "${SKIP_BENCH:-}" || -n "${FALLBACK_BENCH:-}" || -n "${TUNE:-}" || -n "${REFERENCE:-}" ]]; then
    SUMMARY+=("$(printf '%-28s %s' benchmark "$BENCH_BLOCKER")")
  fi
  SKIP_BENCH=1 FULL="" FALLBACK_BENCH="" TUNE="" REFERENCE=""
fi
[[ -n "$FULL" || -z "${SKIP_BENCH:-}" || -n "${FALLBACK_BENCH:-}" ]] && TARGETS+=(peerplan_collective_bench)
[[ -n "$FULL" ]] && TARGETS+=(peerplan_call_overhead_bench)
[[ -n "${TUNE:-}" || -n "${TUNE_CHECK:-}" ]] && TARGETS+=(peerplan_tune peerplan_kernel_loop)
[[ -z "${SKIP_DEMO:-}" ]] && TARGETS+=(peerplan_transformer_decode)
# The GPU test binaries, for the GPU tests and for compute-sanitizer: every
# peerplan_add_gpu_test of mpi_tests/CMakeLists.txt (so that a new one is never
# left unbuilt), and the NCCL build's test.
mapfile -t TEST_BINARIES < <(sed -n 's/^ *peerplan_add_gpu_test(\([a-z0-9_]*\)[ )].*/\1/p' \
                               mpi_tests/CMakeLists.txt)
TEST_BINARIES+=(cuda_nccl_build_test)
TEST_REGEX='^cuda_.*\.np'  # + the rank count
if [[ -n "${GPU_TESTS:-}" ]]; then
  read -r -a TEST_BINARIES <<<"$GPU_TESTS"
  TEST_REGEX="^($(IFS='|'; echo "${TEST_BINARIES[*]}"))\\.np"
  [[ -z "${SKIP_SANITIZER:-}" ]] && TEST_BINARIES+=(cuda_collectives_test cuda_registration_test cuda_two_shot_protocols_test
                                                    cuda_fused_lamport_test)
fi
if [[ -z "${SKIP_TESTS:-}" || -z "${SKIP_SANITIZER:-}" ]]; then
  TARGETS=("${TEST_BINARIES[@]}" "${TARGETS[@]}")
fi
step build build-ninja.log ninja -C "$BUILD" -j"$JOBS" "${TARGETS[@]}" || { printf '%s\n' "${SUMMARY[@]}"; tail -40 "$OUT/build-ninja.log"; exit 1; }
cat "$OUT/build-ninja.log" >>"$OUT/build.log" && rm -f "$OUT/build-ninja.log"

if [[ -z "${SKIP_TESTS:-}" ]]; then
  rm -f "$OUT"/gpu-tests*.log "$OUT"/gpu-tests-np*.xml
  for n in $RANKS; do
    # Each test's timeout is its registration's (longer at more ranks); the
    # JUnit file keeps every test's output for the table at the end.
    step "gpu-tests-np$n" "gpu-tests-np$n.log" ctest --test-dir "$BUILD" -R "$TEST_REGEX$n\$" \
      --output-on-failure --timeout 400 --output-junit "$OUT/gpu-tests-np$n.xml" \
      --test-output-size-passed 4000000 --test-output-size-failed 4000000
    cat "$OUT/gpu-tests-np$n.log" >>"$OUT/gpu-tests.log"
  done
  TESTS_SUMMARY=$(grep -hE '^\[ *(OK|FAILED|SKIPPED) *\]|tests? (passed|failed)' "$OUT/gpu-tests.log" | sort | uniq -c)
else
  TESTS_SUMMARY="GPU tests skipped (SKIP_TESTS=1)"
fi
# The README's main job on this host: the example on the cuda backend, at
# each rank count (sharing GPUs where the ranks outnumber them).
if [[ -z "${SKIP_DEMO:-}" ]]; then
  : >"$OUT/demo-results.tsv"
  for n in $RANKS; do
    t0=$SECONDS
    tstep "demo-np$n" "demo-np$n.log" $((60 * n)) mpiexec -n "$n" --oversubscribe --bind-to none \
      "$BUILD/examples/peerplan_transformer_decode"
    rc=$?
    verdict=$([[ $rc == 0 ]] && echo passed || { [[ $rc == 124 ]] && echo TIMEOUT || echo "FAILED(rc=$rc)"; })
    printf 'transformer_decode\t%s\t%s\t%s\n' "$n" "$verdict" "$((SECONDS - t0))" >>"$OUT/demo-results.tsv"
  done
fi

# The crossovers and protocol windows of this machine, as peerplan_tune
# measures them (TUNE=1), before the benchmarks: with FULL=1 these then run
# on the fresh tuning file. TUNING_FILE=path runs the benchmarks on a file
# from an earlier call instead (carried in the checkout). It sweeps up to
# TUNE_MAX: 256M with FULL=1, so that the two-shot's limit is measured over
# the sizes FULL benchmarks (128-256 MiB go to NCCL unless the file raises
# it), else BENCH_MAX.
if [[ -n "${TUNE:-}" ]]; then
  TUNE_MAX=${TUNE_MAX:-$([[ -n "$FULL" ]] && echo 256M || echo "$BENCH_MAX")}
  tstep tune tune.log 300 "${MPIRUN[@]}" "$BUILD/tools/peerplan_tune/peerplan_tune" --out "$OUT/h200.tune" -b 1K -e "$TUNE_MAX" --graph 1 \
    --json "$OUT/tune.json"
  [[ -s "$OUT/h200.tune" ]] && TUNING_FILE="$OUT/h200.tune"
  # What making this entry the built-in defaults would change (docs/tuning.md).
  [[ -s "$OUT/h200.tune" ]] && python3 scripts/defaults_from_tune.py "$OUT/h200.tune" --check \
    >"$OUT/defaults.diff" 2>&1
fi
# TUNE_CHECK=1: peerplan_tune's paths (routes and the CUDA protocol sweep,
# each call checked for the route and protocol it forces) on any GPU count,
# ranks sharing a GPU included (--allow-shared-gpus: no file is written).
if [[ -n "${TUNE_CHECK:-}" ]]; then
  tstep tune-check tune-check.log 200 "${MPIRUN[@]}" "$BUILD/tools/peerplan_tune/peerplan_tune" --allow-shared-gpus \
    --out "$OUT/check.tune" -b 1K -e 4M --protocols-max 4M -n 10 --batches 2 -w 2 --graph 1 --json "$OUT/tune-check.json"
fi
if [[ -n "${TUNING_FILE:-}" ]]; then
  export PEERPLAN_TUNING_FILE=$(cd "$(dirname "$TUNING_FILE")" && pwd)/$(basename "$TUNING_FILE")
  MPIRUN+=(-x PEERPLAN_TUNING_FILE)
  SUMMARY+=("$(printf '%-28s %s' tuning-file "benchmarks run with PEERPLAN_TUNING_FILE=$PEERPLAN_TUNING_FILE")")
fi

BENCH="$BUILD/benchmarks/peerplan_collective_bench"
if [[ -n "$FULL" ]]; then
  # The whole matrix, --route auto (see the header). 14 KiB rows for bf16/f16,
  # 28 KiB for f32: every dtype runs 1, 4, 16, 64, 256 and 1024 rows.
  for d in bf16 f16 f32; do
    if [[ $d == f32 ]]; then FB=28K FE=32M; else FB=14K FE=16M; fi
    for G in 1 0; do
      m=$([[ $G == 1 ]] && echo graph || echo eager)
      tstep "allreduce-$d-$m" "bench-allreduce-$d-$m.log" 100 "${MPIRUN[@]}" "$BENCH" --route auto -b 1K -e 256M -f 4 \
        -n "${FULL_ITERS:-100}" -w 10 -d $d -G $G --json "$OUT/bench-allreduce-$d-$m.json"
      tstep "fused-$d-$m" "bench-fused-$d-$m.log" 60 "${MPIRUN[@]}" "$BENCH" --route auto --op fused --hidden 7168 \
        -b $FB -e $FE -f 4 -n "${FULL_ITERS:-100}" -w 10 -d $d -G $G --json "$OUT/bench-fused-$d-$m.json"
    done
  done
  # An eager call's host time against the launch floor, and the library's
  # launch of an empty kernel a piece at a time (RESULTS.md, "A call's host time").
  tstep call-overhead call-overhead.log 60 "${MPIRUN[@]}" "$BUILD/benchmarks/peerplan_call_overhead_bench" \
    --json "$OUT/call-overhead.json"
  if python3 -c 'import torch' 2>/dev/null; then
    tstep reference reference.log 200 python3 benchmarks/reference_allreduce.py --out "$OUT/reference.json" \
      ${REFERENCE_ARGS:--b 1K -e 256M -f 4 --dtypes bf16,f16,f32 --modes eager,graph --hidden 7168 --fused-max 16M}
  else
    SUMMARY+=("reference                    skipped: python3 cannot import torch")
  fi
  # The strongest shipped peers (TRT-LLM, vLLM, FlashInfer PCIe IPC) and the
  # physical floor, from the shared bench copied into the checkout
  # (SHARED_BENCH, default .shared-bench: `cp -r ../shared/bench .shared-bench`,
  # ignored by git, carried to the GPU host).
  SB=${SHARED_BENCH:-.shared-bench}
  if [[ -f "$SB/peers/run.sh" ]]; then
    tstep peers peers.log 150 env BENCH_TIMEOUT=140 bash "$SB/peers/run.sh" "$OUT/peers"
  else
    SUMMARY+=("peers                        skipped: no $SB/peers/run.sh")
  fi
  if [[ -f "$SB/limits.cu" ]] && nvcc -O3 -arch=sm_"$ARCH" -o "$BUILD/limits" "$SB/limits.cu" >"$OUT/limits-build.log" 2>&1; then
    tstep limits limits.txt 60 "$BUILD/limits"
  fi
  REF=()
  [[ -s "$OUT/reference.json" ]] && REF=(--reference "$OUT/reference.json")
  [[ -s "$OUT/peers/peers.json" ]] && REF+=(--peers "$OUT/peers/peers.json")
  [[ -s "$OUT/limits.txt" ]] && REF+=(--limits "$OUT/limits.txt")
  python3 benchmarks/compare_results.py ${REF[@]+"${REF[@]}"} "$OUT"/bench-*.json >"$OUT/comparison.md" 2>&1
elif [[ -z "${SKIP_BENCH:-}" ]]; then
step bench-eager bench.log timeout 150 "${MPIRUN[@]}" "$BENCH" -b 1K -e "$BENCH_MAX" -f 4 -n 100 -w 10 -d bf16 -G 0 --json "$OUT/bench-eager.json"
step bench-graph bench-graph.tmp timeout 150 "${MPIRUN[@]}" "$BENCH" -b 1K -e "$BENCH_MAX" -f 4 -n 100 -w 10 -d bf16 -G 1 --json "$OUT/bench-graph.json"
step bench-fused-graph bench-fused.tmp timeout 100 "${MPIRUN[@]}" "$BENCH" --op fused --hidden 7168 -b 14K -e 4M -f 4 -n 100 -w 10 -d bf16 -G 1 --json "$OUT/bench-fused-graph.json"
# Every size on the P2P routes (--route p2p), to see where they beat NCCL: the cutoffs.
step bench-graph-p2p bench-p2p.tmp timeout 150 "${MPIRUN[@]}" "$BENCH" --route p2p -b 1K -e "$BENCH_MAX" -f 4 -n 100 -w 10 -d bf16 -G 1 --json "$OUT/bench-graph-p2p.json"
step bench-fused-p2p bench-fused-p2p.tmp timeout 100 "${MPIRUN[@]}" "$BENCH" --op fused --route p2p --hidden 7168 -b 14K -e 4M -f 4 -n 100 -w 10 -d bf16 -G 1 --json "$OUT/bench-fused-graph-p2p.json"
# The same P2P routes by pull (PEERPLAN_TRANSFER_MODE=pull; inputs staged, not registered).
step bench-graph-pull bench-pull.tmp timeout 150 env PEERPLAN_TRANSFER_MODE=pull "${MPIRUN[@]}" -x PEERPLAN_TRANSFER_MODE "$BENCH" --route p2p -b 1K -e "$BENCH_MAX" -f 4 -n 100 -w 10 -d bf16 -G 1 --json "$OUT/bench-graph-pull.json"
# The push one-shot's protocols (PEERPLAN_ONE_SHOT_LAMPORT=never / all, one communicator
# each) side by side at every size up to 4 MiB, one-shot forced, same run.
step bench-protocols bench-protocols.tmp timeout 150 "${MPIRUN[@]}" "$BENCH" --route one_shot --protocols never,all -b 1K -e 4M -f 4 -n 100 -w 10 -d bf16 -G 1 --json "$OUT/protocols-graph.json"
# The fused op's protocols (PEERPLAN_FUSED_LAMPORT=never / all, one communicator each;
# the first one runs the default, auto) side by side, 1 to 1024 rows, P2P forced.
step bench-fused-protocols bench-fused-protocols.tmp timeout 150 "${MPIRUN[@]}" "$BENCH" --op fused --route p2p --hidden 7168 --protocols never,all -b 14K -e 14M -f 4 -n 100 -w 10 -d bf16 -G 1 --json "$OUT/fused-protocols-graph.json"
# Other dtypes (auto routes, graph), for the per-byte comparison with bf16.
for d in f16 f32; do
  step "bench-graph-$d" "bench-$d.tmp" timeout 150 "${MPIRUN[@]}" "$BENCH" -b 1K -e "$BENCH_MAX" -f 4 -n 100 -w 10 -d $d -G 1 --json "$OUT/bench-graph-$d.json"
done
# The fused op with every message on LL lines, and with none (FUSED_SWEEP=1).
if [[ -n "${FUSED_SWEEP:-}" ]]; then
  for ll in never 64M; do
    step "bench-fused-ll-$ll" "bench-fused-ll-$ll.tmp" timeout 100 env PEERPLAN_FUSED_LL=$ll "${MPIRUN[@]}" -x PEERPLAN_FUSED_LL "$BENCH" --op fused --route p2p --hidden 7168 -b 14K -e 4M -f 4 -n 100 -w 10 -d bf16 -G 1
  done
fi
cat "$OUT/bench-graph.tmp" "$OUT/bench-fused.tmp" "$OUT/bench-p2p.tmp" "$OUT/bench-fused-p2p.tmp" "$OUT/bench-pull.tmp" "$OUT/bench-protocols.tmp" "$OUT"/bench-f*.tmp >>"$OUT/bench.log" 2>/dev/null; rm -f "$OUT"/*.tmp
fi
# peerplan's NCCL fallback (with its bookkeeping for bounded teardown) against
# a plain NCCL communicator of the benchmark's own (FALLBACK_BENCH=1).
if [[ -n "${FALLBACK_BENCH:-}" ]]; then
  for G in 0 1; do
    step "fallback-vs-nccl-G$G" "bench-fallback-G$G.log" timeout 100 "${MPIRUN[@]}" "$BENCH" --route nccl \
      -b 1K -e 1M -f 4 -n 200 -w 20 -d bf16 -G $G
  done
fi
# NCCL and PyTorch symmetric memory through torch, on the same GPUs (REFERENCE=1).
if [[ -z "$FULL" && -n "${REFERENCE:-}" ]] && python3 -c 'import torch' 2>/dev/null; then
  step reference reference.log timeout 240 python3 benchmarks/reference_allreduce.py --out "$OUT/reference.json" ${REFERENCE_ARGS:-}
  python3 benchmarks/compare_results.py --reference "$OUT/reference.json" "$OUT"/bench-*.json >"$OUT/comparison.md" 2>&1
fi

# The one-GPU kernel loop's ranking of the kernels the tuner timed, against
# the tuner's own times (TUNE=1: a GPU per rank; TUNE_CHECK=1: ranks sharing
# one GPU, time slices, which checks only the path): 2 virtual ranks on the
# first GPU, at sizes the tuner swept (rows of hidden 7168 as it has them),
# into agreement.md (benchmarks/loop_agreement.py; benchmarks/kernel-loop.md's
# agreement table).
TUNE_JSON=""
[[ -s "$OUT/tune.json" ]] && TUNE_JSON="$OUT/tune.json"
[[ -z "$TUNE_JSON" && -s "$OUT/tune-check.json" ]] && TUNE_JSON="$OUT/tune-check.json"
if [[ -n "$TUNE_JSON" ]]; then
  tstep loop-agreement loop-agreement.log 90 env CUDA_VISIBLE_DEVICES=0 "$BUILD/benchmarks/peerplan_kernel_loop" \
    --ranks 2 --sizes 1K,16K,256K,1M --rows 1,4,18,73 --pdl on --timeout-ms 1000 --json "$OUT/loop-agreement.json" \
    --cases one_shot_ll,one_shot_lamport,two_shot,two_shot_lamport,two_shot_dma,fused_ll,fused_lamport,fused_two_shot_rows
  step agreement agreement.log python3 benchmarks/loop_agreement.py --loop "$OUT/loop-agreement.json" \
    --tune "$TUNE_JSON" --md "$OUT/agreement.md"
fi

if [[ -z "${SKIP_SANITIZER:-}" ]] && command -v compute-sanitizer >/dev/null; then
  T="$BUILD/mpi_tests/cuda_collectives_test"
  F='--gtest_filter=CudaAllReduce.StridedRowsOnEveryRoute:CudaAllReduce.DisabledP2PUsesTheFallbackForEverything:CudaFused.RowClusters*'
  tstep memcheck sanitizer.log 120 "${MPIRUN[@]}" compute-sanitizer --tool memcheck --error-exitcode 9 "$T" "$F"
  tstep racecheck sanitizer-race.tmp 120 "${MPIRUN[@]}" compute-sanitizer --tool racecheck --error-exitcode 9 "$T" "$F"
  grep -m 30 -E '^========= +(Invalid|Program hit|Host Frame|Saved host|at |by thread)' "$OUT/sanitizer.log" 2>/dev/null | head -30
  cat "$OUT/sanitizer-race.tmp" >>"$OUT/sanitizer.log" 2>/dev/null; rm -f "$OUT"/*.tmp
  tstep memcheck-pull sanitizer-pull.tmp 120 "${MPIRUN[@]}" compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD/mpi_tests/cuda_registration_test" '--gtest_filter=CudaRegistration.RanksMix*'
  cat "$OUT/sanitizer-pull.tmp" >>"$OUT/sanitizer.log" 2>/dev/null; rm -f "$OUT"/*.tmp
  # The two-shot's other protocols: the copy engines' reduce kernel and
  # the copies around it, and the Lamport two-shot (strided rows included).
  D='--gtest_filter=*/CudaTwoShotProtocol.StridedRows*:*/CudaTwoShotProtocol.AMessageInPieces*'
  W="$BUILD/mpi_tests/cuda_two_shot_protocols_test"
  tstep memcheck-two-shot sanitizer-two-shot.tmp 180 "${MPIRUN[@]}" compute-sanitizer --tool memcheck --error-exitcode 9 "$W" "$D"
  cat "$OUT/sanitizer-two-shot.tmp" >>"$OUT/sanitizer.log" 2>/dev/null; rm -f "$OUT"/*.tmp
  tstep racecheck-two-shot sanitizer-two-shot.tmp 180 "${MPIRUN[@]}" compute-sanitizer --tool racecheck --error-exitcode 9 "$W" "$D"
  cat "$OUT/sanitizer-two-shot.tmp" >>"$OUT/sanitizer.log" 2>/dev/null; rm -f "$OUT"/*.tmp
  # The Lamport fused op's rows in clusters: the partial sums that the blocks
  # of a cluster send each other into shared memory (rms_norm_row.cuh).
  L="$BUILD/mpi_tests/cuda_fused_lamport_test"
  for tool in memcheck racecheck; do
    tstep "$tool-fused-lamport" sanitizer-fused.tmp 180 "${MPIRUN[@]}" compute-sanitizer --tool "$tool" --error-exitcode 9 "$L" '--gtest_filter=CudaFusedLamport.RowClusters*'
    cat "$OUT/sanitizer-fused.tmp" >>"$OUT/sanitizer.log" 2>/dev/null; rm -f "$OUT"/*.tmp
  done
fi

if [[ -n "$FULL" ]]; then
  # The device returns only the end of the output: the targets and bf16 here, every dtype in comparison.md.
  echo "==== #wrong per run ===="; grep -H '# total #wrong' "$OUT"/bench-*.log 2>/dev/null | sed 's|.*/bench-||; s|\.log:# total #wrong |=|' | paste -sd ' ' | fold -s -w 150
  echo "==== comparison: peers and targets (every dtype: comparison.md in gpu-check.tgz) ===="
  awk '/^## /{p = ($0 ~ /^## (Against the peers.*|Targets)$/)} p && !/^From the route-auto|^`/' "$OUT/comparison.md" 2>/dev/null | grep -v '^$' | head -70
  echo "==== eager host ns per call (call-overhead.log) ===="; grep -E '^(allreduce|fused|launch)|x$' "$OUT/call-overhead.log" 2>/dev/null | head -30
else
echo "==== benchmark ===="; grep -v 'size(B)\|# total' "$OUT/bench.log" 2>/dev/null | awk '/^#/ {print substr($0, 1, 110); next} {print $1, $3, $4, $5, $8, $9, $10}' | head -130
[[ -f "$OUT/protocols-graph.json" ]] && { echo "==== one-shot protocols (us: size, ll, lamport, nccl) ===="; python3 -c 'import json,sys; [print(r["bytes"], r["protocol_time_us"]["ll"], r["protocol_time_us"]["lamport"], r["nccl_time_us"]) for r in json.load(open(sys.argv[1]))["rows"]]' "$OUT/protocols-graph.json" 2>/dev/null; }
[[ -f "$OUT/fused-protocols-graph.json" ]] && { echo "==== fused protocols (us: rows, auto, ll, lamport, plain all-reduce, nccl+norm) ===="; python3 -c 'import json,sys; [print(r["rows"], r["time_us"], r["protocol_time_us"]["ll"], r["protocol_time_us"]["lamport"], r["plain_time_us"], r["nccl_time_us"]) for r in json.load(open(sys.argv[1]))["rows"]]' "$OUT/fused-protocols-graph.json" 2>/dev/null; }
[[ -f "$OUT/comparison.md" ]] && { echo "==== comparison (graph, bf16) ===="; grep -A14 -m1 -i 'bf16.*graph' "$OUT/comparison.md"; }
fi
[[ -f "$OUT/tune.log" ]] && { echo "==== peerplan_tune ===="; tail -40 "$OUT/tune.log"; }
[[ -f "$OUT/defaults.diff" ]] && { echo "==== the built-in defaults from this entry (scripts/defaults_from_tune.py) ===="; grep -E '^[-+]const|^defaults_from|: the block' "$OUT/defaults.diff"; }
[[ -f "$OUT/tune-check.log" ]] && { echo "==== peerplan_tune --allow-shared-gpus (times are not this machine's) ===="; tail -30 "$OUT/tune-check.log"; }
[[ -f "$OUT/agreement.log" ]] && { echo "==== the kernel loop against the tuner (agreement.md) ===="; cat "$OUT/agreement.log"; }
echo "==== sanitizer ===="; grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT"/sanitizer.log 2>/dev/null | sort | uniq -c
echo "==== test failures ===="; grep -E 'Failure|FAILED|error|Expected|Which is|Value of|actual|exception' "$OUT/gpu-tests.log" 2>/dev/null | head -40
for f in "$OUT"/demo-np*.log; do [[ -f "$f" ]] && { echo "==== $(basename "$f" .log) ===="; head -6 "$f"; tail -1 "$f"; }; done
for f in "$OUT"/bench-fallback-G*.log; do [[ -f "$f" ]] && { echo "==== $(basename "$f") ===="; grep -v '^# *$' "$f" | head -14; }; done
echo "==== tests ===="; echo "$TESTS_SUMMARY"
if [[ -z "${SKIP_TESTS:-}" || -z "${SKIP_DEMO:-}" ]]; then
  echo "==== GPU tests and example by rank count ($GPU_COUNT GPU(s); more ranks than GPUs share them) ===="
  junit=("$OUT"/gpu-tests-np*.xml)
  [[ -e ${junit[0]} ]] || junit=()
  python3 scripts/gpu_test_table.py --rows "$OUT/demo-results.tsv" ${junit[@]+"${junit[@]}"} \
    | tee "$OUT/table.txt"
fi
echo "==== summary ===="; printf '%s\n' "${SUMMARY[@]}"
# Everything in one archive: the device tool returns at most 8 files.
printf '%s\n' "${SUMMARY[@]}" >"$OUT/summary.txt"
archive=$(mktemp "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
tar czf "$archive" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "$archive" "$OUT/gpu-check.tgz"
