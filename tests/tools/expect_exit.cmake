# SPDX-License-Identifier: Apache-2.0
# cmake -DCOMMAND=<args joined by @@> -DEXIT=<status> [-DOUTPUT=<regexes joined by @@>]
#       [-DFORBID=<regexes joined by @@>] -P expect_exit.cmake
#
# Runs COMMAND and succeeds only if it exits with EXIT exactly, its output
# (stdout and stderr together) matches every regex of OUTPUT and none of
# FORBID. For the command-line checks of the tools, benchmarks and examples
# (a value they cannot use: status 2 and a message naming the option,
# before anything is measured), registered in tests/tools,
# benchmarks/CMakeLists.txt, examples/CMakeLists.txt and mpi_tests (the
# tuner's other refusals).
string(REPLACE "@@" ";" COMMAND "${COMMAND}")
string(REPLACE "@@" ";" OUTPUT "${OUTPUT}")
string(REPLACE "@@" ";" FORBID "${FORBID}")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}\n${err}")
message("stdout:\n${out}\nstderr:\n${err}")
if(NOT rc STREQUAL "${EXIT}")
  message(FATAL_ERROR "expected exit status ${EXIT}, got ${rc}")
endif()
foreach(pattern IN LISTS OUTPUT)
  if(NOT all MATCHES "${pattern}")
    message(FATAL_ERROR "the output lacks the expected text: ${pattern}")
  endif()
endforeach()
foreach(pattern IN LISTS FORBID)
  if(all MATCHES "${pattern}")
    message(FATAL_ERROR "the output has text it must not have: ${pattern}")
  endif()
endforeach()
message("as expected: exit status ${rc}, the expected output and none of the forbidden")
