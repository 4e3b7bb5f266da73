#!/usr/bin/env bash
# Builds peerplan with the CUDA backend on a GPU host, runs the GPU test
# suite (2 ranks, one GPU each), compute-sanitizer (memcheck, racecheck) on
# small sizes, and the collective benchmark (bf16, eager and CUDA graph),
# in one go. Logs go to $OUT (or ./gpu-check-out); a short summary is
# printed last.
#   scripts/gpu-check.sh [build-dir]        env: ARCH (default 90), JOBS, SKIP_SANITIZER=1, BENCH_MAX
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
OUT=${OUT:-$PWD/gpu-check-out}
ARCH=${ARCH:-90}
JOBS=${JOBS:-$(nproc)}
BENCH_MAX=${BENCH_MAX:-64M}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
MPIRUN=(mpiexec -n 2 --oversubscribe --bind-to none)
declare -a SUMMARY
step() {  # step <name> <log> <command...>
  local name=$1 log=$2; shift 2
  local t0=$SECONDS
  "$@" >"$OUT/$log" 2>&1
  local rc=$?
  SUMMARY+=("$(printf '%-28s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$log")")
  return $rc
}

nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv >"$OUT/gpus.txt" 2>&1
nvidia-smi topo -m >>"$OUT/gpus.txt" 2>&1
step configure build.log cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DPEERPLAN_BUILD_TESTS=ON -DPEERPLAN_BUILD_EXAMPLES=ON
step build build-ninja.log ninja -C "$BUILD" -j"$JOBS" cuda_collectives_test cuda_lifecycle_test \
  peerplan_collective_bench peerplan_transformer_decode || { printf '%s\n' "${SUMMARY[@]}"; tail -40 "$OUT/build-ninja.log"; exit 1; }
cat "$OUT/build-ninja.log" >>"$OUT/build.log" && rm -f "$OUT/build-ninja.log"

step gpu-tests gpu-tests.log ctest --test-dir "$BUILD" -R '^cuda_' --output-on-failure --timeout 400
# The README's main job on this host: the example on the cuda backend, one rank per GPU.
step demo demo.log timeout 120 "${MPIRUN[@]}" "$BUILD/examples/peerplan_transformer_decode"
TESTS_SUMMARY=$(grep -hE '^\[ *(OK|FAILED|SKIPPED) *\]|tests? (passed|failed)' "$OUT/gpu-tests.log" | sort | uniq -c)

BENCH="$BUILD/benchmarks/peerplan_collective_bench"
if [[ -z "${SKIP_BENCH:-}" ]]; then
step bench-eager bench.log timeout 150 "${MPIRUN[@]}" "$BENCH" -b 1K -e "$BENCH_MAX" -f 4 -n 100 -w 10 -d bf16 -G 0 --json "$OUT/bench-eager.json"
step bench-graph bench-graph.tmp timeout 150 "${MPIRUN[@]}" "$BENCH" -b 1K -e "$BENCH_MAX" -f 4 -n 100 -w 10 -d bf16 -G 1 --json "$OUT/bench-graph.json"
step bench-fused-graph bench-fused.tmp timeout 100 "${MPIRUN[@]}" "$BENCH" --op fused --hidden 7168 -b 14K -e 4M -f 4 -n 100 -w 10 -d bf16 -G 1
# Every size on the P2P routes (--route p2p), to see where they beat NCCL: the cutoffs.
step bench-graph-p2p bench-p2p.tmp timeout 150 "${MPIRUN[@]}" "$BENCH" --route p2p -b 1K -e "$BENCH_MAX" -f 4 -n 100 -w 10 -d bf16 -G 1 --json "$OUT/bench-graph-p2p.json"
step bench-fused-p2p bench-fused-p2p.tmp timeout 100 "${MPIRUN[@]}" "$BENCH" --op fused --route p2p --hidden 7168 -b 14K -e 4M -f 4 -n 100 -w 10 -d bf16 -G 1
cat "$OUT/bench-graph.tmp" "$OUT/bench-fused.tmp" "$OUT/bench-p2p.tmp" "$OUT/bench-fused-p2p.tmp" >>"$OUT/bench.log"; rm -f "$OUT"/*.tmp
fi

if [[ -z "${SKIP_SANITIZER:-}" ]] && command -v compute-sanitizer >/dev/null; then
  T="$BUILD/mpi_tests/cuda_collectives_test"
  F='--gtest_filter=CudaAllReduce.StridedRowsOnEveryRoute:CudaAllReduce.DisabledP2PUsesNcclForEverything'
  step memcheck sanitizer.log timeout 120 "${MPIRUN[@]}" compute-sanitizer --tool memcheck --error-exitcode 9 "$T" "$F"
  step racecheck sanitizer-race.tmp timeout 120 "${MPIRUN[@]}" compute-sanitizer --tool racecheck --error-exitcode 9 "$T" "$F"
  grep -m 30 -E '^========= +(Invalid|Program hit|Host Frame|Saved host|at |by thread)' "$OUT/sanitizer.log" | head -30
  cat "$OUT/sanitizer-race.tmp" >>"$OUT/sanitizer.log"; rm -f "$OUT"/*.tmp
fi

echo "==== benchmark (bf16: eager, graph, fused graph) ===="; grep -v '^#' "$OUT/bench.log" 2>/dev/null | head -70
echo "==== sanitizer ===="; grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT"/sanitizer.log 2>/dev/null | sort | uniq -c
echo "==== test failures ===="; grep -E 'Failure|FAILED|error|Expected|Which is|Value of|actual' "$OUT/gpu-tests.log" | head -40
echo "==== demo ===="; head -6 "$OUT/demo.log"; tail -1 "$OUT/demo.log"
echo "==== tests ===="; echo "$TESTS_SUMMARY"
echo "==== summary ===="; printf '%s\n' "${SUMMARY[@]}"
