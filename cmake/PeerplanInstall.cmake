# SPDX-License-Identifier: Apache-2.0
# Installs the library, its headers, a CMake package (find_package(peerplan)
# -> peerplan::peerplan) and a pkg-config file, both of which say whether the
# build has the CUDA backend and NCCL (PeerplanPackageDependencies.cmake).
include(CMakePackageConfigHelpers)
include(PeerplanPackageDependencies)
include(PeerplanInstallRpath)
include(PeerplanPkgConfigPaths)

# The installed shared library finds its dependencies outside the system's
# folders through its RUNPATH (cmake/PeerplanInstallRpath.cmake), after any
# CMAKE_INSTALL_RPATH the user set; CMAKE_SKIP_INSTALL_RPATH drops it all.
if(_peerplan_type STREQUAL "SHARED_LIBRARY")
  set(_dependency_files ${MPI_CXX_LIBRARIES} ${HWLOC_LINK_LIBRARIES})
  foreach(_target CUDA::cudart NCCL::nccl)
    peerplan_imported_location(_file ${_target})
    list(APPEND _dependency_files ${_file})
  endforeach()
  peerplan_dependency_rpath(_dependency_rpath
    SYSTEM_DIRS ${CMAKE_C_IMPLICIT_LINK_DIRECTORIES} ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES}
                ${CMAKE_PLATFORM_IMPLICIT_LINK_DIRECTORIES}
    LIBRARIES ${_dependency_files})
  set_property(TARGET peerplan APPEND PROPERTY INSTALL_RPATH ${_dependency_rpath})
endif()

install(TARGETS peerplan EXPORT peerplanTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/peerplan
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/include/peerplan/version.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/peerplan)

set(PEERPLAN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/peerplan)
install(EXPORT peerplanTargets NAMESPACE peerplan:: DESTINATION ${PEERPLAN_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/peerplanConfig.cmake.in
  ${PROJECT_BINARY_DIR}/peerplanConfig.cmake
  INSTALL_DESTINATION ${PEERPLAN_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/peerplanConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/peerplanConfig.cmake
              ${PROJECT_BINARY_DIR}/peerplanConfigVersion.cmake
  DESTINATION ${PEERPLAN_CMAKE_DIR})

# The .pc file finds its prefix relative to itself, so the installed tree
# works wherever it is installed or moved (cmake --install --prefix ...).
peerplan_pkg_config_paths(PEERPLAN_PC_PREFIX PEERPLAN_PC_LIBDIR PEERPLAN_PC_INCLUDEDIR
  LIBDIR "${CMAKE_INSTALL_LIBDIR}" INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}"
  INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/peerplan.pc.in ${PROJECT_BINARY_DIR}/peerplan.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/peerplan-c.pc.in ${PROJECT_BINARY_DIR}/peerplan-c.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/peerplan.pc ${PROJECT_BINARY_DIR}/peerplan-c.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
