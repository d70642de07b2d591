// SPDX-License-Identifier: Apache-2.0
// test_setuid_env: discovers and prints one line per plugin found ("<state> <path>"). Run setuid
// root by tests/scripts/setuid_env.sh, it must ignore GPUPLUG_PLUGIN_PATH (and say so).
#include <gpuplug/gpuplug.hpp>
#include <iostream>

int main() {
  gpuplug::PluginRegistry registry;
  registry.discover();
  for (const auto& p : registry.plugins()) {
    std::cout << gpuplug::to_string(p.state) << " " << p.path.string() << "\n";
  }
  return 0;
}
