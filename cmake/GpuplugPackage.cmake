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
  abi.h backend.hpp config.hpp gpuplug.hpp host_kernel.hpp kernel_args.h layer.h log.hpp memory.hpp native.hpp op_cache.hpp peer.hpp
  registry.hpp teardown.hpp
  table_backend.hpp types.hpp version.hpp vulkan_handles.h)
if(GPUPLUG_BUILD_DLPACK)  # it needs DLPack 1.x: only builds with DLPack install it
  list(APPEND GPUPLUG_PUBLIC_HEADERS dlpack.hpp)
  # The DLPack header this gpuplug was built with, which <gpuplug/dlpack.hpp> then includes, so
  # that an application needs no DLPack of its own (Debian 12's is 0.6). Apache-2.0, as gpuplug.
  install(FILES ${GPUPLUG_DLPACK_HEADER} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpuplug/third_party
    RENAME dlpack.h)
endif()
list(TRANSFORM GPUPLUG_PUBLIC_HEADERS PREPEND ${PROJECT_SOURCE_DIR}/include/gpuplug/
  OUTPUT_VARIABLE _gpuplug_headers)
install(FILES ${_gpuplug_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpuplug)
# The SDK's public headers (GPUPLUG_SDK_HEADERS, listed in plugins/common/CMakeLists.txt).
list(TRANSFORM GPUPLUG_SDK_HEADERS PREPEND ${PROJECT_SOURCE_DIR}/plugins/common/
  OUTPUT_VARIABLE _gpuplug_sdk_headers)
install(FILES ${_gpuplug_sdk_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpuplug)
# The E4M3 conversions every vendor's kernels must match bit for bit, as <gpuplug/e4m3.h> (C and
# C++, host and CUDA/HIP device code; no dependency beyond <stdint.h> and <string.h>).
install(FILES ${PROJECT_SOURCE_DIR}/kernels/common/e4m3.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpuplug)
# The reference material of the author's kit: the template plugin to copy (it builds against
# this installation only) and the author's documents, which link each other by relative path.
install(FILES
  ${PROJECT_SOURCE_DIR}/examples/plugin_template/CMakeLists.txt
  ${PROJECT_SOURCE_DIR}/examples/plugin_template/example_plugin.cpp
  DESTINATION ${CMAKE_INSTALL_DATADIR}/gpuplug/examples/plugin_template)
# An application's own conformance cases and kernel module "scale" (docs/test-matrix.md, "Your own
# cases"), to copy the same way: it builds against this installation only.
install(FILES
  ${PROJECT_SOURCE_DIR}/examples/conformance_cases/CMakeLists.txt
  ${PROJECT_SOURCE_DIR}/examples/conformance_cases/cases.cpp
  ${PROJECT_SOURCE_DIR}/examples/conformance_cases/scale_host.cpp
  ${PROJECT_SOURCE_DIR}/examples/conformance_cases/scale.cu
  DESTINATION ${CMAKE_INSTALL_DATADIR}/gpuplug/examples/conformance_cases)
# The documents, in the "docs" component (`cmake --install <build> --component docs` installs
# them alone): every page of docs/ and the pictures they show, with README.md and CHANGELOG.md,
# in <docdir>. The pages link each other by relative path and show images/<name>.png, which hold
# there too; the README's docs/<page> links resolve through <docdir>/docs, a link to <docdir>
# itself. Listed, not globbed: the test docs.installed fails when a page of docs/ is missing here.
set(_gpuplug_docs architecture.md conformance.md device-check.md fuzzing.md gemm-pipeline.md
  graphs.md interop.md kernels.md layers.md lints.md logging.md memory.md opcache.md options.md
  PERFORMANCE.md plugin-authors.md porting-from-the-seed.md python.md quickstart.md test-matrix.md)
list(TRANSFORM _gpuplug_docs PREPEND ${PROJECT_SOURCE_DIR}/docs/)
install(FILES ${_gpuplug_docs} ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT docs)
set(_gpuplug_doc_images memory-page.png test-matrix.png trace-chrome-tracing.png)
list(TRANSFORM _gpuplug_doc_images PREPEND ${PROJECT_SOURCE_DIR}/docs/images/)
install(FILES ${_gpuplug_doc_images} DESTINATION ${CMAKE_INSTALL_DOCDIR}/images COMPONENT docs)
install(CODE "file(CREATE_LINK . \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DOCDIR}/docs\" SYMBOLIC)"
  COMPONENT docs)
unset(_gpuplug_docs)
unset(_gpuplug_doc_images)

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
  ${PROJECT_SOURCE_DIR}/cmake/GpuplugKernel.cmake
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
