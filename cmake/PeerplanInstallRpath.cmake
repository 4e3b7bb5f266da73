# SPDX-License-Identifier: Apache-2.0
# The installed libpeerplan's RUNPATH: the folders of its dependencies that
# the dynamic loader would not search by itself (a tarball NCCL, an MPI
# under /opt, the CUDA toolkit), so that the installed library loads without
# LD_LIBRARY_PATH. Dependencies in the system's folders add nothing, so an
# install against system packages carries no RUNPATH at all.

# peerplan_dependency_rpath(<out> SYSTEM_DIRS <dir>... LIBRARIES <file>...):
# <out> = the folders of LIBRARIES (absolute paths; anything else, such as
# -lfoo or a bare name, is skipped) that are not SYSTEM_DIRS, in order, once
# each. A library whose folder is a symbolic link into a system folder
# (Debian's /usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so) counts as
# system; otherwise the folder is kept as named, so that a link such as
# /usr/local/cuda keeps following the toolkit it points to.
function(peerplan_dependency_rpath out)
  cmake_parse_arguments(ARG "" "" "SYSTEM_DIRS;LIBRARIES" ${ARGN})
  set(system_dirs)
  foreach(dir IN LISTS ARG_SYSTEM_DIRS)
    file(REAL_PATH "${dir}" real_dir)
    list(APPEND system_dirs "${dir}" "${real_dir}")
  endforeach()
  set(rpath)
  foreach(library IN LISTS ARG_LIBRARIES)
    if(NOT IS_ABSOLUTE "${library}")
      continue()
    endif()
    get_filename_component(dir "${library}" DIRECTORY)
    file(REAL_PATH "${library}" real_library)
    get_filename_component(real_dir "${real_library}" DIRECTORY)
    if(dir IN_LIST system_dirs OR real_dir IN_LIST system_dirs)
      continue()
    endif()
    list(APPEND rpath "${dir}")
  endforeach()
  list(REMOVE_DUPLICATES rpath)
  set(${out} "${rpath}" PARENT_SCOPE)
endfunction()

# peerplan_imported_location(<out> <target>): the file of an imported
# library target, whichever configuration its package recorded; empty when
# the target does not exist or names no file.
function(peerplan_imported_location out target)
  set(location)
  if(TARGET ${target})
    get_target_property(location ${target} IMPORTED_LOCATION)
    if(NOT location)
      get_target_property(configurations ${target} IMPORTED_CONFIGURATIONS)
      foreach(configuration IN LISTS configurations)
        get_target_property(location ${target} IMPORTED_LOCATION_${configuration})
        if(location)
          break()
        endif()
      endforeach()
    endif()
  endif()
  if(NOT location)
    set(location)
  endif()
  set(${out} "${location}" PARENT_SCOPE)
endfunction()
