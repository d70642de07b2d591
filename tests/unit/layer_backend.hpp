// SPDX-License-Identifier: Apache-2.0
// The backend the layer tests (test_trace, test_faults, test_validate) run on: host, or the
// selector GPUPLUG_TEST_LAYER_BACKEND names (CTest runs them again on the fake HIP runtime and
// the fake CUDA driver), and the kernel modules of its plugin.
#pragma once

#include <boost/test/unit_test.hpp>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace gpuplug::test {

/// "host!", or GPUPLUG_TEST_LAYER_BACKEND (e.g. "cuda:0!").
inline std::string layer_selector() {
  const char* env = std::getenv("GPUPLUG_TEST_LAYER_BACKEND");
  return env != nullptr && *env != '\0' ? env : "host!";
}

/// The plugin of layer_selector(): "host", "cuda", "hip".
inline std::string layer_plugin() {
  const std::string s = layer_selector();
  return s.substr(0, s.find_first_of(":!"));
}

/// The name of the backend layer_selector() creates: "host:0", "cuda:0".
inline std::string layer_backend_name() {
  std::string s = layer_selector();
  if (!s.empty() && s.back() == '!') s.pop_back();
  return s.find(':') == std::string::npos ? s + ":0" : s;
}

/// The file of kernel module `module` (by stem: axpy.so, axpy.fatbin, ...) in the build's
/// kernel folder of layer_plugin().
inline std::filesystem::path layer_module_file(const std::string& module) {
  const std::filesystem::path dir = std::filesystem::path(GPUPLUG_TEST_KERNEL_DIR) / layer_plugin();
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().stem() == module) return entry.path();
  }
  BOOST_FAIL("no kernel module '" << module << "' in " << dir);
  return {};
}

/// layer_module_file(module)'s bytes.
inline std::vector<std::byte> layer_module_bytes(const std::string& module) {
  std::ifstream in(layer_module_file(module), std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>()};
  const auto* first = reinterpret_cast<const std::byte*>(bytes.data());
  return {first, first + bytes.size()};
}

}  // namespace gpuplug::test
