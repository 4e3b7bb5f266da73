# SPDX-License-Identifier: Apache-2.0
# Writes the fenced block of a Markdown file that sits between the lines
# "<!-- NAME begin -->" and "<!-- NAME end -->" to OUT.
#   cmake -DREADME=<file.md> -DOUT=<file> [-DNAME=readme-snippet] [-DLANG=cpp]
#         -P extract_snippet.cmake
# NAME defaults to "readme-snippet" (README.md's C++ example), LANG to cpp;
# the docs' C example is NAME="snippet c", LANG=c. Fails, saying what is
# missing, when the markers or the fence are gone: a doc edit must not
# silently leave the test compiling nothing.
if(NOT DEFINED NAME)
  set(NAME "readme-snippet")
endif()
if(NOT DEFINED LANG)
  set(LANG "cpp")
endif()
file(READ "${README}" text)
set(begin_marker "<!-- ${NAME} begin -->")
set(end_marker "<!-- ${NAME} end -->")
string(FIND "${text}" "${begin_marker}" begin)
string(FIND "${text}" "${end_marker}" end)
if(begin EQUAL -1 OR end EQUAL -1 OR end LESS begin)
  message(FATAL_ERROR "${README}: expected the lines '${begin_marker}' and '${end_marker}' "
                      "around the ${LANG} example")
endif()
string(LENGTH "${begin_marker}" begin_length)
math(EXPR from "${begin} + ${begin_length}")
math(EXPR length "${end} - ${from}")
string(SUBSTRING "${text}" ${from} ${length} block)
# The block is exactly one fenced ```LANG ... ``` code block.
if(NOT block MATCHES "^[ \t\r\n]*```${LANG}\r?\n(.*)\r?\n```[ \t\r\n]*$")
  message(FATAL_ERROR "${README}: between the '${NAME}' markers there must be one "
                      "```${LANG} fenced block and nothing else")
endif()
set(code "${CMAKE_MATCH_1}\n")
# Rewrite only when the text changed, so the snippet is not rebuilt for
# edits elsewhere in the file.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL code)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${code}")
