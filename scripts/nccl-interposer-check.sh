#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The NCCL interposer on a GPU host: nccl-tests' all_reduce_perf with and
# without LD_PRELOAD=libpeerplan_nccl.so, for bfloat16, half and float,
# eager and captured in CUDA graphs (-G 1), with data checks (-c 1). Prints,
# per size, the wrong counts and the times of both runs side by side, then
# the interposer's summary of where the calls went. Then the same for
# torch.distributed (benchmarks/torch_nccl_preload.py under torchrun, NCCL
# backend, eager and CUDA graphs) when torch imports, and with two ranks or
# more a preloaded run where only rank 0 declares (every rank must give
# peerplan up, with a WARN). Exits 1 when a preloaded run reports a wrong
# result or fails.
#
# usage: scripts/nccl-interposer-check.sh [NCCL_TESTS]
#   NCCL_TESTS: nccl-tests' source folder or its .tar.gz (default
#   .nccl-tests/, the ignored folder the tarball is copied into, e.g. from
#   ../shared/third_party/nccl-tests-2.19.6.tar.gz); a tarball is unpacked
#   next to itself.
# Environment:
#   PEERPLAN_BUILD  the CUDA build folder with libpeerplan_nccl.so (default
#                   build-cuda; its target peerplan_nccl is built when absent)
#   NCCL_HOME       folder of include/nccl.h and lib/libnccl.so (default: found)
#   MPI_HOME        Open MPI's folder (default: from mpicc --showme)
#   NP              ranks (default: one per GPU; 1 on a one-GPU host)
#   DTYPES          default "bfloat16 half float"
#   MODES           default "eager graph"
#   OUT             logs (default .nccl-tests/out)
#   PERF            0 skips the nccl-tests part (default 1)
#   TORCH           0 skips the torch.distributed part (default 1: run when
#                   torch imports in $PYTHON)
#   PYTHON          the Python with torch (default python3)
#   TORCH_DTYPES    default "bf16,f16,f32"
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

say() { echo "[nccl-interposer-check] $*"; }
die() { say "$*" >&2; exit 2; }

