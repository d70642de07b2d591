// SPDX-License-Identifier: Apache-2.0
// PluginRegistry::inspect_module's work (core-private): the entry, the slot, the C struct read back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <gpuplug/registry.hpp>
#include <span>
#include <string_view>
#include <vector>

#include "discovery/plugin_loader.hpp"

namespace gpuplug::detail {

/// Finds `plugin` among `entries` (the registry's snapshot), loads its library when it was only
/// probed, calls its inspect_module slot and converts the answer. Errors as documented on
/// PluginRegistry::inspect_module.
ModuleInspection inspect_module(const std::vector<PluginEntry>& entries, std::string_view plugin,
                                std::uint32_t ordinal, std::span<const std::byte> image);

/// The C struct as the C++ API reports it: each field read only up to its size (a plugin that
/// forgot the NUL cannot make the core read past it), lists split, a trailing "..." item dropped
/// and reported as `truncated`, "name=value" symbols parsed (a value that is not a 32-bit
/// unsigned decimal leaves the whole text as the name).
ModuleInspection to_module_inspection(const gpuplug_module_inspection_t& raw);

}  // namespace gpuplug::detail
