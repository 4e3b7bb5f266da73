#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The sweeps behind the CUDA backend's kernel choices and 2-rank defaults (their
# numbers are in CHANGELOG.md), on a GPU host, one call: builds, runs
# the GPU tests (SKIP_TESTS=1 skips them), then bf16 under CUDA graphs:
# the one-shot grid (PEERPLAN_ONE_SHOT_MAX_BLOCKS in $BLOCKS), two-shot at
# every size, the fused op's LL window (PEERPLAN_FUSED_LL), and
# --route auto in both modes. Prints size:µs/NCCL µs[/plain µs] per run.
set -uo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-$PWD/kernel-sweep-out}; mkdir -p "$OUT"
B=build-gpu
t0=$SECONDS
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DPEERPLAN_BUILD_TESTS=ON -DPEERPLAN_BUILD_EXAMPLES=ON >"$OUT/cfg.log" 2>&1
ninja -C $B -j32 cuda_collectives_test cuda_lifecycle_test cuda_registration_test cuda_p2p_agreement_test peerplan_collective_bench >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $((SECONDS-t0))s"
M="mpiexec -n 2 --oversubscribe --bind-to none"
BENCH=$B/benchmarks/peerplan_collective_bench
[[ -n "${SKIP_TESTS:-}" ]] || for t in cuda_collectives_test cuda_lifecycle_test cuda_registration_test cuda_p2p_agreement_test; do
  timeout 300 ctest --test-dir $B -R "^$t" --output-on-failure --timeout 280 >"$OUT/$t.log" 2>&1; echo "$t rc=$? $((SECONDS-t0))s"
  grep -E "FAILED|Failure|Expected|differ|Which is" "$OUT/$t.log" | head -8
done
col() { awk '/total #wrong/ {w=$NF; next} /^#/ || /size/ {next} {printf "%s:%s/%s ", $1, $5, $9} END {print " wrong=" w}'; }
for nb in ${BLOCKS:-40 80 132 264}; do
  echo -n "one-shot blocks $nb (size:us/nccl): "; timeout 60 env PEERPLAN_ONE_SHOT_MAX_BLOCKS=$nb $M -x PEERPLAN_ONE_SHOT_MAX_BLOCKS $BENCH --route p2p -b 64K -e 1M -f 4 -n 100 -w 10 -d bf16 -G 1 2>&1 | col
done
echo "two-shot everywhere (size:us/nccl):"; timeout 120 env PEERPLAN_ONE_SHOT_MAX_BYTES=0 PEERPLAN_TWO_SHOT_MIN_BYTES=0 $M -x PEERPLAN_ONE_SHOT_MAX_BYTES -x PEERPLAN_TWO_SHOT_MIN_BYTES $BENCH --route p2p -b 64K -e 256M -f 4 -n 100 -w 10 -d bf16 -G 1 2>&1 | col
for ll in never 512K 2M 64M; do
  echo "fused LL window $ll (size:us/nccl/plain):"; timeout 90 env PEERPLAN_FUSED_LL=$ll $M -x PEERPLAN_FUSED_LL $BENCH --op fused --route p2p --hidden 7168 -b 14K -e 16M -f 4 -n 100 -w 10 -d bf16 -G 1 2>&1 | tee "$OUT/fused-$ll.log" | awk '/total #wrong/ {w=$NF; next} /^#/ || /size/ {next} {printf "%s:%s/%s/%s ", $1, $5, $9, $11} END {print " wrong=" w}'
done
echo "fused hidden 4096 f16 (LL default)"; timeout 90 $M $BENCH --op fused --route p2p --hidden 4096 -b 8K -e 1M -f 4 -n 100 -w 10 -d f16 -G 1 2>&1 | awk '/total #wrong/ {w=$NF; next} /^#/ || /size/ {next} {printf "%s:%s/%s/%s ", $1, $5, $9, $11} END {print " wrong=" w}'
for G in 1 0; do echo "auto G=$G (size:route:us/nccl):"; timeout 120 $M $BENCH -b 1K -e 256M -f 4 -n 100 -w 10 -d bf16 -G $G 2>&1 | awk '/total #wrong/ {w=$NF; next} /^#/ || /size/ {next} {printf "%s:%s:%s/%s ", $1, $4, $5, $9} END {print " wrong=" w}'; done
echo "total $((SECONDS-t0))s"
