// SPDX-License-Identifier: Apache-2.0
// LayerStack (core-private): the enabled layers of one backend, stacked over its plugin instance.
#pragma once

#include <gpuplug/layer.h>

#include <cstdint>
#include <gpuplug/types.hpp>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "layers/layer_catalog.hpp"

namespace gpuplug::detail {

/// The options of one backend split between the core's layers and the plugin.
struct SplitOptions {
  Options plugin;                      // without "layers" and every catalog layer's keys
  std::vector<Options> layer_options;  // per enabled layer, its own keys (options, else GPUPLUG_<KEY>)
};

/// Takes "layers" and the catalog layers' keys out of `options`. A key of a layer that is not
/// enabled is dropped with a warning on `backend`'s channel: an application may keep
/// trace_file set and enable the layer only when it wants a trace.
SplitOptions split_options(const LayerCatalog& catalog, const LayerList& layers,
                           const Options& options, std::string_view backend);

/// The levels above one plugin instance. Each level's table is the layer's, with the slots it
/// leaves null filled by forwarders to the level below, and the slots the level below lacks left
/// null (so the core's defaults apply, and the layer never sees those calls). Tables live at
/// fixed addresses: the level above holds a pointer to the one below.
/// Thread-safety: build and destroy are the backend's constructor and destructor; top() is
/// read-only after build.
class LayerStack {
 public:
  /// Creates `layers` over (`plugin`, `instance`), the last one first, so that layers[0] is on
  /// top. On a layer's failure destroys the layers already made (not the plugin instance) and
  /// throws Error(status, backend, "create", "layer '<name>': <why>").
  LayerStack(const LayerList& layers, std::span<const Options> layer_options,
             const gpuplug_plugin_v1& plugin, gpuplug_instance_t instance,
             const gpuplug_layer_services_t& services, std::string_view plugin_name,
             std::uint32_t ordinal, std::string_view backend);
  /// Destroys the layers, top first; the plugin instance is the caller's.
  ~LayerStack();
  LayerStack(const LayerStack&) = delete;
  LayerStack& operator=(const LayerStack&) = delete;

  const gpuplug_plugin_v1& top_table() const noexcept { return levels_.back()->table; }
  gpuplug_instance_t top_instance() const noexcept { return levels_.back()->instance; }
  /// "validate, trace": the enabled layers, top first.
  std::string names() const;
  /// The instance of the level the built-in layer `layer` made (the same create slot), or null
  /// when it is not enabled: for the core's calls into a built-in layer of its own.
  gpuplug_instance_t builtin_instance(const gpuplug_layer_v1& layer) const noexcept;

 private:
  struct Level {
    gpuplug_plugin_v1 table{};
    gpuplug_instance_t instance = nullptr;
    std::shared_ptr<const LayerEntry> layer;  // null for the plugin's level
  };
  void destroy_layers() noexcept;

  std::vector<std::unique_ptr<Level>> levels_;  // [0] is the plugin; back() the top layer
};

/// The level `table` would get above `below` for the layer table `layer` (see LayerStack).
gpuplug_plugin_v1 stack_table(const gpuplug_plugin_v1& layer, const gpuplug_plugin_v1& below) noexcept;

}  // namespace gpuplug::detail