source_arg=${1:-.nccl-tests}
build=${PEERPLAN_BUILD:-build-cuda}
case $build in /*) ;; *) build=$PWD/$build ;; esac  # the preload path must be absolute
dtypes=${DTYPES:-bfloat16 half float}
modes=${MODES:-eager graph}
out=${OUT:-.nccl-tests/out}
mkdir -p "$out"
# torch brings its own NCCL: its runs get the caller's library path, not
# the one the nccl-tests part adds NCCL_HOME's folder to.
caller_library_path=${LD_LIBRARY_PATH:-}

# --- libpeerplan_nccl.so
preload="$build/src/nccl_interposer/libpeerplan_nccl.so"
if [ ! -f "$preload" ]; then
  [ -f "$build/CMakeCache.txt" ] || die "no CUDA build in $build; configure one (cmake -S . -B $build -DPEERPLAN_WITH_CUDA=ON) or set PEERPLAN_BUILD"
  say "building libpeerplan_nccl.so in $build"
  cmake --build "$build" --target peerplan_nccl -j "$(nproc)"
fi
[ -f "$preload" ] || die "$preload was not built (a build without NCCL has no interposer)"

# --- ranks
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${gpus:-0}" -ge 1 ] || die "no GPU visible (nvidia-smi -L)"
np=${NP:-$gpus}
if [ "$np" -gt "$gpus" ]; then die "NP=$np but only $gpus GPU(s): NCCL refuses two ranks on one GPU"; fi
if [ "$np" -eq 1 ]; then
  say "one rank only (one GPU here, and NCCL refuses two ranks on one GPU): peerplan has no"
  say "peer-to-peer route at one rank, so every call goes to NCCL (counted no_communicator);"
  say "this checks the preload path, not peerplan's kernels"
fi

# Rank 0's summary of where the calls went, and why peerplan was given up.
where_calls_went() {  # <log>
  say "where the calls went (rank 0's summary; every rank's in $1):"
  # The summary is one log message: its lines share the header's prefix.
  # (PyTorch may abort the communicator at exit rather than destroy it.)
  awk '/NCCL interposer: rank 0 (\(aborted\) )?calls by size/ {
         prefix = substr($0, 1, index($0, "NCCL interposer") - 1); on = 1; print; next }
       on && substr($0, 1, length(prefix)) == prefix && !index($0, "NCCL interposer") { print; next }
       { on = 0 }' "$1" | head -60
  grep -h "NCCL interposer: every call goes to NCCL\|peerplan's create failed" "$1" | sort -u | head -5 || true
}

status=0
if [ "${PERF:-1}" = 0 ]; then
  say "nccl-tests part skipped (PERF=0)"
else
  # --- nccl-tests
  if [ -f "$source_arg" ]; then
    unpack_dir=$(dirname "$source_arg")
    say "unpacking $source_arg into $unpack_dir"
    tar -xzf "$source_arg" -C "$unpack_dir"
    source_arg=$unpack_dir
  fi
  makefile=$(find "$source_arg" -maxdepth 3 -path '*/src/Makefile' -print -quit 2>/dev/null || true)
  [ -n "$makefile" ] || die "no nccl-tests sources (src/Makefile) under $source_arg; copy ../shared/third_party/nccl-tests-2.19.6.tar.gz into .nccl-tests/ or pass its path"
  tests_dir=$(cd "$(dirname "$makefile")/.." && pwd)
  if [ -z "${NCCL_HOME:-}" ]; then
    for candidate in /usr/local/cuda /usr/local /usr; do
      if [ -f "$candidate/include/nccl.h" ]; then NCCL_HOME=$candidate; break; fi
    done
  fi
  [ -n "${NCCL_HOME:-}" ] || die "nccl.h not found; set NCCL_HOME"
  if [ -z "${MPI_HOME:-}" ]; then
    inc=$(mpicc --showme:incdirs 2>/dev/null | awk '{print $1}')
    [ -n "$inc" ] || die "mpicc not found; set MPI_HOME"
    MPI_HOME=$(dirname "$inc")
    [ -f "$MPI_HOME/include/mpi.h" ] || MPI_HOME=$inc/..
  fi
  perf="$tests_dir/build/all_reduce_perf"
  if [ ! -x "$perf" ]; then
    say "building all_reduce_perf (NCCL_HOME=$NCCL_HOME MPI_HOME=$MPI_HOME)"
    make -C "$tests_dir/src" -j "$(nproc)" MPI=1 MPI_HOME="$MPI_HOME" NCCL_HOME="$NCCL_HOME" \
      NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR="$tests_dir/build" \
      "$perf" >"$out/build.log" 2>&1 || {
      tail -30 "$out/build.log"
      die "building nccl-tests failed (log: $out/build.log)"
    }
  fi
  export LD_LIBRARY_PATH="$NCCL_HOME/lib:${LD_LIBRARY_PATH:-}"

  run_perf() {  # <log> <dtype> <mode> [extra mpirun args...]
    local log=$1 dtype=$2 mode=$3
    shift 3
    local graph=()
    [ "$mode" = graph ] && graph=(-G 1)
    mpirun -np "$np" --bind-to none -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST \
      -x NVSHMEM_DISABLE_NVLS -x LD_LIBRARY_PATH "$@" \
      "$perf" -b 8 -e 256M -f 2 -c 1 -d "$dtype" "${graph[@]}" >"$log" 2>&1
  }

  # Data lines of all_reduce_perf: size count type redop root, then time
  # algbw busbw #wrong out of place, then the same in place.
  data_lines() { awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print $1, $6, $9, $10, $13}' "$1"; }

  declare -A dtype_spec=([bfloat16]=bf16 [half]=f16 [float]=f32)
  for dtype in $dtypes; do
    spec=${dtype_spec[$dtype]:-}
    [ -n "$spec" ] || die "unknown dtype $dtype (bfloat16, half, float)"
    for mode in $modes; do
      base="$out/nccl-$dtype-$mode.log"
      pre="$out/peerplan-$dtype-$mode.log"
      say "$dtype $mode: NCCL alone"
      run_perf "$base" "$dtype" "$mode" || { say "NCCL alone failed (log: $base)"; tail -20 "$base"; status=1; continue; }
      say "$dtype $mode: with LD_PRELOAD=libpeerplan_nccl.so, PEERPLAN_NCCL_DECLARE=$spec:8-256M:x2"
      if ! run_perf "$pre" "$dtype" "$mode" -x LD_PRELOAD="$preload" \
        -x PEERPLAN_NCCL_DECLARE="$spec:8-256M:x2" -x PEERPLAN_DEBUG=INFO; then
        say "the preloaded run failed (log: $pre)"
        tail -30 "$pre"
        status=1
        continue
      fi
      echo
      printf '%-12s | %-22s | %-22s | %s\n' "$dtype/$mode" "out of place: time us" "in place: time us" "#wrong (NCCL / preloaded)"
      printf '%-12s | %10s %11s | %10s %11s | %s\n' "bytes" "NCCL" "preloaded" "NCCL" "preloaded" "oop ip / oop ip"
      join <(data_lines "$base" | sort -k1,1) <(data_lines "$pre" | sort -k1,1) | sort -n -k1,1 |
        while read -r size t1 w1 t2 w2 p1 pw1 p2 pw2; do
          printf '%-12s | %10s %11s | %10s %11s | %s %s / %s %s\n' "$size" "$t1" "$p1" "$t2" "$p2" \
            "$w1" "$w2" "$pw1" "$pw2"
        done
      wrong=$(data_lines "$pre" | awk '{w += ($3 != "0" && $3 != "N/A") + ($5 != "0" && $5 != "N/A")} END {print w + 0}')
      [ "$(data_lines "$pre" | wc -l)" -gt 0 ] || { say "no results in $pre"; status=1; }
      if [ "$wrong" != 0 ]; then
        say "$dtype $mode: $wrong result column(s) (out of place or in place, per size) with wrong values under the preload"
        status=1
      fi
      where_calls_went "$pre"
      echo
    done
  done
