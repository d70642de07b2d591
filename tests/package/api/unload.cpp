// SPDX-License-Identifier: Apache-2.0
// An engine that loads gpuplug on demand must be able to unload it again. This program does not
// link libgpuplug: it dlopens it (RTLD_NOW | RTLD_LOCAL), calls into it through dlsym, dlcloses
// it, and checks that the library is gone from the process: dlopen(RTLD_NOLOAD) finds nothing
// and /proc/self/maps no longer maps the file. A single exported STB_GNU_UNIQUE symbol (or any
// other reason glibc marks the library NODELETE) makes dlclose a no-op and this test fail.
// (libboost_log and the other libraries libgpuplug needs may stay; only libgpuplug must go.)
//
// It does not log; api.unload_after_logging (unload_after_logging.cpp) covers unloading after
// gpuplug has logged into an application that uses Boost.Log itself.
#include <dlfcn.h>
#include <gpuplug/log.hpp>
#include <gpuplug/version.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

#ifndef GPUPLUG_TEST_LIBRARY
#error "GPUPLUG_TEST_LIBRARY (the path of the installed libgpuplug.so) must be defined"
#endif

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) ++failures;
}

// The mapped files of this process whose path ends in `name`.
std::string mappings_of(std::string_view name) {
  std::ifstream maps("/proc/self/maps");
  std::string line, found;
  while (std::getline(maps, line)) {
    if (line.size() >= name.size() && line.find(name) != std::string::npos) found += line + "\n";
  }
  return found;
}

std::string file_name(std::string_view path) {
  const auto slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// Mangled names (Itanium C++ ABI) of two public functions: the test must reach them without
// linking the library. api.exports lists their demangled forms.
constexpr const char* runtime_version_symbol = "_ZN7gpuplug15runtime_versionEv";
constexpr const char* parse_log_level_symbol =
    "_ZN7gpuplug15parse_log_levelESt17basic_string_viewIcSt11char_traitsIcEE";

}  // namespace

int main() {
  const char* path = GPUPLUG_TEST_LIBRARY;
  const std::string name = file_name(path);
  check(mappings_of(name).empty(), "libgpuplug is not mapped before dlopen (the test does not link it)");

  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::printf("FAILED: dlopen %s: %s\n", path, dlerror());
    return 1;
  }
  check(!mappings_of(name).empty(), "libgpuplug is mapped after dlopen");

  using runtime_version_fn = gpuplug::Version (*)() noexcept;
  auto* runtime_version = reinterpret_cast<runtime_version_fn>(dlsym(lib, runtime_version_symbol));
  check(runtime_version != nullptr, std::string("dlsym gpuplug::runtime_version()"));
  if (runtime_version != nullptr) {
    const gpuplug::Version v = runtime_version();
    check(v == gpuplug::header_version && std::string_view(v.string) == GPUPLUG_VERSION_STRING,
          std::string("runtime_version() is ") + v.string + ", the headers say " +
              GPUPLUG_VERSION_STRING);
  }
  using parse_fn = std::optional<gpuplug::LogLevel> (*)(std::string_view) noexcept;
  auto* parse_log_level = reinterpret_cast<parse_fn>(dlsym(lib, parse_log_level_symbol));
  check(parse_log_level != nullptr, "dlsym gpuplug::parse_log_level(std::string_view)");
  if (parse_log_level != nullptr) {
    check(parse_log_level("debug") == gpuplug::LogLevel::debug && !parse_log_level("loud"),
          "parse_log_level answers through the loaded library");
  }

  check(dlclose(lib) == 0, "dlclose");
  void* again = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  check(again == nullptr, "dlopen(RTLD_NOLOAD) after dlclose finds nothing: the library was unloaded");
  if (again != nullptr) dlclose(again);
  const std::string left = mappings_of(name);
  check(left.empty(), "/proc/self/maps no longer maps " + name + (left.empty() ? "" : ":\n" + left));
  std::printf("%s\n", failures == 0 ? "libgpuplug unloads cleanly" : "libgpuplug stays loaded");
  return failures == 0 ? 0 : 1;
}
