# SPDX-License-Identifier: Apache-2.0
# Defines gpuplug::conformance, the library of conformance cases that both test_conformance and
# `gpuplug check` run. Included (once, whoever comes first) by tools/CMakeLists.txt and by
# tests/conformance/CMakeLists.txt, so the tool builds even when GPUPLUG_BUILD_TESTS is OFF.
include_guard(GLOBAL)

set(_conf ${CMAKE_CURRENT_LIST_DIR})
# Shared, so the test and the installed tool load the same code; installed beside libgpuplug.
add_library(gpuplug_conformance SHARED
  ${_conf}/cases.cpp
  ${_conf}/known_failures.cpp
  ${_conf}/checks.cpp
  ${_conf}/helpers.cpp
  ${_conf}/memory_cases.cpp
  ${_conf}/device_cases.cpp
  ${_conf}/module_cases.cpp
  ${_conf}/opcache_cases.cpp
  ${_conf}/concurrency_cases.cpp
  ${_conf}/differential_cases.cpp
  ${_conf}/lifecycle_cases.cpp
  ${_conf}/events_cases.cpp
  ${_conf}/stream_cases.cpp
  ${_conf}/launch_args_cases.cpp
  ${_conf}/peer_cases.cpp
  ${_conf}/pinned_cases.cpp
  ${_conf}/arena_cases.cpp
  ${_conf}/graph_cases.cpp
  ${_conf}/skew_cases.cpp
  ${_conf}/pitched_cases.cpp)
add_library(gpuplug::conformance ALIAS gpuplug_conformance)
set_target_properties(gpuplug_conformance PROPERTIES EXPORT_NAME conformance)
# The case sources' own headers are internal (the build interface only); what a case library
# of a user includes is the public <gpuplug/conformance.hpp> (include/, through gpuplug::core).
target_include_directories(gpuplug_conformance
  PUBLIC $<BUILD_INTERFACE:${_conf}>
  PRIVATE ${PROJECT_SOURCE_DIR}/kernels/common)
# gpuplug::support (hex, file reading) is header-only and internal: used here, never installed.
target_link_libraries(gpuplug_conformance PUBLIC gpuplug::core
  PRIVATE $<BUILD_INTERFACE:gpuplug::support> Threads::Threads ${CMAKE_DL_LIBS})
target_compile_definitions(gpuplug_conformance PRIVATE GPUPLUG_CONFORMANCE_SOURCE_DIR="${_conf}")
set_target_properties(gpuplug_conformance PROPERTIES
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)
# Exported as gpuplug::conformance, for libraries of the user's own cases (gpuplug check --cases).
install(TARGETS gpuplug_conformance EXPORT gpuplugTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/gpuplug/conformance.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpuplug)

# The known-failure list sits at <prefix>/share/gpuplug/conformance in the build tree as in the
# install tree, so the tool finds it relative to its own binary in both.
configure_file(${_conf}/known_failures.txt ${PROJECT_BINARY_DIR}/share/gpuplug/conformance/known_failures.txt COPYONLY)
install(FILES ${_conf}/known_failures.txt DESTINATION ${CMAKE_INSTALL_DATADIR}/gpuplug/conformance)
unset(_conf)
