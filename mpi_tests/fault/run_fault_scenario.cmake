# SPDX-License-Identifier: Apache-2.0
# cmake -DMPIEXEC=... -DFLAGS=<@@-joined mpiexec flags> -DRANKS=<n> -DPROGRAM=<fault_scenario>
#       -DSCENARIO=<name> -DVICTIM=<rank> -DTIMEOUT_MS=<ms> [-DINJECT=<PEERPLAN_FAULT_INJECT>]
#       [-DCLEANUP=<@@-joined command run afterwards>] -P run_fault_scenario.cmake
#
# Runs one scenario of fault_scenario.cpp under `mpiexec --enable-recovery`
# (survivors of a killed rank keep running) and passes when
#  - every rank that is not a killed victim printed `verdict=PASS` and
#    `finalized` (it raised the expected Timeout in time, then closed and
#    finalized cleanly), and nobody printed `verdict=FAIL`;
#  - in the verdict matrix (SCENARIO agree-*): every rank that reported a
#    call (step=callN) reported the same outcome for it, all ok or all the
#    same error, and the ranks that lived on reported some call as failed;
#    but where the victim reports a split verdict (it stalled between two of
#    its verdict's messages: `split step=<step> may_complete=<ranks>`), the
#    ranks it names may have completed that step (docs/faults.md);
#  - after the job (and CLEANUP, a later job on the node) /dev/shm holds no
#    peerplan segment of this job's processes (RUN_SERIAL keeps the suite's
#    own tests apart; the pid in each name tells other users' jobs apart).
cmake_policy(SET CMP0054 NEW)  # a quoted "calls" is a string, not the variable calls
cmake_policy(SET CMP0057 NEW)  # if(... IN_LIST ...)
string(REPLACE "@@" ";" FLAGS "${FLAGS}")
string(REPLACE "@@" ";" CLEANUP "${CLEANUP}")
if(DEFINED INJECT AND NOT INJECT STREQUAL "")
  set(ENV{PEERPLAN_FAULT_INJECT} "${INJECT}")
  list(APPEND FLAGS -x PEERPLAN_FAULT_INJECT)
endif()
math(EXPR wall "(${TIMEOUT_MS} * 8) / 1000 + 30")
execute_process(
  COMMAND ${MPIEXEC} -n ${RANKS} --enable-recovery ${FLAGS} ${PROGRAM} ${SCENARIO} ${VICTIM} ${TIMEOUT_MS}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${wall})
message("${out}")
message("${err}")
if(rc STREQUAL "Process terminated due to timeout")
  message(FATAL_ERROR "the job hung: no exit within ${wall} s")
endif()
if(out MATCHES "verdict=FAIL")
  message(FATAL_ERROR "a rank failed its verdict (see above)")
