// SPDX-License-Identifier: Apache-2.0
// Internal: the one rule for a plugin's name ([a-z0-9_]+) and its file name (libgpuplug-<name>.so),
// shared by the loader, the registry, the SDK and the tool's lints.
#pragma once

#include <algorithm>
#include <string_view>

namespace gpuplug::support {

/// The pattern, for messages that say what was expected.
inline constexpr std::string_view plugin_name_pattern = "[a-z0-9_]+";

/// True for a non-empty name of lower-case letters, digits and '_': safe in file names,
/// selectors, log channels and JSON without escaping.
constexpr bool valid_plugin_name(std::string_view name) noexcept {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

/// A plugin file is named libgpuplug-<name>.so.
inline constexpr std::string_view plugin_file_prefix = "libgpuplug-";
inline constexpr std::string_view plugin_file_suffix = ".so";

/// The <name> of a file name libgpuplug-<name>.so with a non-empty <name> (not checked against
/// valid_plugin_name: a file may be misnamed), or "" for any other file name.
constexpr std::string_view plugin_name_of_file(std::string_view file_name) noexcept {
  if (file_name.size() <= plugin_file_prefix.size() + plugin_file_suffix.size() ||
      !file_name.starts_with(plugin_file_prefix) || !file_name.ends_with(plugin_file_suffix))
    return {};
  return file_name.substr(plugin_file_prefix.size(),
                          file_name.size() - plugin_file_prefix.size() - plugin_file_suffix.size());
}

}  // namespace gpuplug::support
