// SPDX-License-Identifier: Apache-2.0
// Environment helpers for the loader tests: the fake plugin folder beside the real host plugin.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "scoped_env.hpp"

namespace gpuplug::test {

inline std::filesystem::path fake_plugin_dir() { return GPUPLUG_TEST_FAKE_PLUGIN_DIR; }
inline std::filesystem::path host_plugin_file() {
  return std::filesystem::path(GPUPLUG_TEST_PLUGIN_DIR) / "libgpuplug-host.so";
}

/// The real host plugin named first, then the fakes: the real "host" wins the name, so the fake
/// calling itself "host" is the duplicate.
inline std::string loader_plugin_path() {
  return host_plugin_file().string() + ":" + fake_plugin_dir().string();
}

/// Global fixture: every loader test sees the fakes and no GPUPLUG_BACKEND from the caller.
struct LoaderEnvironment {
  LoaderEnvironment() {
    ::setenv("GPUPLUG_PLUGIN_PATH", loader_plugin_path().c_str(), 1);
    ::unsetenv("GPUPLUG_BACKEND");
  }
};

}  // namespace gpuplug::test
