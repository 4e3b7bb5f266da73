# SPDX-License-Identifier: Apache-2.0
# cmake -DPROGRAM=<peerplan_nccl_interposer_cost> -P nccl_interposer_cost_smoke.cmake
#
# The interposer cost benchmark's smoke test (benchmarks/CMakeLists.txt):
# a tiny run must exit 0 and print a time for every case. Asserts that the
# program works, not how fast anything is.
cmake_minimum_required(VERSION 3.25)
set(_cases
  "empty loop"
  "stand-in NCCL, called directly"
  "communicator never seen"
  "never seen, libpeerplan_nccl.so"
  "in the table, no peerplan"
  "peerplan, undeclared size \\(NCCL\\)"
  "peerplan, declared size")
execute_process(COMMAND ${PROGRAM} -n 1000 RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the benchmark exited with status ${rc}")
endif()
foreach(_case IN LISTS _cases)
  if(NOT out MATCHES "\n${_case} +[0-9]+\\.[0-9][0-9]")
    message(FATAL_ERROR "no time printed for the case \"${_case}\"")
  endif()
endforeach()
