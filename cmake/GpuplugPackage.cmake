# SPDX-License-Identifier: Apache-2.0
# The installed package for plugin authors and applications: public headers (the plugin SDK
# header among them), the exported targets gpuplug::core and gpuplug::plugin_sdk, the CMake
# package (find_package(gpuplug CONFIG) with gpuplug_add_plugin()) and gpuplug.pc.
# Included once, at the end of the top-level CMakeLists.txt, after every target exists.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

set(GPUPLUG_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gpuplug)

# Public headers, listed (not globbed) so that a new header is a conscious API decision; the
# same list drives tests/unit/headers (each compiled on its own).
set(GPUPLUG_PUBLIC_HEADERS
  abi.h backend.hpp config.hpp gpuplug.hpp kernel_args.h log.hpp op_cache.hpp registry.hpp teardown.hpp
  table_backend.hpp types.hpp version.hpp)
list(TRANSFORM GPUPLUG_PUBLIC_HEADERS PREPEND ${PROJECT_SOURCE_DIR}/include/gpuplug/
  OUTPUT_VARIABLE _gpuplug_headers)
install(FILES ${_gpuplug_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpuplug)
# The SDK's public headers: plugin_sdk.hpp and the two it includes by quoted name (so they sit
# beside it); they include only <gpuplug/abi.h> and the standard library, never support/.
set(GPUPLUG_SDK_HEADERS plugin_sdk.hpp failure.hpp streams.hpp)
list(TRANSFORM GPUPLUG_SDK_HEADERS PREPEND ${PROJECT_SOURCE_DIR}/plugins/common/
  OUTPUT_VARIABLE _gpuplug_sdk_headers)
install(FILES ${_gpuplug_sdk_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpuplug)

# gpuplug::core and gpuplug::plugin_sdk (core/ and plugins/common/ add them to gpuplugTargets).
install(EXPORT gpuplugTargets NAMESPACE gpuplug:: FILE gpuplugTargets.cmake
  DESTINATION ${GPUPLUG_CMAKE_INSTALL_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gpuplugConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/gpuplugConfig.cmake
  INSTALL_DESTINATION ${GPUPLUG_CMAKE_INSTALL_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR GPUPLUG_PLUGIN_INSTALL_DIR
            GPUPLUG_KERNEL_INSTALL_DIR GPUPLUG_CMAKE_INSTALL_DIR)
# Which requests this version satisfies. From 1.0 on, the same major version is compatible (the
# C++ API and the SDK only grow within a major version). Before 1.0 a minor version may break
# them (semver's rule for 0.y.z), so 0.1.x satisfies find_package(gpuplug 0.1) and nothing older
# or newer: find_package(gpuplug 0.0.5) must not accept 0.1.0. tests/package/api checks both.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_gpuplug_compatibility SameMinorVersion)
else()
  set(_gpuplug_compatibility SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/gpuplugConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${_gpuplug_compatibility})
unset(_gpuplug_compatibility)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/gpuplugConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/gpuplugConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/GpuplugPlugin.cmake
  ${PROJECT_SOURCE_DIR}/plugins/common/plugin_exports.map
  DESTINATION ${GPUPLUG_CMAKE_INSTALL_DIR})

# pkg-config, for applications outside CMake: Cflags -std=c++20 -I${includedir} (the headers
# need C++20 and say so), Libs -lgpuplug. The prefix
# is found from the .pc file's own place, so `cmake --install --prefix <any>` stays correct.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(GPUPLUG_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _gpuplug_up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  set(GPUPLUG_PC_PREFIX "\${pcfiledir}/${_gpuplug_up}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/gpuplug.pc.in ${PROJECT_BINARY_DIR}/gpuplug.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gpuplug.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
unset(_gpuplug_headers)
unset(_gpuplug_sdk_headers)
