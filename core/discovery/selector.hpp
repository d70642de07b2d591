// SPDX-License-Identifier: Apache-2.0
// The selection policy (core-private): which discovered plugin a selector picks, and why the
// others were passed over.
#pragma once

#include <gpuplug/log.hpp>
#include <gpuplug/registry.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "layers/layer_catalog.hpp"
#include "discovery/plugin_loader.hpp"

namespace gpuplug::detail {

/// A selection, and the fallback line it wants logged (once per registry) when it passed over a
/// candidate: info (a missing driver or device is the normal case on a CPU-only machine), or a
/// warning when a GPU plugin that discovery found usable failed to create its backend.
struct SelectionOutcome {
  Selection selection;
  std::optional<std::pair<LogLevel, std::string>> fallback;
};

/// Runs `selector` (parse_selector's syntax; "auto" expands to GPUPLUG_BACKEND when set, else to
/// every device of the usable plugins, ranked by class, score and discovery order) over
/// `entries`, making the first backend that works with `options`. Throws Error naming the
/// selector and every refusal when nothing works, or when a required item ('!') cannot be used.
/// With `dry_run`, creates nothing: the first candidate that discovery found usable is chosen
/// (Selection::backend stays null). A backend gets the layers `options` enables from `layers`.
/// Runs without the registry's lock.
SelectionOutcome select_backend(std::string_view selector, std::span<const PluginEntry> entries,
                                const Options& options, const LayerCatalog& layers,
                                bool dry_run = false);

}  // namespace gpuplug::detail
