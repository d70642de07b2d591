# SPDX-License-Identifier: Apache-2.0
# Resolves GPUPLUG_WITH_DLPACK (AUTO/ON/OFF) into GPUPLUG_BUILD_DLPACK: DLPack export and import
# (<gpuplug/dlpack.hpp>, core/dlpack*.cpp and their tests) need the DLPack 1.0 header.
include_guard(GLOBAL)

set(GPUPLUG_WITH_DLPACK AUTO CACHE STRING "Build DLPack export and import (AUTO/ON/OFF)")
set_property(CACHE GPUPLUG_WITH_DLPACK PROPERTY STRINGS AUTO ON OFF)

# The header, from Debian's libdlpack-dev: scripts/lib/common.sh unpacks Debian 13's 1.0 package
# into build/deps/dlpack, which the presets put on CMAKE_PREFIX_PATH. No version is asked of
# find_package: that package's dlpackConfigVersion.cmake says 0.6 (a packaging slip), so the
# version is read from the header instead, whose DLPACK_MAJOR_VERSION is what the ABI follows.
set(_why "")
string(TOUPPER "${GPUPLUG_WITH_DLPACK}" _mode)
if(NOT _mode STREQUAL "OFF")
  find_package(dlpack CONFIG QUIET)
  if(NOT dlpack_FOUND)
    set(_why "no dlpackConfig.cmake on CMAKE_PREFIX_PATH (scripts/test installs it into build/deps/dlpack)")
  else()
    get_target_property(_dlpack_include dlpack::dlpack INTERFACE_INCLUDE_DIRECTORIES)
    set(_dlpack_header "${_dlpack_include}/dlpack/dlpack.h")
    set(GPUPLUG_DLPACK_VERSION "")
    if(EXISTS "${_dlpack_header}")
      file(STRINGS "${_dlpack_header}" _dlpack_lines REGEX "^#define DLPACK_(MAJOR|MINOR)_VERSION ")
      string(REGEX MATCH "MAJOR_VERSION ([0-9]+)" _m "${_dlpack_lines}")
      set(_major "${CMAKE_MATCH_1}")
      string(REGEX MATCH "MINOR_VERSION ([0-9]+)" _m "${_dlpack_lines}")
      set(GPUPLUG_DLPACK_VERSION "${_major}.${CMAKE_MATCH_1}")
    endif()
    if(GPUPLUG_DLPACK_VERSION STREQUAL "")
      set(_why "${_dlpack_header} has no DLPACK_MAJOR_VERSION")
    elseif(NOT _major EQUAL 1)
      set(_why "${_dlpack_header} is DLPack ${GPUPLUG_DLPACK_VERSION}; DLManagedTensorVersioned needs 1.x")
    endif()
  endif()
endif()

if(_mode STREQUAL "OFF")
  message(STATUS "gpuplug: DLPack: OFF (GPUPLUG_WITH_DLPACK=OFF)")
  set(GPUPLUG_BUILD_DLPACK OFF)
elseif(_why STREQUAL "")
  message(STATUS "gpuplug: DLPack: ON (${_dlpack_header}, DLPack ${GPUPLUG_DLPACK_VERSION})")
  set(GPUPLUG_BUILD_DLPACK ON)
  set(GPUPLUG_DLPACK_HEADER "${_dlpack_header}")  # installed as <gpuplug/third_party/dlpack.h>
elseif(_mode STREQUAL "ON")
  message(FATAL_ERROR "gpuplug: GPUPLUG_WITH_DLPACK=ON but ${_why}")
else()
  message(STATUS "gpuplug: DLPack: skipped, with its tests (${_why})")
  set(GPUPLUG_BUILD_DLPACK OFF)
endif()
unset(_why)
unset(_mode)
unset(_major)
unset(_m)
unset(_dlpack_lines)
