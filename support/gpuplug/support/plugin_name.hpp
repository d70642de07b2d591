// SPDX-License-Identifier: Apache-2.0
// Internal: the one rule for a plugin's name ([a-z0-9_]+), shared by the loader and the SDK.
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

}  // namespace gpuplug::support
