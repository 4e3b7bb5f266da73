# SPDX-License-Identifier: Apache-2.0
# peerplan_pkg_config_paths (cmake/PeerplanPkgConfigPaths.cmake): the usual
# relative folders give a prefix found from the .pc file's folder; an
# absolute libdir or includedir (GNUInstallDirs allows them) is written as
# it is, escaped, instead of a prefix relative to a folder outside it.
#   cmake -DMODULE=<PeerplanPkgConfigPaths.cmake> -P this
cmake_minimum_required(VERSION 3.25)
include(${MODULE})

function(expect what libdir includedir expected_prefix expected_libdir expected_includedir)
  peerplan_pkg_config_paths(prefix lib include LIBDIR "${libdir}" INCLUDEDIR "${includedir}"
                            INSTALL_PREFIX "/opt/my prefix")
  foreach(pair "prefix;${expected_prefix}" "lib;${expected_libdir}"
               "include;${expected_includedir}")
    list(GET pair 0 name)
    list(GET pair 1 expected)
    if(NOT "${${name}}" STREQUAL "${expected}")
      message(FATAL_ERROR "${what}: ${name} is '${${name}}', expected '${expected}'")
    endif()
  endforeach()
  message(STATUS "${what}: prefix=${prefix} libdir=${lib} includedir=${include}")
endfunction()

expect("relative" lib include "\${pcfiledir}/../.." "\${prefix}/lib" "\${prefix}/include")
expect("relative, two levels" lib/x86_64-linux-gnu include "\${pcfiledir}/../../.."
       "\${prefix}/lib/x86_64-linux-gnu" "\${prefix}/include")
expect("absolute libdir" "/opt/pp/lib64" include "/opt/my\\ prefix" "/opt/pp/lib64"
       "\${prefix}/include")
expect("absolute both" "/srv/a b/lib" "/srv/a b/include" "/opt/my\\ prefix" "/srv/a\\ b/lib"
       "/srv/a\\ b/include")
