# SPDX-License-Identifier: Apache-2.0
# The prefix, libdir and includedir lines of the installed .pc files. With
# the usual relative install folders the prefix is found from the .pc file's
# own folder (${pcfiledir}), so the installed tree works wherever it is
# installed or moved. An absolute CMAKE_INSTALL_LIBDIR or _INCLUDEDIR
# (GNUInstallDirs allows one) is written as it is: a prefix relative to a
# libdir outside it would name another folder.

# peerplan_pkg_config_paths(<prefix> <libdir> <includedir> LIBDIR <dir>
#   INCLUDEDIR <dir> INSTALL_PREFIX <dir>): the three values, spaces escaped
# as pkg-config reads them.
function(peerplan_pkg_config_paths prefix_out libdir_out includedir_out)
  cmake_parse_arguments(ARG "" "LIBDIR;INCLUDEDIR;INSTALL_PREFIX" "" ${ARGN})
  if(IS_ABSOLUTE "${ARG_LIBDIR}")
    set(prefix "${ARG_INSTALL_PREFIX}")
  else()
    file(RELATIVE_PATH from_pcdir "/prefix/${ARG_LIBDIR}/pkgconfig" "/prefix")
    string(REGEX REPLACE "/$" "" from_pcdir "${from_pcdir}")  # "../../" on some CMakes
    set(prefix "\${pcfiledir}/${from_pcdir}")
  endif()
  foreach(kind LIBDIR INCLUDEDIR)
    if(IS_ABSOLUTE "${ARG_${kind}}")
      set(${kind} "${ARG_${kind}}")
    else()
      set(${kind} "\${prefix}/${ARG_${kind}}")
    endif()
  endforeach()
  foreach(value prefix LIBDIR INCLUDEDIR)
    string(REPLACE " " "\\ " ${value} "${${value}}")
  endforeach()
  set(${prefix_out} "${prefix}" PARENT_SCOPE)
  set(${libdir_out} "${LIBDIR}" PARENT_SCOPE)
  set(${includedir_out} "${INCLUDEDIR}" PARENT_SCOPE)
endfunction()
