# SPDX-License-Identifier: Apache-2.0
# cmake -DCOMMAND=<args joined by @@> -DJSON=<file> -DAPIS=<apis joined by @@>
#       [-DCOMPARE=<args joined by @@>] -P call_overhead_smoke.cmake
#
# The call-overhead benchmarks' CPU smoke test (benchmarks/CMakeLists.txt):
# runs COMMAND (a benchmark under mpiexec, writing JSON), then checks that
# JSON holds every case for every api of APIS with a positive ns per call,
# one positive value per rank and, but for the empty case, a route; then
# runs COMPARE (the compare script) when given, which must exit 0. Asserts
# that the tools work, not how fast anything is. Output that says
# "call_overhead: SKIPPED" (the Python benchmark without NumPy) is a
# skipped test (SKIP_REGULAR_EXPRESSION).
cmake_minimum_required(VERSION 3.25)  # IN_LIST
set(_cases empty allreduce_1x512 allreduce_8x4096 fused_1x4096 fused_16x4096)
string(REPLACE "@@" ";" COMMAND "${COMMAND}")
string(REPLACE "@@" ";" APIS "${APIS}")
string(REPLACE "@@" ";" COMPARE "${COMPARE}")

file(REMOVE "${JSON}")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(out MATCHES "call_overhead: SKIPPED")
  return()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the benchmark exited with status ${rc}")
endif()
if(NOT EXISTS "${JSON}")
  message(FATAL_ERROR "the benchmark wrote no ${JSON}")
endif()

file(READ "${JSON}" doc)
string(JSON ranks GET "${doc}" ranks)
string(JSON count LENGTH "${doc}" rows)
set(_seen "")
if(count GREATER 0)
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON case GET "${doc}" rows ${i} case)
    string(JSON api GET "${doc}" rows ${i} api)
    string(JSON ns GET "${doc}" rows ${i} ns_per_call)
    string(JSON route GET "${doc}" rows ${i} route)
    if(NOT ns GREATER 0)
      message(FATAL_ERROR "${case}/${api}: ns_per_call ${ns} is not positive")
    endif()
    string(JSON per_rank LENGTH "${doc}" rows ${i} rank_ns_per_call)
    if(NOT per_rank EQUAL ranks)
      message(FATAL_ERROR "${case}/${api}: ${per_rank} per-rank values for ${ranks} ranks")
    endif()
    math(EXPR last_rank "${per_rank} - 1")
    foreach(r RANGE ${last_rank})
      string(JSON v GET "${doc}" rows ${i} rank_ns_per_call ${r})
      if(NOT v GREATER 0)
        message(FATAL_ERROR "${case}/${api}: rank ${r}'s ns per call ${v} is not positive")
      endif()
    endforeach()
    if(NOT case STREQUAL "empty" AND (route STREQUAL "" OR route STREQUAL "-"))
      message(FATAL_ERROR "${case}/${api}: no route")
    endif()
    list(APPEND _seen "${case}/${api}")
  endforeach()
endif()
foreach(case IN LISTS _cases)
  foreach(api IN LISTS APIS)
    if(NOT "${case}/${api}" IN_LIST _seen)
      message(FATAL_ERROR "${JSON}: no row for case ${case}, api ${api}")
    endif()
  endforeach()
endforeach()
message("call_overhead_smoke: ${JSON}: ${count} rows, every case and api present, all positive")

if(COMPARE)
  execute_process(COMMAND ${COMPARE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the compare script exited with status ${rc}")
  endif()
  message("call_overhead_smoke: the compare script ran")
endif()
