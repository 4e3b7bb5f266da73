# SPDX-License-Identifier: Apache-2.0
# Finds everything peerplan builds against. Nothing is downloaded: a missing
# required dependency stops configuration with the package to install.

find_package(MPI REQUIRED COMPONENTS C CXX)

find_package(PkgConfig REQUIRED)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)

# peerplan_tristate(<option>): sets <option>_MODE to AUTO, ON or OFF from the
# cache option (CMake's boolean spellings are accepted), or stops naming
# the values allowed, so a typo never silently means AUTO.
function(peerplan_tristate option)
  string(TOUPPER "${${option}}" value)
  if(value MATCHES "^(ON|YES|TRUE|Y|1)$")
    set(value ON)
  elseif(value MATCHES "^(OFF|NO|FALSE|N|0)$")
    set(value OFF)
  elseif(NOT value STREQUAL "AUTO")
    message(FATAL_ERROR "${option} is '${${option}}': use AUTO, ON or OFF")
  endif()
  set(${option}_MODE ${value} PARENT_SCOPE)
endfunction()
peerplan_tristate(PEERPLAN_WITH_CUDA)
peerplan_tristate(PEERPLAN_WITH_NCCL)

# CUDA is optional (PEERPLAN_WITH_CUDA). NCCL is optional too
# (PEERPLAN_WITH_NCCL) and looked for only with CUDA, as only the CUDA
# backend uses it: a CUDA build without NCCL still has the CUDA backend,
# whose fallback is then MPI only (sites with CUDA and a CUDA-aware MPI but
# no NCCL).
set(PEERPLAN_HAVE_CUDA OFF)
set(PEERPLAN_HAVE_NCCL OFF)
if(NOT PEERPLAN_WITH_CUDA_MODE STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  include(CheckLanguage)
  check_language(CUDA)
  if(CUDAToolkit_FOUND AND CMAKE_CUDA_COMPILER)
    set(PEERPLAN_HAVE_CUDA ON)
  elseif(PEERPLAN_WITH_CUDA_MODE STREQUAL "ON")
    message(FATAL_ERROR
      "PEERPLAN_WITH_CUDA=ON but the CUDA toolkit (nvcc) was not found. Install it from "
      "NVIDIA and point CUDAToolkit_ROOT at it (or put nvcc on PATH), or configure with "
      "-DPEERPLAN_WITH_CUDA=AUTO to build the host backend only.")
  else()
    message(STATUS "peerplan: CUDA toolkit not found; building the host backend only")
  endif()
endif()

if(PEERPLAN_WITH_NCCL_MODE STREQUAL "ON" AND NOT PEERPLAN_HAVE_CUDA)
  if(PEERPLAN_WITH_CUDA_MODE STREQUAL "OFF")
    set(_why "PEERPLAN_WITH_CUDA=OFF")
  else()
    set(_why "the CUDA toolkit (nvcc) was not found; hint: CUDAToolkit_ROOT")
  endif()
  message(FATAL_ERROR
    "PEERPLAN_WITH_NCCL=ON but this build has no CUDA backend (${_why}), the only user "
    "of NCCL. Build the CUDA backend, or configure with -DPEERPLAN_WITH_NCCL=AUTO or OFF.")
endif()
if(PEERPLAN_HAVE_CUDA AND NOT PEERPLAN_WITH_NCCL_MODE STREQUAL "OFF")
  # NCCL's own config package if one is installed, else cmake/FindNCCL.cmake.
  find_package(NCCL CONFIG QUIET)
  if(NOT NCCL_FOUND)
    find_package(NCCL MODULE QUIET)
  endif()
  if(NCCL_FOUND)
    set(PEERPLAN_HAVE_NCCL ON)
  elseif(PEERPLAN_WITH_NCCL_MODE STREQUAL "ON")
    message(FATAL_ERROR
      "PEERPLAN_WITH_NCCL=ON but NCCL (nccl.h and libnccl.so) was not found. Install NCCL "
      "from NVIDIA (libnccl-dev from NVIDIA's CUDA repository, or the tarball) and set "
      "NCCL_ROOT to the folder holding include/nccl.h and lib/libnccl.so, or configure with "
      "-DPEERPLAN_WITH_NCCL=AUTO or OFF to build the CUDA backend with the MPI fallback only.")
  else()
    message(STATUS "peerplan: NCCL not found (set NCCL_ROOT to use it); the CUDA backend's "
                   "fallback is MPI only")
  endif()
endif()

if(PEERPLAN_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # A100, L40S / RTX 4090, H100 / H200, RTX PRO 6000.
    set(CMAKE_CUDA_ARCHITECTURES 80 89 90 120)
  endif()
  # The shared CUDA runtime, as the library links CUDA::cudart: CMake's
  # default (Static) added libcudart_static as well to every target with
  # CUDA code, a second copy of the runtime next to the shared one.
  if(NOT DEFINED CMAKE_CUDA_RUNTIME_LIBRARY)
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  endif()
  enable_language(CUDA)
  # CMake 3.25 does not know how to ask nvcc for C++20; the kernels need only C++17.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endif()

# NVTX ranges (src/core/nvtx_ranges.cpp): the CUDA toolkit's header-only
# NVTX v3, in host-only builds too (it needs no CUDA runtime and does
# nothing unless a profiler injects itself). Without a toolkit the ranges
# are compiled out.
set(PEERPLAN_HAVE_NVTX OFF)
if(NOT CUDAToolkit_FOUND)
  find_package(CUDAToolkit QUIET)
endif()
if(TARGET CUDA::nvtx3)
  find_path(PEERPLAN_NVTX_INCLUDE_DIR nvtx3/nvToolsExt.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} NO_DEFAULT_PATH)
  if(PEERPLAN_NVTX_INCLUDE_DIR)
    set(PEERPLAN_HAVE_NVTX ON)
  endif()
endif()
if(NOT PEERPLAN_HAVE_NVTX)
  message(STATUS "peerplan: NVTX v3 headers (CUDA toolkit) not found; NVTX ranges compiled out")
endif()
