# SPDX-License-Identifier: Apache-2.0
# The library boundary, checked on the built libpeerplan.so: it exports the
# public API (what include/peerplan/ marks PEERPLAN_API) and nothing of the
# layers under src/.
#
#   cmake -DNM=<nm> -DLIBRARY=<libpeerplan.so> -DC_HEADER=<peerplan.h> -P check_exports.cmake
#
# Fails when an exported symbol
#  - lies in a namespace of peerplan's internals: peerplan::<lowercase>::
#    (plan, transport, routing, communicator, bootstrap, core, topology,
#    log, fault, capi, cuda_kernels, ...: the public API has no namespace
#    of its own below peerplan, and its classes are capitalised) or an
#    anonymous namespace of peerplan;
#  - is neither peerplan's (the C++ API or a peerplan_ C function) nor the
#    C++ standard library's (template instantiations the library's code
#    emits; namespace std has default visibility, so -fvisibility=hidden
#    leaves them exported, as it does in every C++ shared library);
# or when an expected public symbol is missing: every C function that
# peerplan.h declares, and a few C++ ones (Communicator::create, the type
# information of the error classes an application catches).
foreach(var NM LIBRARY C_HEADER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "${var} not set")
  endif()
endforeach()

execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY}
                RESULT_VARIABLE rc OUTPUT_VARIABLE mangled_out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed (${rc}): ${err}")
endif()
execute_process(COMMAND ${NM} -D --defined-only --demangle ${LIBRARY}
                RESULT_VARIABLE rc OUTPUT_VARIABLE demangled_out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only --demangle ${LIBRARY} failed (${rc}): ${err}")
endif()

# One entry per line, "<address> <type> <name>": keep the names. nm prints
# both listings in the same order, so line i of one is line i of the other.
# (Semicolons are CMake's list separator and occur in no symbol name.)
function(symbol_names text out)
  string(REPLACE "\n" ";" lines "${text}")
  set(names)
  foreach(line IN LISTS lines)
    if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] (.+)$")
      list(APPEND names "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(${out} "${names}" PARENT_SCOPE)
endfunction()
# Brackets in demangled names ([abi:cxx11]) would be taken for list syntax.
string(REPLACE "[" "<lb>" demangled_out "${demangled_out}")
string(REPLACE "]" "<rb>" demangled_out "${demangled_out}")
symbol_names("${mangled_out}" mangled)
symbol_names("${demangled_out}" demangled)
list(LENGTH mangled count)
list(LENGTH demangled demangled_count)
if(NOT count EQUAL demangled_count OR count EQUAL 0)
  message(FATAL_ERROR "nm listed ${count} symbols, ${demangled_count} demangled: cannot compare")
endif()

set(internal)
set(foreign)
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
  list(GET mangled ${i} raw)
  list(GET demangled ${i} name)
  string(REPLACE "<lb>" "[" name "${name}")
  string(REPLACE "<rb>" "]" name "${name}")
  if(name MATCHES "peerplan::([a-z_][a-z0-9_]*)::" OR name MATCHES "peerplan::\\(anonymous")
    list(APPEND internal "  ${name}")
  elseif(raw MATCHES "^peerplan_[a-z0-9_]+$")
    # The C interface.
  elseif(raw MATCHES "^_Z(T[ISVT])?NK?8peerplan")
    # The C++ API: functions and classes of namespace peerplan, their type
    # information and vtables.
  elseif(raw MATCHES "^_Z(Z|GV|T[ISVT])?(P?F)?[NK]*(St|S[abdiost]|9__gnu_cxx)")
    # The standard library's templates (and their local statics),
    # instantiated by the library's code.
  elseif(raw MATCHES "^(_init|_fini|_edata|_end|__bss_start)$")
    # Added by the linker.
  else()
    list(APPEND foreign "  ${name} (${raw})")
  endif()
endforeach()

# What must be there: every function peerplan.h declares (a declaration
# starts a line: "<type> peerplan_<name>(", PEERPLAN_API first), and the
# C++ symbols an application cannot do without.
file(STRINGS ${C_HEADER} declarations REGEX "^[A-Za-z_][^(]*[ *]peerplan_[a-z0-9_]+\\(")
set(expected)
set(unmarked)
foreach(declaration IN LISTS declarations)
  if(declaration MATCHES "(peerplan_[a-z0-9_]+)\\(")
    set(function "${CMAKE_MATCH_1}")
    list(APPEND expected "${function}")
    if(NOT declaration MATCHES "^PEERPLAN_API ")
      list(APPEND unmarked "  ${function}")
    endif()
  endif()
endforeach()
list(LENGTH expected c_functions)
if(c_functions LESS 20)
  message(FATAL_ERROR "found only ${c_functions} function declarations in ${C_HEADER}: "
                      "has its declaration style changed?")
endif()
list(APPEND expected
  _ZN8peerplan12Communicator6createEP19ompi_communicator_tNS_6ConfigE  # create (Open MPI's MPI_Comm)
  _ZTIN8peerplan5ErrorE            # typeinfo for peerplan::Error
  _ZTIN8peerplan7TimeoutE          # typeinfo for peerplan::Timeout
  _ZTIN8peerplan15InvalidArgumentE # typeinfo for peerplan::InvalidArgument
  _ZN8peerplan17apply_environmentENS_6ConfigE
  _ZN8peerplan9to_stringENS_9ErrorCodeE)
set(missing)
foreach(symbol IN LISTS expected)
  if(symbol MATCHES "ompi_communicator_t" AND NOT mangled MATCHES "ompi_communicator_t")
    # Another MPI's MPI_Comm: look the function up by its name only.
    if(NOT mangled MATCHES "_ZN8peerplan12Communicator6createE")
      list(APPEND missing "  peerplan::Communicator::create")
    endif()
    continue()
  endif()
  list(FIND mangled "${symbol}" at)
  if(at EQUAL -1)
    list(APPEND missing "  ${symbol}")
  endif()
endforeach()

message(STATUS "${LIBRARY}: ${count} exported symbols")
set(problems "")
if(internal)
  list(JOIN internal "\n" text)
  string(APPEND problems "exported from peerplan's internal namespaces (mark nothing there "
                         "PEERPLAN_API; is every object compiled with hidden visibility?):\n${text}\n")
endif()
if(foreign)
  list(JOIN foreign "\n" text)
  string(APPEND problems "exported, but neither peerplan's API nor the C++ standard library's "
                         "(a dependency's code compiled into the library?):\n${text}\n")
endif()
if(missing)
  list(JOIN missing "\n" text)
  string(APPEND problems "public symbols missing (a declaration without PEERPLAN_API?):\n${text}\n")
endif()
if(unmarked)
  list(JOIN unmarked "\n" text)
  string(APPEND problems "declared in peerplan.h without PEERPLAN_API:\n${text}\n")
endif()
if(problems)
  message(FATAL_ERROR "${problems}")
endif()
list(LENGTH expected expected_count)
message(STATUS "no internal symbol exported; all ${expected_count} expected public symbols "
               "(${c_functions} C functions) present")
