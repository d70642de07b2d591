// SPDX-License-Identifier: Apache-2.0
// Two deterministic ways to make gpuplug log a warning from an application: the public log()
// and a real path (discover() with a relative GPUPLUG_PLUGIN_PATH element, which it ignores
// with a warning from the "registry" channel).
#pragma once

#include <cstdlib>
#include <gpuplug/gpuplug.hpp>

namespace logging_test {

/// The text of the registry's warning for relative_element.
constexpr const char* relative_element = "relative-plugin-dir";
constexpr const char* registry_warning =
    "registry: ignoring relative GPUPLUG_PLUGIN_PATH element 'relative-plugin-dir'";

/// Runs discover() with a relative GPUPLUG_PLUGIN_PATH element: one warning from "registry".
inline void discover_with_a_relative_path_element() {
  ::setenv("GPUPLUG_PLUGIN_PATH", relative_element, 1);
  gpuplug::PluginRegistry registry;
  registry.discover();
  ::unsetenv("GPUPLUG_PLUGIN_PATH");
}

}  // namespace logging_test
