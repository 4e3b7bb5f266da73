# SPDX-License-Identifier: Apache-2.0
# Installs the build tree into a fresh prefix and builds four consumers
# against it the way docs/install.md says, each run at 2 ranks on the host
# backend:
#   1. tests/install/consumer (C++) with CMake: find_package(peerplan);
#   2. tests/install/consumer_c with CMake in a C-only project(... C);
#   3. consumer.cpp by mpicxx -std=c++20 with pkg-config's peerplan;
#   4. consumer_c/consumer.c by mpicc with pkg-config's peerplan-c.
# Both packages must report what the build has (EXPECT_CUDA, EXPECT_NCCL:
# ON/OFF). The installed shared library must carry the SONAME of
# PROJECT_VERSION (libpeerplan.so.0.1 while 0.x), need libnccl exactly
# when NCCL was built, have the RUNPATH EXPECT_RPATH ('|'-separated; none
# when empty) and find every library it needs without LD_LIBRARY_PATH.
# Invoked by ctest: cmake -DBUILD_DIR=.. -DSOURCE_DIR=.. -DWORK_DIR=..
#   -DEXPECT_CUDA=.. -DEXPECT_NCCL=.. -DEXPECT_RPATH=.. -DPROJECT_VERSION=..
#   -DMPIEXEC=.. -P this
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR EXPECT_CUDA EXPECT_NCCL PROJECT_VERSION MPIEXEC)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "${var} not set")
  endif()
endforeach()
string(REPLACE "|" ";" EXPECT_RPATH "${EXPECT_RPATH}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "$ ${ARGN}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}")
  endif()
endfunction()

# The consumers run on the host backend, 2 ranks even on a 1-core machine.
set(ENV{PEERPLAN_BACKEND} host)
execute_process(COMMAND ${MPIEXEC} --version OUTPUT_VARIABLE mpiexec_version
                ERROR_VARIABLE mpiexec_version)
set(mpiexec ${MPIEXEC} -n 2)
if(mpiexec_version MATCHES "Open MPI|OpenRTE")
  list(APPEND mpiexec --oversubscribe --bind-to none)
