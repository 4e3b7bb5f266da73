# SPDX-License-Identifier: Apache-2.0
# cmake -DCOMMAND=<args joined by @@> -DEXIT=<status> -DSTDERR=<regexes joined by @@>
#       -P expect_tool_exit.cmake
# Runs COMMAND and succeeds only if it exits with EXIT exactly and its
# stderr matches every regex of STDERR: for peerplan_tune's refusals, whose
# exit status and message are what a script or a user acts on.
string(REPLACE "@@" ";" COMMAND "${COMMAND}")
string(REPLACE "@@" ";" STDERR "${STDERR}")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("stdout:\n${out}\nstderr:\n${err}")
if(NOT rc STREQUAL "${EXIT}")
  message(FATAL_ERROR "expected exit status ${EXIT}, got ${rc}")
endif()
foreach(pattern IN LISTS STDERR)
  if(NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "stderr lacks the expected text: ${pattern}")
  endif()
endforeach()
message("as expected: exit status ${rc} and every expected message on stderr")
