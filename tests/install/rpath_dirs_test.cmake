# SPDX-License-Identifier: Apache-2.0
# peerplan_dependency_rpath (cmake/PeerplanInstallRpath.cmake) on faked
# library folders:
#   - a library outside the system folders (a tarball NCCL) adds its folder;
#   - a library in a system folder adds nothing;
#   - a folder that is a link into a system folder (Debian's openmpi/lib)
#     adds nothing;
#   - a link to a folder outside them (/usr/local/cuda) is kept as named;
#   - bare names and -l flags are skipped, folders come once each.
#   cmake -DMODULE=<PeerplanInstallRpath.cmake> -DWORK_DIR=<scratch> -P this
cmake_minimum_required(VERSION 3.25)
include(${MODULE})
file(REMOVE_RECURSE ${WORK_DIR})
set(system ${WORK_DIR}/usr/lib)
set(tarball ${WORK_DIR}/opt/nccl/lib)
set(toolkit ${WORK_DIR}/opt/cuda-13.0/lib64)
file(MAKE_DIRECTORY ${system} ${tarball} ${toolkit} ${WORK_DIR}/usr/lib/openmpi)
file(TOUCH ${system}/libmpi.so.40 ${system}/libhwloc.so ${tarball}/libnccl.so
     ${toolkit}/libcudart.so)
file(CREATE_LINK ${system} ${WORK_DIR}/usr/lib/openmpi/lib SYMBOLIC)
file(CREATE_LINK ${WORK_DIR}/opt/cuda-13.0 ${WORK_DIR}/opt/cuda SYMBOLIC)

function(expect what expected)
  peerplan_dependency_rpath(rpath SYSTEM_DIRS ${system} LIBRARIES ${ARGN})
  if(NOT rpath STREQUAL expected)
    message(FATAL_ERROR "${what}: got '${rpath}', expected '${expected}'")
  endif()
  message(STATUS "${what}: '${rpath}'")
endfunction()

expect("system libraries only" "" ${system}/libmpi.so.40 ${system}/libhwloc.so)
expect("a link into the system folder" "" ${WORK_DIR}/usr/lib/openmpi/lib/libmpi.so.40)
expect("a tarball NCCL" "${tarball}" ${system}/libhwloc.so ${tarball}/libnccl.so)
expect("a link to a toolkit, twice" "${WORK_DIR}/opt/cuda/lib64;${tarball}"
       ${WORK_DIR}/opt/cuda/lib64/libcudart.so ${tarball}/libnccl.so
       ${WORK_DIR}/opt/cuda/lib64/libcudart.so -ldl rt)
