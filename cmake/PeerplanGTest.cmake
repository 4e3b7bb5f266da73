# SPDX-License-Identifier: Apache-2.0
# GoogleTest: the installed config package first, else the sources Debian
# ships in /usr/src/googletest (package googletest). Never downloaded.
find_package(GTest CONFIG QUIET)
if(NOT GTest_FOUND)
  set(PEERPLAN_GTEST_SOURCE_DIR /usr/src/googletest CACHE PATH "GoogleTest sources")
  if(NOT EXISTS ${PEERPLAN_GTEST_SOURCE_DIR}/CMakeLists.txt)
    message(FATAL_ERROR "GoogleTest not found: install libgtest-dev (or googletest), "
                        "or set GTest_DIR / PEERPLAN_GTEST_SOURCE_DIR, "
                        "or configure with -DPEERPLAN_BUILD_TESTS=OFF")
  endif()
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  add_subdirectory(${PEERPLAN_GTEST_SOURCE_DIR} ${PROJECT_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
  # GoogleTest >= 1.11 defines these aliases itself; older trees do not.
  if(NOT TARGET GTest::gtest)
    add_library(GTest::gtest ALIAS gtest)
    add_library(GTest::gtest_main ALIAS gtest_main)
  endif()
endif()
include(GoogleTest)
