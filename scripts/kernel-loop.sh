#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one-GPU kernel loop (benchmarks/kernel_loop.cu) on a GPU host, in one
# go: a Release build of only its target, the loopback floor
# (loopback_limits.cu, when a copy lies in the tree's root or at
# $LOOPBACK), the loop itself (table and JSON), then one ncu profile of a
# small one-shot case. Logs and JSON go to $OUT (or ./kernel-loop-out); a
# short table is printed last.
#   scripts/kernel-loop.sh [build-dir]   env: ARCH (90), JOBS (16), LOOP_ARGS (extra flags for
#                                        kernel_loop), SKIP_NCU=1, NCU_CASE (one_shot_ll),
#                                        NCU_KERNEL (one_shot_kernel: a regex of its kernel name),
#                                        LOOP_TIMEOUT (200 s a pass),
#                                        PDL_PASSES ("off on")
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-loop}
OUT=${OUT:-$PWD/kernel-loop-out}
mkdir -p "$OUT"
ARCH=${ARCH:-90}
JOBS=${JOBS:-16}
LOOPBACK=${LOOPBACK:-loopback_limits.cu}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv \
  > "$OUT/gpu.txt" 2>&1
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPEERPLAN_WITH_CUDA=ON \
         -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DPEERPLAN_BUILD_TESTS=OFF \
         -DPEERPLAN_BUILD_EXAMPLES=OFF -DPEERPLAN_BUILD_TOOLS=OFF &&
       cmake --build "$BUILD" --target peerplan_kernel_loop -j "$JOBS"; } \
    > "$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"
  echo "kernel-loop: the build failed (log: $OUT/build.log)"
  exit 1
fi
LOOP="$BUILD/benchmarks/peerplan_kernel_loop"

FLOOR_ARGS=()
if [[ -f "$LOOPBACK" ]]; then
  nvcc -O3 -arch="sm_$ARCH" -o "$BUILD/loopback_limits" "$LOOPBACK" >> "$OUT/build.log" 2>&1 &&
    timeout 120 "$BUILD/loopback_limits" > "$OUT/loopback.txt" 2>&1
  cat "$OUT/loopback.txt"
  # The median of its graph-step lines: this run's own floor.
  step=$(awk -F': ' '/graph step/ {sub(/ us.*/, "", $2); print $2}' "$OUT/loopback.txt" | sort -n |
         awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}')
  [[ -n "$step" ]] && FLOOR_ARGS=(--floor-us "$step")
else
  echo "kernel-loop: no $LOOPBACK; the floor stays the recorded 1.34 us"
fi

# Twice: without programmatic dependent launch, then with it (the
# transport's launch on sm_90), each to its own table and JSON.
# Under PDL a stream's whole graph may be resident at once (kernel_loop.cu),
# so that pass captures PDL_CALLS calls a graph (5) to leave 8 virtual ranks room.
for pdl in ${PDL_PASSES:-off on}; do
  calls=20
  [[ "$pdl" == on ]] && calls=${PDL_CALLS:-5}
  timeout "${LOOP_TIMEOUT:-200}" "$LOOP" "${FLOOR_ARGS[@]}" --pdl "$pdl" --timeout-ms 1000 \
    --calls "$calls" \
    --json "$OUT/kernel_loop_pdl_$pdl.json" ${LOOP_ARGS:-} > "$OUT/kernel_loop_pdl_$pdl.txt" 2>&1
  echo "kernel_loop exit $?" >> "$OUT/kernel_loop_pdl_$pdl.txt"
done

if [[ -z "${SKIP_NCU:-}" ]] && command -v ncu > /dev/null; then
  # Under ncu kernels run one at a time: the last virtual rank's kernel
  # finds its peer's data in place (kernel_loop.cu's header).
  timeout 90 ncu --clock-control none -k "regex:${NCU_KERNEL:-one_shot_kernel}" \
    --launch-skip 1 --launch-count 1 \
    --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
    --section SpeedOfLight --section MemoryWorkloadAnalysis \
    "$LOOP" --ranks 2 --cases "${NCU_CASE:-one_shot_ll}" --sizes 1K --iterations small \
    --timeout-ms 20 > "$OUT/ncu.txt" 2>&1
  echo "ncu exit $?" >> "$OUT/ncu.txt"
fi

for pdl in ${PDL_PASSES:-off on}; do
  table="$OUT/kernel_loop_pdl_$pdl.txt"
  echo "=== kernel_loop --pdl $pdl (full table: $table) ==="
  grep -E '^# (CUDA|floor)|^case' "$table"
  # The short table: 1 KiB and 1 MiB all-reduces, 1 and 64 fused rows.
  grep -E ' (1 KiB|1 MiB|1 rows|64 rows) ' "$table"
  grep -E 'total #wrong|exit' "$table"
done
