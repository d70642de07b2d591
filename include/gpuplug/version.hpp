// SPDX-License-Identifier: Apache-2.0
// The library's version: numbers for #if, the header's version as a value, and the version of
// the libgpuplug actually loaded. CMakeLists.txt checks that these numbers equal
// project(VERSION) and stops the configure when they differ, so the two cannot drift.
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

// Numbers, usable in #if: `#if GPUPLUG_VERSION_MAJOR > 0 || GPUPLUG_VERSION_MINOR >= 2`.
// (The plugin ABI's version is another number: GPUPLUG_ABI_VERSION_MAJOR/MINOR in abi.h.)
#define GPUPLUG_VERSION_MAJOR 0
#define GPUPLUG_VERSION_MINOR 1
#define GPUPLUG_VERSION_PATCH 0
#define GPUPLUG_VERSION_STRING "0.1.0"

GPUPLUG_API_BEGIN
namespace gpuplug {

/// A library version. While the major version is 0, a minor version may break the API and the
/// ABI: only the same major.minor is compatible (the CMake package says so too).
struct Version {
  unsigned major = 0;
  unsigned minor = 0;
  unsigned patch = 0;
  const char* string = "";  // "0.1.0"; static storage

  friend constexpr bool operator==(const Version& a, const Version& b) noexcept {
    return a.major == b.major && a.minor == b.minor && a.patch == b.patch;
  }
};

inline constexpr const char* version_string = GPUPLUG_VERSION_STRING;

/// The version of the headers this translation unit was compiled with.
inline constexpr Version header_version{GPUPLUG_VERSION_MAJOR, GPUPLUG_VERSION_MINOR,
                                        GPUPLUG_VERSION_PATCH, GPUPLUG_VERSION_STRING};

/// The version of the libgpuplug loaded in this process, compiled into the library (not inline),
/// so that it differs from header_version when an application built against one version runs
/// with another (an old libgpuplug.so.0 earlier on the library path, say).
Version runtime_version() noexcept;

}  // namespace gpuplug
GPUPLUG_API_END
