# SPDX-License-Identifier: Apache-2.0
# gpuplug_add_plugin(<name> SOURCES <src>... [LINK <target>...]): builds libgpuplug-<name>.so as a
# MODULE library with hidden visibility, linked to the plugin SDK, placed in the plugin folder
# of the build tree and installed to <libdir>/gpuplug/plugins.
include_guard(GLOBAL)

function(gpuplug_add_plugin name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "SOURCES;LINK")
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "gpuplug_add_plugin(${name}): SOURCES is required")
  endif()
  set(target gpuplug-plugin-${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE gpuplug::plugin_sdk ${ARG_LINK})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME gpuplug-${name}
    PREFIX lib
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${GPUPLUG_PLUGIN_BUILD_DIR})
  # Plugins never depend on the core or Boost: only the C ABI crosses.
  if(NOT GPUPLUG_SANITIZER)
    target_link_options(${target} PRIVATE "-Wl,--no-undefined")
  endif()
  install(TARGETS ${target} LIBRARY DESTINATION ${GPUPLUG_PLUGIN_INSTALL_DIR})
endfunction()