fi

# --- torch.distributed (benchmarks/torch_nccl_preload.py under torchrun)
python=${PYTHON:-python3}
torch_dtypes=${TORCH_DTYPES:-bf16,f16,f32}
# The script's default sizes: its declared range, plus two sizes between
# them that are not declared (they go to NCCL).
torch_declare="$torch_dtypes:1K-64M:x4"
if [ "${TORCH:-1}" = 0 ]; then
  say "torch.distributed part skipped (TORCH=0)"
elif ! "$python" -c 'import torch' >/dev/null 2>&1; then
  say "torch.distributed part skipped: torch does not import in $python (set PYTHON, or TORCH=0)"
else
  [ "$np" -eq 1 ] && say "torch.distributed: one rank only (one GPU; NCCL refuses two ranks on one GPU): every call goes to NCCL"
  run_torch() {  # <log> [env assignments...]
    local log=$1
    shift
    env LD_LIBRARY_PATH="$caller_library_path" "$@" "$python" -m torch.distributed.run --standalone --nproc-per-node "$np" \
      benchmarks/torch_nccl_preload.py --dtypes "$torch_dtypes" >"$log" 2>&1
  }
  # Rank 0's table: dtype bytes mode us #wrong.
  torch_lines() { awk '$1 ~ /^(bf16|f16|f32)$/ && NF == 5 {print $1 "/" $3 "/" $2, $4, $5}' "$1"; }
  base="$out/torch-nccl.log"
  pre="$out/torch-peerplan.log"
  say "torch.distributed ($np rank(s), $torch_dtypes): NCCL alone"
  torch_ok=1
  if ! run_torch "$base"; then
    say "torch.distributed with NCCL alone failed (log: $base)"
    tail -20 "$base"
    status=1
    torch_ok=0
  fi
  say "torch.distributed: with LD_PRELOAD=libpeerplan_nccl.so, PEERPLAN_NCCL_DECLARE=$torch_declare"
  if ! run_torch "$pre" LD_PRELOAD="$preload" PEERPLAN_NCCL_DECLARE="$torch_declare" \
    PEERPLAN_DEBUG=INFO; then
    say "the preloaded torch.distributed run failed or found wrong values (log: $pre)"
    grep -h "^#wrong\|Error\|error" "$pre" | tail -10 || true
    status=1
    torch_ok=0
  fi
  if [ "$(torch_lines "$pre" | wc -l)" -gt 0 ]; then
    echo
    printf '%-22s | %10s %11s | %s\n' "dtype/mode/bytes" "NCCL us" "preloaded" "#wrong (NCCL / preloaded)"
    join -a 2 <(torch_lines "$base" | sort -k1,1) <(torch_lines "$pre" | sort -k1,1) |
      sort -t/ -k1,1 -k2,2 -k3,3n |
      while read -r key t1 w1 p1 pw1; do
        if [ -z "${p1:-}" ]; then p1=$t1 pw1=$w1 t1=- w1=-; fi  # only in the preloaded run
        printf '%-22s | %10s %11s | %s / %s\n' "$key" "$t1" "$p1" "$w1" "$pw1"
      done
    grep -h "^#wrong" "$pre" || true
    where_calls_went "$pre"
  elif [ "$torch_ok" = 1 ]; then
    say "no results in $pre (skipped? $(grep -h SKIPPED "$pre" | head -1))"
    status=1
  fi
  if [ "$np" -ge 2 ]; then
    # Only rank 0 declares: every rank must give peerplan up together (a
    # WARN names the others) and NCCL's results stay right, with no hang.
    mixed="$out/torch-mixed.log"
    say "torch.distributed: preloaded, only rank 0 declaring (every rank must give peerplan up)"
    # shellcheck disable=SC2016 # the wrapper's variables are the rank's
    if ! env LD_LIBRARY_PATH="$caller_library_path" LD_PRELOAD="$preload" PEERPLAN_DEBUG=INFO \
      MIXED_DECLARE="$torch_declare" timeout 600 "$python" -m torch.distributed.run --standalone \
      --nproc-per-node "$np" --no-python bash -c \
      '[ "$RANK" = 0 ] && export PEERPLAN_NCCL_DECLARE=$MIXED_DECLARE; exec "$0" "$@"' \
      "$python" benchmarks/torch_nccl_preload.py --dtypes "$torch_dtypes" --sizes 1K,64K,3000 \
      --iters 5 >"$mixed" 2>&1; then
      say "the run with only rank 0 declaring failed, hung or found wrong values (log: $mixed)"
      tail -20 "$mixed"
      status=1
    elif ! grep -q "declared nothing" "$mixed"; then
      say "no WARN naming the ranks that declared nothing in $mixed"
      status=1
    else
      grep -h "declared nothing" "$mixed" | sort -u | head -2
      grep -h "^#wrong" "$mixed" || true
    fi
  fi
fi
exit "$status"
