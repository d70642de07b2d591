// SPDX-License-Identifier: Apache-2.0
// `gpuplug list --explain SELECTOR`: a dry run of a selection.
#pragma once

#include <gpuplug/registry.hpp>
#include <string_view>

/// Prints what `selector` would choose from what `registry` discovered, creating no backend
/// (PluginRegistry::dry_run): auto's ranking, one line per candidate device with its rank, class,
/// score and fate, then every plugin passed over and why. Returns 0 when something would be
/// chosen, 1 when nothing would (the error is printed on stderr).
int explain_selection(const gpuplug::PluginRegistry& registry, std::string_view selector);
