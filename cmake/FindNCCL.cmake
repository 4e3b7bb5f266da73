# SPDX-License-Identifier: Apache-2.0
# FindNCCL
# --------
# Finds NVIDIA's NCCL and provides the imported target NCCL::nccl.
#
# Hints: NCCL_ROOT, NCCL_HOME (CMake or environment variables), then the
# CUDA toolkit's folders and the system's. Accepts a bare libnccl.so.2
# (runtime package without the unversioned development link).
#
# Sets NCCL_FOUND, NCCL_VERSION, NCCL_INCLUDE_DIR, NCCL_LIBRARY.

set(_nccl_hints)
foreach(_var NCCL_ROOT NCCL_HOME)
  if(DEFINED ${_var})
    list(APPEND _nccl_hints "${${_var}}")
  endif()
  if(DEFINED ENV{${_var}})
    list(APPEND _nccl_hints "$ENV{${_var}}")
  endif()
endforeach()
if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _nccl_hints "${CUDAToolkit_LIBRARY_ROOT}")
endif()
if(CUDAToolkit_INCLUDE_DIRS)
  foreach(_dir ${CUDAToolkit_INCLUDE_DIRS})
    get_filename_component(_parent "${_dir}" DIRECTORY)
    list(APPEND _nccl_hints "${_parent}")
  endforeach()
endif()
list(APPEND _nccl_hints /usr/local/cuda)

find_path(NCCL_INCLUDE_DIR NAMES nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2
             HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH)[ \t]+[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define NCCL_${_part}[ \t]+([0-9]+).*" "\\1"
           _nccl_${_part} "${_nccl_version_lines}")
  endforeach()
  # The MATCH trick above leaves the whole list when a part is absent.
  if(_nccl_MAJOR MATCHES "^[0-9]+$" AND _nccl_MINOR MATCHES "^[0-9]+$"
     AND _nccl_PATCH MATCHES "^[0-9]+$")
    set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
  endif()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