endif()
# run_2_ranks(<program> <what its rank 0 prints on success>)
function(run_2_ranks program success)
  execute_process(COMMAND ${mpiexec} ${program} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  message(STATUS "$ ${mpiexec} ${program}\n${out}${err}")
  if(NOT rc EQUAL 0 OR NOT out MATCHES "${success}")
    message(FATAL_ERROR "${program} at 2 ranks failed (${rc}), or printed no '${success}'")
  endif()
endfunction()

# expect_pc_variable(<variable> <ON|OFF>): peerplan.pc's <variable> says
# yes when the build has the thing, no when it has not.
function(expect_pc_variable variable built)
  execute_process(COMMAND pkg-config --variable=${variable} peerplan
                  OUTPUT_VARIABLE value OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(built)
    set(expected yes)
  else()
    set(expected no)
  endif()
  if(NOT value STREQUAL expected)
    message(FATAL_ERROR "peerplan.pc says ${variable}=${value}; the build says ${expected}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
set(consumers ${SOURCE_DIR}/tests/install)

# 1. and 2. CMake packages: find_package(peerplan) -> peerplan::peerplan,
# from C++ and from a project that enables C alone.
file(GLOB shared_library ${prefix}/lib*/libpeerplan.so ${prefix}/lib/*/libpeerplan.so)
if(shared_library)
  set(static_library OFF)
else()
  set(static_library ON)
endif()
foreach(project consumer consumer_c)
  run(${CMAKE_COMMAND} -S ${consumers}/${project} -B ${WORK_DIR}/${project}-cmake
      -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
      -DEXPECT_CUDA=${EXPECT_CUDA} -DEXPECT_NCCL=${EXPECT_NCCL}
      -DCONSUMER_NEEDS_CXX=${static_library})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/${project}-cmake)
  run_2_ranks(${WORK_DIR}/${project}-cmake/${project} "${project}: .* 2 ranks, 0 failures")
endforeach()

# 3. and 4. pkg-config: the same sources compiled by the MPI compiler
# wrappers, with the flags of peerplan.pc and peerplan-c.pc and nothing
# else but the C++ standard (docs/install.md).
file(GLOB pc_file ${prefix}/lib*/pkgconfig/peerplan.pc ${prefix}/lib/*/pkgconfig/peerplan.pc)
get_filename_component(pc_dir "${pc_file}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pc_dir}:$ENV{PKG_CONFIG_PATH}")
expect_pc_variable(cuda_backend ${EXPECT_CUDA})
expect_pc_variable(nccl ${EXPECT_NCCL})
# A static libpeerplan brings its private dependencies (Libs.private).
set(static_flag)
if(static_library)
  set(static_flag --static)
endif()
find_program(MPICXX NAMES mpicxx mpic++ mpiCC)
find_program(MPICC NAMES mpicc)
if(NOT MPICXX OR NOT MPICC)
  message(FATAL_ERROR "mpicxx or mpicc not found: cannot check the pkg-config files")
endif()
foreach(package peerplan peerplan-c)
  execute_process(COMMAND pkg-config --cflags --libs ${static_flag} ${package}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config cannot resolve ${package}.pc in ${pc_dir}")
  endif()
  if(flags MATCHES "-std=")
    message(FATAL_ERROR "${package}.pc sets the language standard (${flags}): the program's choice")
  endif()
  separate_arguments(flags_${package} UNIX_COMMAND "${flags}")
endforeach()
run(${MPICXX} -std=c++20 ${consumers}/consumer/consumer.cpp ${flags_peerplan}
    -Wl,-rpath,${pc_dir}/.. -o ${WORK_DIR}/consumer-pkgconfig)
run_2_ranks(${WORK_DIR}/consumer-pkgconfig "consumer: .* 2 ranks, 0 failures")
if(static_library)  # C++ code inside: linked by the C++ wrapper (docs/install.md)
  run(${MPICC} -std=c99 -Wall -Werror -c ${consumers}/consumer_c/consumer.c ${flags_peerplan-c}
      -o ${WORK_DIR}/consumer_c.o)
  run(${MPICXX} ${WORK_DIR}/consumer_c.o ${flags_peerplan-c} -o ${WORK_DIR}/consumer_c-pkgconfig)
else()
  run(${MPICC} -std=c99 -Wall -Werror ${consumers}/consumer_c/consumer.c ${flags_peerplan-c}
      -Wl,-rpath,${pc_dir}/.. -o ${WORK_DIR}/consumer_c-pkgconfig)
endif()
run_2_ranks(${WORK_DIR}/consumer_c-pkgconfig "consumer_c: .* 2 ranks, 0 failures")

# 5. The installed shared library: SONAME, NEEDED libnccl, RUNPATH.
if(NOT shared_library)  # a static library needs nothing at run time by itself
  return()
endif()
find_program(READELF readelf)
if(NOT READELF)
  message(FATAL_ERROR "readelf not found: cannot check the installed libpeerplan.so")
endif()
list(GET shared_library 0 library)
execute_process(COMMAND ${READELF} -d ${library} OUTPUT_VARIABLE dynamic)
message(STATUS "$ readelf -d ${library}\n${dynamic}")

# While the version is 0.x every minor release may change the ABI (the
# package's version file says SameMinorVersion), so the SONAME has both.
string(REPLACE "." ";" version_parts "${PROJECT_VERSION}")
list(GET version_parts 0 major)
list(GET version_parts 1 minor)
if(major EQUAL 0)
  set(expected_soname libpeerplan.so.0.${minor})
else()
  set(expected_soname libpeerplan.so.${major})
endif()
if(NOT dynamic MATCHES "SONAME[^\n]*\\[([^]]*)\\]" OR NOT CMAKE_MATCH_1 STREQUAL expected_soname)
  message(FATAL_ERROR "${library}'s SONAME is '${CMAKE_MATCH_1}', not ${expected_soname}")
endif()

# A build without NCCL must run where NCCL is not installed.
if(dynamic MATCHES "NEEDED[^\n]*libnccl")
  set(needs_nccl ON)
else()
  set(needs_nccl OFF)
endif()
if(NOT needs_nccl STREQUAL EXPECT_NCCL)
  message(FATAL_ERROR "${library} needs libnccl: ${needs_nccl}; this build has NCCL: ${EXPECT_NCCL}")
endif()

# RUNPATH: the dependencies' folders outside the system's, none otherwise.
set(runpath)
if(dynamic MATCHES "\\((RUNPATH|RPATH)\\)[^\n]*\\[([^]]*)\\]")
  string(REPLACE ":" ";" runpath "${CMAKE_MATCH_2}")
endif()
if(NOT "${runpath}" STREQUAL "${EXPECT_RPATH}")
  message(FATAL_ERROR "${library}'s RUNPATH is '${runpath}', expected '${EXPECT_RPATH}'")
endif()
# And every library it needs is found from there or the system's folders.
unset(ENV{LD_LIBRARY_PATH})
execute_process(COMMAND ldd ${library} OUTPUT_VARIABLE ldd_out ERROR_VARIABLE ldd_out)
message(STATUS "$ ldd ${library} (no LD_LIBRARY_PATH)\n${ldd_out}")
if(ldd_out MATCHES "not found")
  message(FATAL_ERROR "the installed ${library} does not find a library it needs without "
                      "LD_LIBRARY_PATH")
endif()
message(STATUS "${library}: SONAME ${expected_soname}, needs libnccl: ${needs_nccl}, "
               "RUNPATH '${runpath}', every needed library found")

# 6. The Python package cmake --install put under the prefix imports and
# loads the installed library (its _install.py), without PEERPLAN_LIBRARY.
file(GLOB python_package ${prefix}/lib/python*/site-packages/peerplan/_install.py)
find_program(PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(python_package AND PYTHON3 AND shared_library)
  get_filename_component(python_dir "${python_package}" DIRECTORY)
  get_filename_component(python_dir "${python_dir}" DIRECTORY)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env --unset=PEERPLAN_LIBRARY PYTHONPATH=${python_dir}
            ${PYTHON3} -c "import peerplan; print(peerplan._library.library_path)"
    RESULT_VARIABLE rc OUTPUT_VARIABLE loaded ERROR_VARIABLE err
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  file(REAL_PATH "${prefix}" real_prefix)
  if(NOT rc EQUAL 0 OR NOT loaded MATCHES "^${real_prefix}/")
    message(FATAL_ERROR "the installed Python package loaded '${loaded}' (${rc}): ${err}; "
                        "expected the library under ${prefix}")
  endif()
  message(STATUS "the installed Python package loads ${loaded}")
elseif(shared_library)
  message(FATAL_ERROR "cmake --install put no Python package under ${prefix}/lib/python*/site-packages")
endif()
