# SPDX-License-Identifier: Apache-2.0
# Installs the build tree into a fresh prefix, builds tests/install/consumer
# against it twice (CMake package, then pkg-config) and the C example with
# mpicc and pkg-config, and runs the three binaries.
# Both packages must report what the build has (EXPECT_CUDA, EXPECT_NCCL:
# ON/OFF), and the installed library must need libnccl exactly when NCCL
# was built.
# Invoked by ctest: cmake -DBUILD_DIR=.. -DSOURCE_DIR=.. -DWORK_DIR=..
#                         -DEXPECT_CUDA=.. -DEXPECT_NCCL=.. -P this
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR EXPECT_CUDA EXPECT_NCCL)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "${var} not set")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "$ ${ARGN}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}")
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

# 1. CMake package: find_package(peerplan) -> peerplan::peerplan.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/cmake-build
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
    -DEXPECT_CUDA=${EXPECT_CUDA} -DEXPECT_NCCL=${EXPECT_NCCL})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
run(${WORK_DIR}/cmake-build/consumer)

# 2. pkg-config: the same source compiled by hand with peerplan.pc.
file(GLOB pc_file ${prefix}/lib*/pkgconfig/peerplan.pc ${prefix}/lib/*/pkgconfig/peerplan.pc)
get_filename_component(pc_dir "${pc_file}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pc_dir}:$ENV{PKG_CONFIG_PATH}")
# A static libpeerplan brings its private dependencies (Libs.private).
file(GLOB shared_library ${prefix}/lib*/libpeerplan.so ${prefix}/lib/*/libpeerplan.so)
set(static_flag)
if(NOT shared_library)
  set(static_flag --static)
endif()
execute_process(COMMAND pkg-config --cflags --libs ${static_flag} peerplan
                RESULT_VARIABLE rc OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config cannot resolve peerplan.pc in ${pc_dir}")
endif()
expect_pc_variable(cuda_backend ${EXPECT_CUDA})
expect_pc_variable(nccl ${EXPECT_NCCL})
separate_arguments(flags UNIX_COMMAND "${flags}")
run(c++ ${SOURCE_DIR}/tests/install/consumer/consumer.cpp ${flags}
    -Wl,-rpath,${pc_dir}/.. -o ${WORK_DIR}/consumer-pkgconfig)
run(${WORK_DIR}/consumer-pkgconfig)

# 2b. The C interface: the C example compiled by the MPI C compiler against
# the installed header and library with peerplan-c.pc, run as one rank.
execute_process(COMMAND pkg-config --cflags --libs ${static_flag} peerplan-c
                RESULT_VARIABLE rc OUTPUT_VARIABLE c_flags OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config cannot resolve peerplan-c.pc in ${pc_dir}")
endif()
separate_arguments(c_flags UNIX_COMMAND "${c_flags}")
find_program(MPICC NAMES mpicc)
if(MPICC)
  run(${MPICC} -std=c99 -Wall -Werror ${SOURCE_DIR}/examples/c/all_reduce.c ${c_flags}
      -Wl,-rpath,${pc_dir}/.. -o ${WORK_DIR}/c-consumer-pkgconfig)
  run(${WORK_DIR}/c-consumer-pkgconfig)
else()
  message(FATAL_ERROR "mpicc not found: cannot check the installed C interface")
endif()

# 3. The installed library needs libnccl exactly when the build has NCCL: a
# build without it must run where NCCL is not installed.
find_program(READELF readelf)
if(READELF)
  if(shared_library)  # a static library needs nothing at run time by itself
    list(GET shared_library 0 library)
    execute_process(COMMAND ${READELF} -d ${library} OUTPUT_VARIABLE dynamic)
    if(dynamic MATCHES "NEEDED[^\n]*libnccl")
      set(needs_nccl ON)
    else()
      set(needs_nccl OFF)
    endif()
    if(NOT needs_nccl STREQUAL EXPECT_NCCL)
      message(FATAL_ERROR "${library} needs libnccl: ${needs_nccl}; this build has NCCL: ${EXPECT_NCCL}")
    endif()
    message(STATUS "${library} needs libnccl: ${needs_nccl}, as expected")
  endif()
else()
  message(STATUS "readelf not found: not checking which libraries libpeerplan.so needs")
endif()

# 4. The Python package cmake --install put under the prefix imports and
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
