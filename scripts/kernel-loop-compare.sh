#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Kernel variants side by side on the one-GPU kernel loop, in one short GPU call:
# the builds are made here (nvcc, no GPU needed), the GPU host only runs them.
#   scripts/kernel-loop-compare.sh build DIR NAME=REV [NAME=REV ...]
#       a Release peerplan_kernel_loop of each git revision (a worktree of it;
#       "NAME=." for the working tree as it is) as DIR/loop-NAME; env ARCH (90), JOBS (2)
#   scripts/kernel-loop-compare.sh run DIR [peerplan_kernel_loop flags]
#       on the GPU host (carry DIR): every DIR/loop-* in turn, twice (the second
#       pass in reverse order), with PDL off (--calls 20) and on (--calls 5),
#       then one table (benchmarks/compare_loop_runs.py); runs in DIR/runs;
#       env VARIANTS ("NAME ..." in table order, default: as built), LOOP_TIMEOUT (120 s a run)
# DIR: a folder git ignores (e.g. build-compare), so that it can travel to the GPU host.
# Default flags: --ranks 2 --cases one_shot_ll,fused_ll,fused_lamport --sizes 16K
# --rows 1,16,256,1024. The binary links only cudart, so one built on an older
# Debian or Ubuntu runs on a newer one with the same CUDA major version.
set -uo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 2 ]] || usage
command=$1 dir=$2
shift 2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

build_one() {  # build_one NAME REV
  local name=$1 rev=$2 tree cleanup=""
  if [[ "$rev" == "." ]]; then
    tree=$PWD
  else
    tree=$(mktemp -d) && git worktree add -q --detach "$tree" "$rev" || {
      echo "kernel-loop-compare: '$rev' is not a revision of this repository"; return 1; }
    cleanup=$tree
  fi
  local build="$dir/build-$name"
  if cmake -S "$tree" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPEERPLAN_WITH_CUDA=ON \
       -DCMAKE_CUDA_ARCHITECTURES="${ARCH:-90}" -DPEERPLAN_BUILD_TESTS=OFF \
       -DPEERPLAN_BUILD_EXAMPLES=OFF -DPEERPLAN_BUILD_TOOLS=OFF > "$dir/build-$name.log" 2>&1 &&
     cmake --build "$build" --target peerplan_kernel_loop -j "${JOBS:-2}" >> "$dir/build-$name.log" 2>&1; then
    cp "$build/benchmarks/peerplan_kernel_loop" "$dir/loop-$name"
    echo "$name ($rev): $dir/loop-$name"
  else
    tail -20 "$dir/build-$name.log"
    echo "kernel-loop-compare: the build of $name ($rev) failed (log: $dir/build-$name.log)"
  fi
  rm -rf "$build"
  [[ -n "$cleanup" ]] && git worktree remove --force "$cleanup"
  [[ -x "$dir/loop-$name" ]]
}

case "$command" in
  build)
    [[ $# -ge 1 ]] || usage
    mkdir -p "$dir"
    names=()
    for spec in "$@"; do
      [[ "$spec" == *=* && -n "${spec%%=*}" && -n "${spec#*=}" ]] ||
        { echo "kernel-loop-compare: '$spec' is not NAME=REV"; exit 2; }
      build_one "${spec%%=*}" "${spec#*=}" || exit 1
      names+=("${spec%%=*}")
    done
    echo "${names[*]}" > "$dir/variants"
    ;;
  run)
    variants=${VARIANTS:-$(cat "$dir/variants" 2> /dev/null)}
    [[ -n "$variants" ]] || { echo "kernel-loop-compare: no variants in $dir (build first)"; exit 2; }
    read -r -a names <<< "$variants"
    for name in "${names[@]}"; do
      [[ -x "$dir/loop-$name" ]] || { echo "kernel-loop-compare: no $dir/loop-$name"; exit 2; }
    done
    flags=("$@")
    [[ ${#flags[@]} -gt 0 ]] ||
      flags=(--ranks 2 --cases one_shot_ll,fused_ll,fused_lamport --sizes 16K --rows 1,16,256,1024)
    runs="$dir/runs"
    rm -rf "$runs" && mkdir -p "$runs"
    reversed=()
    for ((i = ${#names[@]} - 1; i >= 0; --i)); do reversed+=("${names[i]}"); done
    for run_pass in 1 2; do
      order=("${names[@]}")
      [[ $run_pass == 2 ]] && order=("${reversed[@]}")
      for name in "${order[@]}"; do
        for pdl in off on; do
          calls=20
          [[ $pdl == on ]] && calls=5
          base="$runs/$name--pdl-$pdl--$run_pass"
          timeout "${LOOP_TIMEOUT:-120}" "$dir/loop-$name" --pdl "$pdl" --calls "$calls" \
            --timeout-ms 1000 "${flags[@]}" --json "$base.json" > "$base.txt" 2>&1
          status=$?
          [[ $status == 0 ]] || echo "kernel-loop-compare: $name, PDL $pdl, pass $run_pass exited $status (log: $base.txt)"
        done
      done
    done
    python3 benchmarks/compare_loop_runs.py "$runs" "${names[@]}"
    ;;
  *) usage ;;
esac
