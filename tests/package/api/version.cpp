// SPDX-License-Identifier: Apache-2.0
// The version story, as an application sees it: GPUPLUG_VERSION_MAJOR/MINOR/PATCH are numbers
// the preprocessor can compare, they equal the installed package's version (CMake's
// gpuplug_VERSION_*, passed as GPUPLUG_EXPECTED_*), and runtime_version() reports the library
// actually loaded, which here is the one the headers came with.
#include <gpuplug/version.hpp>

#include <cstdio>
#include <string_view>

// Before the rename these names were abi.h's function-like ABI accessors; used bare in #if they
// were no macro at all, read as 0, and every comparison below was silently wrong.
#if !defined(GPUPLUG_VERSION_MAJOR) || !defined(GPUPLUG_VERSION_MINOR) || !defined(GPUPLUG_VERSION_PATCH)
#error "GPUPLUG_VERSION_MAJOR/MINOR/PATCH are not defined by <gpuplug/version.hpp>"
#endif
#if GPUPLUG_VERSION_MAJOR != GPUPLUG_EXPECTED_MAJOR || GPUPLUG_VERSION_MINOR != GPUPLUG_EXPECTED_MINOR || \
    GPUPLUG_VERSION_PATCH != GPUPLUG_EXPECTED_PATCH
#error "GPUPLUG_VERSION_MAJOR/MINOR/PATCH in #if do not equal the package version find_package found"
#endif
// And as C++ constants.
static_assert(gpuplug::header_version.major == GPUPLUG_VERSION_MAJOR);
static_assert(gpuplug::header_version.minor == GPUPLUG_VERSION_MINOR);
static_assert(gpuplug::header_version.patch == GPUPLUG_VERSION_PATCH);

int main() {
  const gpuplug::Version loaded = gpuplug::runtime_version();
  std::printf("headers %s, library %s\n", gpuplug::header_version.string, loaded.string);
  if (!(loaded == gpuplug::header_version) || std::string_view(loaded.string) != GPUPLUG_VERSION_STRING) {
    std::printf("FAILED: the loaded libgpuplug is not the version of its headers\n");
    return 1;
  }
  return 0;
}
