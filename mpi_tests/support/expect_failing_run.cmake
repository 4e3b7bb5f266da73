# SPDX-License-Identifier: Apache-2.0
# cmake -DCOMMAND=<args joined by @@> -DEXPECT=<regexes joined by @@> -P expect_failing_run.cmake
# Runs COMMAND and succeeds only if it exits non-zero and its output (stdout
# and stderr together) matches every regex of EXPECT. Used to test that the
# MPI test harness turns a misbehaving rank into a failed run.
string(REPLACE "@@" ";" COMMAND "${COMMAND}")
string(REPLACE "@@" ";" EXPECT "${EXPECT}")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(rc EQUAL 0)
  message(FATAL_ERROR "expected the run to fail, but it exited 0")
endif()
foreach(pattern IN LISTS EXPECT)
  if(NOT out MATCHES "${pattern}")
    message(FATAL_ERROR "the output lacks the expected text: ${pattern}")
  endif()
endforeach()
message("as expected: exit status ${rc} and every expected message present")
