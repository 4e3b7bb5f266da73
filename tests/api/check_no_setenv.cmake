# SPDX-License-Identifier: Apache-2.0
# Fails when LIBRARY imports setenv, putenv, unsetenv or clearenv: a library
# must not change the environment of the process that loads it (and setenv
# races with getenv on other threads).
execute_process(COMMAND ${NM} -D --undefined-only ${LIBRARY}
                OUTPUT_VARIABLE imports RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${NM} -D --undefined-only ${LIBRARY} failed (${status})")
endif()
string(REGEX MATCHALL "[ \t](setenv|putenv|unsetenv|clearenv)(@[^\n]*)?\n" found "${imports}")
if(found)
  string(STRIP "${found}" found)
  message(FATAL_ERROR "${LIBRARY} imports ${found}: remove the call; document what the user "
                      "should set instead")
endif()
string(REGEX MATCH "[ \t]getenv" any "${imports}")
if(NOT any)
  message(FATAL_ERROR "no getenv import found in ${LIBRARY}: the check reads the wrong symbols")
endif()
message(STATUS "${LIBRARY}: imports no function that changes the environment")
