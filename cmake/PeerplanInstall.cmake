# SPDX-License-Identifier: Apache-2.0
# Installs the library, its headers, a CMake package (find_package(peerplan)
# -> peerplan::peerplan) and a pkg-config file, both of which say whether the
# build has the CUDA backend and NCCL (PeerplanPackageDependencies.cmake).
include(CMakePackageConfigHelpers)
include(PeerplanPackageDependencies)

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
file(RELATIVE_PATH PEERPLAN_PC_PREFIX_FROM_PCDIR
     "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file(${PROJECT_SOURCE_DIR}/cmake/peerplan.pc.in ${PROJECT_BINARY_DIR}/peerplan.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/peerplan-c.pc.in ${PROJECT_BINARY_DIR}/peerplan-c.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/peerplan.pc ${PROJECT_BINARY_DIR}/peerplan-c.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
