# Finds everything peerplan builds against. Nothing is downloaded: a missing
# required dependency stops configuration with the package to install.

find_package(MPI REQUIRED COMPONENTS CXX)

find_package(PkgConfig REQUIRED)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)

# CUDA is optional; NCCL is only needed (and only looked for) with CUDA.
set(PEERPLAN_HAVE_CUDA OFF)
set(PEERPLAN_HAVE_NCCL OFF)
if(NOT PEERPLAN_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  include(CheckLanguage)
  check_language(CUDA)
  if(CUDAToolkit_FOUND AND CMAKE_CUDA_COMPILER)
    # NCCL's own config package if one is installed, else cmake/FindNCCL.cmake.
    find_package(NCCL CONFIG QUIET)
    if(NOT NCCL_FOUND)
      find_package(NCCL MODULE QUIET)
    endif()
    if(NCCL_FOUND)
      set(PEERPLAN_HAVE_CUDA ON)
      set(PEERPLAN_HAVE_NCCL ON)
    endif()
  endif()
  if(PEERPLAN_WITH_CUDA STREQUAL "ON" AND NOT PEERPLAN_HAVE_CUDA)
    message(FATAL_ERROR
      "PEERPLAN_WITH_CUDA=ON but the CUDA toolkit (nvcc) or NCCL was not found. "
      "Install them from NVIDIA, point CUDAToolkit_ROOT / NCCL_ROOT at them, "
      "or configure with -DPEERPLAN_WITH_CUDA=AUTO to build the host backend only.")
  endif()
  if(NOT PEERPLAN_HAVE_CUDA)
    message(STATUS "peerplan: CUDA toolkit or NCCL not found; building the host backend only")
  endif()
endif()

if(PEERPLAN_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # A100, L40S / RTX 4090, H100 / H200, RTX PRO 6000.
    set(CMAKE_CUDA_ARCHITECTURES 80 89 90 120)
  endif()
  enable_language(CUDA)
  # CMake 3.25 does not know how to ask nvcc for C++20; the kernels need only C++17.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endif()
