# SPDX-License-Identifier: Apache-2.0
# Builds examples/c/all_reduce.c the way docs/api-c.md tells a user to (the MPI C
# compiler, C99, the library's headers and libpeerplan), runs it under
# mpiexec, and fails unless it ran correctly ("#wrong 0").
#   cmake -DMPICC=... -DSOURCE=... -DOUTPUT=... -DINCLUDES=a@@b -DLIBDIR=...
#         -DMPIEXEC=... -DMPIEXEC_FLAGS=x@@y [-DLINK_FLAGS=a@@b] -P build_and_run.cmake
string(REPLACE "@@" ";" _includes "${INCLUDES}")
string(REPLACE "@@" ";" _flags "${MPIEXEC_FLAGS}")
string(REPLACE "@@" ";" _link_flags "${LINK_FLAGS}")
set(_compile ${MPICC} -std=c99 -Wall -Wextra -pedantic -Werror)
foreach(_dir IN LISTS _includes)
  list(APPEND _compile -I${_dir})
endforeach()
list(APPEND _compile ${_link_flags} ${SOURCE} -o ${OUTPUT} -L${LIBDIR} -lpeerplan
     -Wl,-rpath,${LIBDIR})
execute_process(COMMAND ${_compile} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
if(NOT _rc EQUAL 0)
  string(REPLACE ";" " " _shown "${_compile}")
  message(FATAL_ERROR "the C example did not build with mpicc:\n${_shown}\n${_out}")
endif()
execute_process(COMMAND ${MPIEXEC} -n 2 ${_flags} ${OUTPUT}
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
message("${_out}${_err}")
if(NOT _rc EQUAL 0 OR NOT _out MATCHES "#wrong 0")
  message(FATAL_ERROR "the C example failed (exit ${_rc})")
endif()
