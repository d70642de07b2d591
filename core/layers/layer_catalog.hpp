// SPDX-License-Identifier: Apache-2.0
// LayerCatalog (core-private): the layers a registry can enable by name, each checked once.
#pragma once

#include <gpuplug/layer.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuplug::detail {

/// One layer as the core uses it: copies of what the layer published, read within its sizes.
struct LayerEntry {
  std::string name;
  std::string summary;
  std::string origin;  // "built-in", or the file it came from
  std::vector<std::string> option_keys;
  gpuplug_layer_v1 layer{};  // `table` points at `table` below
  gpuplug_plugin_v1 table{};  // copy_table of the layer's table: slots past its size read null
  std::shared_ptr<const void> keep_alive;  // the library a file layer lives in
};

/// The layers one registry knows: the built-in ones (validate, trace, faults) and those the
/// application added. A value type: the registry copies it into the snapshot a selection runs on.
class LayerCatalog {
 public:
  /// The built-in layers.
  LayerCatalog();

  /// Checks `layer` and adds it. Throws Error(invalid_argument, "layer <name>", "add_layer", why)
  /// for a layer that breaks layer.h (version, sizes, name, a null create, table or destroy, an
  /// option key that is not [a-z0-9_]+) or whose name is taken.
  void add(const gpuplug_layer_v1& layer, std::string origin,
           std::shared_ptr<const void> keep_alive = {});

  std::shared_ptr<const LayerEntry> find(std::string_view name) const noexcept;
  const std::vector<std::shared_ptr<const LayerEntry>>& entries() const noexcept { return entries_; }
  /// "validate, trace, faults": for messages.
  std::string names() const;
  /// The layer name nearest `name` (at most 2 edits), for "did you mean ...?"; "" when none is.
  std::string suggestion(std::string_view name) const;

 private:
  std::vector<std::shared_ptr<const LayerEntry>> entries_;
};

/// `message` (a plugin's refusal of create) with its list of known options completed when it is
/// the SDK's "unknown option 'KEY' (known options: ...)": the plugin's keys, the core's `layers`
/// and every option key of the catalog's layers, sorted, then "; did you mean ...?" for the key
/// nearest KEY (at most 2 edits). Any other message is returned as it is.
std::string complete_unknown_option(const std::string& message, const LayerCatalog& catalog);

/// The layers a backend enables (top first; a backend keeps them, and a file layer's library,
/// alive): the names of the `layers` option, then those of GPUPLUG_LAYERS not already named, each
/// once. A `layers` option present but empty enables none, whatever GPUPLUG_LAYERS says. Throws
/// Error(invalid_argument, backend, "create", why) naming the source and the item for an empty
/// item, a name repeated within one source, or a name the catalog does not have (listing those it
/// has, with the nearest as "did you mean ...?").
using LayerList = std::vector<std::shared_ptr<const LayerEntry>>;

LayerList enabled_layers(const LayerCatalog& catalog,
                                              const std::map<std::string, std::string>& options,
                                              std::string_view backend);

}  // namespace gpuplug::detail
