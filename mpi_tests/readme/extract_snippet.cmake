# SPDX-License-Identifier: Apache-2.0
# Writes the C++ block of README.md that sits between the lines
# "<!-- readme-snippet begin -->" and "<!-- readme-snippet end -->" to OUT.
#   cmake -DREADME=<README.md> -DOUT=<file.cpp> -P extract_snippet.cmake
# Fails, saying what is missing, when the markers or the ```cpp fence are
# gone: a README edit must not silently leave the test compiling nothing.
file(READ "${README}" text)
set(begin_marker "<!-- readme-snippet begin -->")
set(end_marker "<!-- readme-snippet end -->")
string(FIND "${text}" "${begin_marker}" begin)
string(FIND "${text}" "${end_marker}" end)
if(begin EQUAL -1 OR end EQUAL -1 OR end LESS begin)
  message(FATAL_ERROR "${README}: expected the lines '${begin_marker}' and '${end_marker}' "
                      "around the C++ usage example")
endif()
string(LENGTH "${begin_marker}" begin_length)
math(EXPR from "${begin} + ${begin_length}")
math(EXPR length "${end} - ${from}")
string(SUBSTRING "${text}" ${from} ${length} block)
# The block is exactly one fenced ```cpp ... ``` code block.
if(NOT block MATCHES "^[ \t\r\n]*```cpp\r?\n(.*)\r?\n```[ \t\r\n]*$")
  message(FATAL_ERROR "${README}: between the readme-snippet markers there must be one "
                      "```cpp fenced block and nothing else")
endif()
set(code "${CMAKE_MATCH_1}\n")
# Rewrite only when the text changed, so the snippet is not rebuilt for
# README edits elsewhere.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL code)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${code}")
