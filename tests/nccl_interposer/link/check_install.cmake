# SPDX-License-Identifier: Apache-2.0
# cmake -DINSTALL_SCRIPT=<build>/src/nccl_interposer/cmake_install.cmake
#   -DPREFIX=<empty folder> -DLIBDIR=lib -DCHECKER=nccl_interposer_link_check
#   -DEXPORTS=exports.map -P check_install.cmake
# Runs the interposer folder's install rules alone into PREFIX and fails
# unless libpeerplan_nccl.so lands in PREFIX/LIBDIR (next to libpeerplan)
# and, from there, opens with RTLD_NOW and defines what exports.map lists.
foreach(var INSTALL_SCRIPT PREFIX LIBDIR CHECKER EXPORTS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "${var} not set")
  endif()
endforeach()
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" -DCMAKE_INSTALL_PREFIX=${PREFIX} -P "${INSTALL_SCRIPT}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "installing the interposer failed (${rc}):\n${out}")
endif()
set(installed "${PREFIX}/${LIBDIR}/libpeerplan_nccl.so")
if(NOT EXISTS "${installed}")
  message(FATAL_ERROR "no ${installed} after the install; it installed:\n${out}")
endif()
execute_process(COMMAND "${CHECKER}" "${installed}" "${EXPORTS}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the installed ${installed} does not load or export as it should (${rc}):\n${out}")
endif()
message(STATUS "installed and loadable: ${installed}")
