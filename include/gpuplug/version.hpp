// SPDX-License-Identifier: Apache-2.0
// The library's version; CMakeLists.txt's project(VERSION) must match.
#pragma once

#define GPUPLUG_VERSION_STRING "0.1.0"

namespace gpuplug {
inline constexpr const char* version_string = GPUPLUG_VERSION_STRING;
}  // namespace gpuplug
