# SPDX-License-Identifier: Apache-2.0
# gpuplug_add_plugin(<name> SOURCES <src>... [LINK <target>...]): builds libgpuplug-<name>.so as a
# MODULE library with hidden visibility, linked to the plugin SDK, placed in the plugin folder
# of the build tree and installed to <libdir>/gpuplug/plugins.
#
# Used by gpuplug's own build and, installed with the CMake package, by out-of-tree plugins
# (find_package(gpuplug CONFIG) includes this file). Settings, each read when the function runs:
#   GPUPLUG_PLUGIN_BUILD_DIR    where the .so is built. Default ${CMAKE_BINARY_DIR}/lib/gpuplug/
#                               plugins: the install layout, so the SDK's default modules_dir
#                               (<plugin folder>/../kernels/<name>) is
#                               ${GPUPLUG_KERNEL_BUILD_DIR}/<name>.
#   GPUPLUG_PLUGIN_INSTALL_DIR  where it is installed. Default <libdir>/gpuplug/plugins,
#                               the folder an installed libgpuplug searches in the same prefix.
#   GPUPLUG_KERNEL_BUILD_DIR, GPUPLUG_KERNEL_INSTALL_DIR  the matching kernel folders (defaults
#                               set below, for the plugin's own kernel rules to use).
#   GPUPLUG_SANITIZER           non-empty when building with a sanitizer: drops -Wl,--no-undefined
#                               (the sanitizer runtime comes from the host process).
#   GPUPLUG_PLUGIN_EXPORTS_MAP  a linker version script exporting only gpuplug_plugin_entry; the
#                               package and gpuplug's own top-level CMakeLists set it.
include_guard(GLOBAL)
include(GNUInstallDirs)

if(NOT DEFINED GPUPLUG_PLUGIN_BUILD_DIR)
  set(GPUPLUG_PLUGIN_BUILD_DIR ${CMAKE_BINARY_DIR}/lib/gpuplug/plugins)
endif()
if(NOT DEFINED GPUPLUG_KERNEL_BUILD_DIR)
  set(GPUPLUG_KERNEL_BUILD_DIR ${CMAKE_BINARY_DIR}/lib/gpuplug/kernels)
endif()
if(NOT DEFINED GPUPLUG_PLUGIN_INSTALL_DIR)
  set(GPUPLUG_PLUGIN_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/gpuplug/plugins)
endif()
if(NOT DEFINED GPUPLUG_KERNEL_INSTALL_DIR)
  set(GPUPLUG_KERNEL_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/gpuplug/kernels)
endif()

function(gpuplug_add_plugin name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "SOURCES;LINK")
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "gpuplug_add_plugin(${name}): SOURCES is required")
  endif()
  if(NOT name MATCHES "^[a-z0-9_]+$")
    message(FATAL_ERROR "gpuplug_add_plugin(${name}): the name must be [a-z0-9_]+ (it is the "
                        "selector name and must equal the table's `name`)")
  endif()
  set(target gpuplug-plugin-${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE gpuplug::plugin_sdk ${ARG_LINK})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME gpuplug-${name}
    PREFIX lib
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${GPUPLUG_PLUGIN_BUILD_DIR}
    # No RUNPATH at all: a plugin needs only libc and what it dlopens by name.
    SKIP_BUILD_RPATH ON
    INSTALL_RPATH "")
  # Plugins never depend on the core or Boost: only the C ABI crosses.
  if(NOT GPUPLUG_SANITIZER)
    target_link_options(${target} PRIVATE "-Wl,--no-undefined")
  endif()
  if(GPUPLUG_PLUGIN_EXPORTS_MAP)
    target_link_options(${target} PRIVATE "LINKER:--version-script=${GPUPLUG_PLUGIN_EXPORTS_MAP}")
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${GPUPLUG_PLUGIN_EXPORTS_MAP})
  endif()
  install(TARGETS ${target} LIBRARY DESTINATION ${GPUPLUG_PLUGIN_INSTALL_DIR})
endfunction()
