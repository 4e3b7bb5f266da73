# SPDX-License-Identifier: Apache-2.0
# Shared by scripts/demo.sh and scripts/test.sh (sourced, not run):
# installs the Debian packages peerplan needs, detects CUDA/NCCL, and
# configures + builds (into build/ unless told otherwise: demo.sh uses
# build-demo/). Idempotent: a second run installs nothing
# and rebuilds only what changed.

PEERPLAN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${PEERPLAN_BUILD_DIR:-$PEERPLAN_ROOT/build}"

# Debian/Ubuntu packages: compiler, build tools, MPI, hwloc, GoogleTest, and
# the flag/JSON libraries the tools and benchmarks use. The CUDA toolkit and
# NCCL come from NVIDIA and are only detected, never installed.
PEERPLAN_PACKAGES=(g++ cmake ninja-build pkg-config openmpi-bin libopenmpi-dev
                   hwloc libhwloc-dev libgtest-dev nlohmann-json3-dev libcli11-dev ccache)

log() { printf '[peerplan] %s\n' "$*"; }

# The failed tests of each stage, repeated at the very end of test.sh: CI
# shows only the tail of a long log, and a failure early in the log would
# otherwise be out of sight.
PEERPLAN_FAILED_TESTS=()
note_failed_tests() {  # stage-name build-dir
  local list="$2/Testing/Temporary/LastTestsFailed.log"
  if [ -s "$list" ]; then
    PEERPLAN_FAILED_TESTS+=("$1: $(cut -d: -f2 "$list" | tr '\n' ' ')")
  else
    PEERPLAN_FAILED_TESTS+=("$1: failed (no test list; see its log above)")
  fi
}
print_failed_tests() {
  local line
  for line in "${PEERPLAN_FAILED_TESTS[@]}"; do log "FAILED in $line"; done
}

install_missing_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    log "not a Debian/Ubuntu system: make sure these (or equivalents) are installed: ${PEERPLAN_PACKAGES[*]}"
    return 0
  fi
  local missing=() pkg
  for pkg in "${PEERPLAN_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$pkg")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "all required Debian packages are installed"
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    log "missing packages: ${missing[*]}"
    log "install them with:"
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    exit 1
  fi
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

report_cuda() {
  local nvcc_path="" 
  nvcc_path="$(command -v nvcc || true)"
  if [ -z "$nvcc_path" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc_path=/usr/local/cuda/bin/nvcc
  fi
  if [ -n "$nvcc_path" ]; then
    log "CUDA toolkit: $("$nvcc_path" --version | tail -n 1) ($nvcc_path)"
    export PATH="$(dirname "$nvcc_path"):$PATH"
  else
    log "CUDA toolkit: not found (install it from NVIDIA for the cuda backend); building the host backend only"
  fi
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    PEERPLAN_GPU_COUNT=$(nvidia-smi -L | grep -c '^GPU')
    log "GPUs visible: $PEERPLAN_GPU_COUNT"
  else
    PEERPLAN_GPU_COUNT=0
    log "GPUs visible: none (the host backend will run)"
  fi
  export PEERPLAN_GPU_COUNT
}

# configure_and_build [CMAKE_ARG...]: configures $BUILD_DIR with these
# arguments, then PEERPLAN_CMAKE_ARGS (which therefore win), and builds the
# targets named in the array BUILD_TARGETS, or everything when it is empty.
configure_and_build() {
  local generator=() targets=()
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
  fi
  if [ -n "${BUILD_TARGETS+x}" ] && [ ${#BUILD_TARGETS[@]} -gt 0 ]; then
    targets=(--target "${BUILD_TARGETS[@]}")
  fi
  cmake -S "$PEERPLAN_ROOT" -B "$BUILD_DIR" "${generator[@]}" "$@" ${PEERPLAN_CMAKE_ARGS:-}
  cmake --build "$BUILD_DIR" --parallel "$(nproc)" "${targets[@]}"
}

# Compiles go through ccache where it is installed (CMake reads these
# variables when it configures a new build directory), so a fresh clone or
# a second build tree recompiles only what changed. The base directory makes
# the cache's keys relative, so clones in other folders share it.
use_ccache_when_present() {
  command -v ccache >/dev/null 2>&1 || return 0
  local lang
  for lang in C CXX CUDA; do
    local var="CMAKE_${lang}_COMPILER_LAUNCHER"
    [ -n "${!var:-}" ] || export "$var=ccache"
  done
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PEERPLAN_ROOT}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
}

# The project's GPU hosts are shared: NVLink multicast must stay off there.
# A rule of those hosts, not a library default (the library sets nothing);
# a value the user exported is kept.
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
export TORCH_SYMM_MEM_DISABLE_MULTICAST="${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}"
export NVSHMEM_DISABLE_NVLS="${NVSHMEM_DISABLE_NVLS:-1}"

# Open MPI refuses to run as root unless told; our containers and CI run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
