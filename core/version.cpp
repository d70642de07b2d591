// SPDX-License-Identifier: Apache-2.0
// runtime_version: the version macros as this library was compiled with them.
#include <gpuplug/version.hpp>

namespace gpuplug {

// Out of line on purpose: an application's call lands here, in whichever libgpuplug the dynamic
// loader picked, while header_version is the application's own compile-time copy. Built from the
// macros rather than by copying header_version: copying would odr-use that inline variable and
// emit it into the library as an exported STB_GNU_UNIQUE object, which makes the library
// impossible to dlclose (core/libgpuplug.map).
Version runtime_version() noexcept {
  return Version{GPUPLUG_VERSION_MAJOR, GPUPLUG_VERSION_MINOR, GPUPLUG_VERSION_PATCH,
                 GPUPLUG_VERSION_STRING};
}

}  // namespace gpuplug
