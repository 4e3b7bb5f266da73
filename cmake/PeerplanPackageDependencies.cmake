# SPDX-License-Identifier: Apache-2.0
# What the installed package says about the build it comes from, for
# cmake/peerplanConfig.cmake.in and cmake/peerplan.pc.in (included by
# PeerplanInstall.cmake):
#   - which backends and fallbacks it has (CUDA backend; NCCL for the CUDA
#     backend's fallback, else MPI only): peerplan_HAVE_CUDA /
#     peerplan_HAVE_NCCL after find_package(peerplan), `pkg-config
#     --variable=cuda_backend|nccl peerplan` (yes or no);
#   - for a static libpeerplan only, the private dependencies every program
#     linking it needs as well (hwloc, librt, cudart, NCCL where built).
#     A shared libpeerplan links them itself: its users need neither CUDA
#     headers nor NCCL to build, and no find_dependency(NCCL) is made for
#     them; a build with NCCL does need libnccl.so.2 at run time.

get_target_property(_peerplan_type peerplan TYPE)
if(_peerplan_type STREQUAL "STATIC_LIBRARY")
  set(PEERPLAN_STATIC ON)
else()
  set(PEERPLAN_STATIC OFF)
endif()

# peerplan.pc: yes/no variables, and the static library's private lines.
foreach(_what CUDA NCCL)
  if(PEERPLAN_HAVE_${_what})
    set(PEERPLAN_PC_HAVE_${_what} yes)
  else()
    set(PEERPLAN_PC_HAVE_${_what} no)
  endif()
endforeach()
set(PEERPLAN_PC_PRIVATE "")
if(PEERPLAN_STATIC)
  # Folders (-L, but not the linker's own) and libraries (-l). hwloc's are
  # listed here rather than as Requires.private: hwloc, with which
  # pkg-config --static would add hwloc's own private dependencies
  # (libudev, ...) that linking against the shared libhwloc does not need.
  set(_dirs ${HWLOC_LIBRARY_DIRS})
  set(_libs ${HWLOC_LIBRARIES})
  if(PEERPLAN_LIBRT)
    list(APPEND _libs rt)
  endif()
  if(PEERPLAN_HAVE_CUDA)
    list(APPEND _dirs "${CUDAToolkit_LIBRARY_DIR}")
    list(APPEND _libs cudart)
  endif()
  if(PEERPLAN_HAVE_NCCL)
    if(NCCL_LIBRARY)  # cmake/FindNCCL.cmake; NCCL's own config package may not set it
      get_filename_component(_nccl_dir "${NCCL_LIBRARY}" DIRECTORY)
      list(APPEND _dirs "${_nccl_dir}")
    endif()
    list(APPEND _libs nccl)
  endif()
  list(APPEND _libs ${CMAKE_DL_LIBS})
  list(REMOVE_DUPLICATES _dirs)
  list(REMOVE_ITEM _dirs ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES})
  list(TRANSFORM _dirs PREPEND "-L")
  list(TRANSFORM _libs PREPEND "-l")
  list(JOIN _dirs " " _dirs)
  list(JOIN _libs " " _libs)
  string(STRIP "${_dirs} ${_libs}" _private)
  set(PEERPLAN_PC_PRIVATE "Libs.private: ${_private}\n")
endif()

# peerplanConfig.cmake finds NCCL, for a static library built with it,
# through the same FindNCCL.cmake as this build, installed next to it.
if(PEERPLAN_STATIC AND PEERPLAN_HAVE_NCCL)
  install(FILES ${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/peerplan)
endif()