endif()
if(SCENARIO MATCHES "^agree-")
  # One outcome per call across the ranks: a rank that succeeded where
  # another failed would have reported a result the job does not have.
  set(split_step "")
  set(may_complete "")
  if(out MATCHES "FAULT rank=${VICTIM} split step=([^ ]+) may_complete=([0-9,]+)")
    set(split_step "${CMAKE_MATCH_1}")
    string(REPLACE "," ";" may_complete "${CMAKE_MATCH_2}")
    message("note: rank ${VICTIM} reports a split verdict at ${split_step}: rank(s) "
            "${CMAKE_MATCH_2} may have completed it")
  endif()
  string(REGEX MATCHALL "FAULT rank=[0-9]+ step=call[0-9]+ outcome=[^ ]+" calls "${out}")
  set(seen_failure FALSE)
  foreach(line IN LISTS calls)
    string(REGEX REPLACE "FAULT rank=([0-9]+) step=(call[0-9]+) outcome=([^ ]+)" "\\1;\\2;\\3"
           parts "${line}")
    list(GET parts 0 rank)
    list(GET parts 1 call)
    list(GET parts 2 outcome)
    if(NOT outcome STREQUAL "ok")
      set(seen_failure TRUE)
    endif()
    if(call STREQUAL split_step AND outcome STREQUAL "ok" AND rank IN_LIST may_complete)
      continue()
    endif()
    if(DEFINED outcome_of_${call} AND NOT outcome_of_${call} STREQUAL outcome)
      message(FATAL_ERROR "the ranks disagree on ${call}: ${outcome_of_${call}} and ${outcome}")
    endif()
    set(outcome_of_${call} "${outcome}")
  endforeach()
  # Calls back to back (agree-*-sigstop): the same count of completed calls.
  # A split verdict there: the ranks the victim names may have one more.
  string(REGEX MATCHALL "FAULT rank=[0-9]+ calls_ok=[0-9]+" counts "${out}")
  if(counts AND out MATCHES "FAULT rank=${VICTIM} calls_ok=([0-9]+)")
    set(victim_count ${CMAKE_MATCH_1})
  endif()
  foreach(line IN LISTS counts)
    string(REGEX REPLACE "FAULT rank=([0-9]+) calls_ok=([0-9]+)" "\\1;\\2" parts "${line}")
    list(GET parts 0 rank)
    list(GET parts 1 count)
    if(split_step STREQUAL "calls" AND rank IN_LIST may_complete)
      math(EXPR count_after_split "${victim_count} + 1")
      if(count EQUAL count_after_split)
        continue()
      endif()
    endif()
    if(DEFINED first_count AND NOT first_count EQUAL count)
      message(FATAL_ERROR "the ranks completed different numbers of calls: ${first_count} and ${count}")
    endif()
    set(first_count ${count})
    set(seen_failure TRUE)  # the loop ends only at a failed call
  endforeach()
  if(NOT seen_failure AND NOT SCENARIO MATCHES "-deadline$")
    message(FATAL_ERROR "no rank reported a failed call although rank ${VICTIM} stalled or died")
  endif()
endif()
math(EXPR last "${RANKS} - 1")
foreach(r RANGE 0 ${last})
  if(r EQUAL VICTIM AND SCENARIO MATCHES "kill")
    continue()
  endif()
  string(FIND "${out}" "FAULT rank=${r} verdict=PASS" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "rank ${r} did not print 'verdict=PASS'")
  endif()
  string(FIND "${out}" "FAULT rank=${r} finalized" at)
  if(at EQUAL -1)
    # Open MPI 4.1's MPI_Finalize sometimes hangs after a rank was killed,
    # peerplan or not (fault_scenario.cpp): tolerated in kill scenarios only.
    string(FIND "${out}" "FAULT rank=${r} finalize-stuck" stuck)
    if(stuck EQUAL -1 OR NOT SCENARIO MATCHES "kill")
      message(FATAL_ERROR "rank ${r} did not print 'FAULT rank=${r} finalized'")
    endif()
    message("note: rank ${r}'s MPI_Finalize hung inside Open MPI after the kill (tolerated)")
  endif()
endforeach()
if(CLEANUP)
  unset(ENV{PEERPLAN_FAULT_INJECT})  # the follow-up job runs without faults
  execute_process(COMMAND ${CLEANUP} RESULT_VARIABLE cleanup_rc OUTPUT_VARIABLE cleanup_out
                  ERROR_VARIABLE cleanup_out TIMEOUT 60)
  if(NOT cleanup_rc EQUAL 0)
    message(FATAL_ERROR "the follow-up job failed (${cleanup_rc}):\n${cleanup_out}")
  endif()
endif()
file(GLOB leftovers /dev/shm/peerplan-*)
# Only this job's segments count (names carry their creator's pid: "-p<pid>-"):
# other users' jobs on a shared machine create segments of their own meanwhile.
string(REGEX MATCHALL "FAULT rank=[0-9]+ pid=[0-9]+" pid_lines "${out}")
if(pid_lines)
  set(ours "")
  foreach(line IN LISTS pid_lines)
    string(REGEX REPLACE ".*pid=" "" pid "${line}")
    foreach(segment IN LISTS leftovers)
      if(segment MATCHES "-p${pid}-")
        list(APPEND ours "${segment}")
      endif()
    endforeach()
  endforeach()
  set(leftovers "${ours}")
endif()
if(leftovers)
  message(FATAL_ERROR "peerplan segments left in /dev/shm: ${leftovers}")
endif()
message("scenario ${SCENARIO} at ${RANKS} ranks, victim ${VICTIM}: as expected")
