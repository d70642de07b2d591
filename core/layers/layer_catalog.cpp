// SPDX-License-Identifier: Apache-2.0
// LayerCatalog: checking a layer once when it is added, and the `layers` option.
#include "layers/layer_catalog.hpp"

#include <algorithm>
#include <gpuplug/support/c_string.hpp>
#include <gpuplug/support/edit_distance.hpp>
#include <gpuplug/support/escape.hpp>
#include <gpuplug/support/plugin_name.hpp>
#include <gpuplug/support/text.hpp>
#include <gpuplug/types.hpp>

#include "logging/environment.hpp"
#include "layers/builtin.hpp"
#include "table/plugin_table.hpp"

namespace gpuplug::detail {

namespace {

/// Longest layer name and option key; they end up in messages, file names and JSON.
constexpr std::size_t max_layer_name = 64;
constexpr std::size_t max_option_keys = 64;

/// The smallest gpuplug_layer_v1 this core reads: every field of version 1.
constexpr std::size_t layer_v1_size = sizeof(gpuplug_layer_v1);

std::string checked_name(const char* text, std::string_view what) {
  if (text == nullptr) throw std::invalid_argument(std::string(what) + " is null");
  const std::string name = support::fixed_string(text, max_layer_name + 1);
  if (name.size() > max_layer_name || !support::valid_plugin_name(name)) {
    throw std::invalid_argument(std::string(what) + " '" + support::escape_text(name) + "' is not " +
                                std::string(support::plugin_name_pattern) + " of at most " +
                                std::to_string(max_layer_name) + " bytes");
  }
  return name;
}

std::shared_ptr<LayerEntry> check_layer(const gpuplug_layer_v1& layer) {
  if (layer.struct_size < layer_v1_size)
    throw std::invalid_argument("struct_size " + std::to_string(layer.struct_size) +
                                " is smaller than gpuplug_layer_v1 (" +
                                std::to_string(layer_v1_size) + ")");
  if (layer.layer_version != GPUPLUG_LAYER_VERSION)
    throw std::invalid_argument("layer_version " + std::to_string(layer.layer_version) +
                                ", this core speaks " + std::to_string(GPUPLUG_LAYER_VERSION));
  auto entry = std::make_shared<LayerEntry>();
  entry->name = checked_name(layer.name, "the name");
  entry->summary = support::fixed_string(layer.summary, 256);
  if (layer.create == nullptr) throw std::invalid_argument("create is null");
  if (layer.table == nullptr) throw std::invalid_argument("table is null");
  if (auto why = check_header(*layer.table)) throw std::invalid_argument("table: " + why->message);
  entry->table = copy_table(*layer.table);
  if (entry->table.destroy == nullptr) throw std::invalid_argument("table: destroy is null");
  if (layer.option_keys != nullptr) {
    for (std::size_t i = 0; layer.option_keys[i] != nullptr; ++i) {
      if (i == max_option_keys)
        throw std::invalid_argument("more than " + std::to_string(max_option_keys) +
                                    " option keys (or option_keys has no null end)");
      std::string key = checked_name(layer.option_keys[i], "option key");
      if (key == "layers") throw std::invalid_argument("option key 'layers' is the core's");
      entry->option_keys.push_back(std::move(key));
    }
  }
  entry->layer = layer;
  entry->layer.struct_size = layer_v1_size;
  entry->layer.name = nullptr;  // the checked copies above are what the core uses
  entry->layer.summary = nullptr;
  entry->layer.option_keys = nullptr;
  entry->layer.table = &entry->table;
  return entry;
}

}  // namespace

LayerCatalog::LayerCatalog() {
  for (const gpuplug_layer_v1* layer : builtin_layers()) add(*layer, "built-in");
}

void LayerCatalog::add(const gpuplug_layer_v1& layer, std::string origin,
                       std::shared_ptr<const void> keep_alive) {
  const std::string who =
      "layer " + (layer.name ? support::escape_text(support::fixed_string(layer.name, max_layer_name + 1))
                             : std::string("(null name)"));
  std::shared_ptr<LayerEntry> entry;
  try {
    entry = check_layer(layer);
  } catch (const std::invalid_argument& e) {
    throw Error(Status::invalid_argument, who, "add_layer",
                "breaks layer.h: " + std::string(e.what()));
  }
  if (const auto taken = find(entry->name)) {
    throw Error(Status::invalid_argument, who, "add_layer",
                "the name is taken by the layer from " + taken->origin);
  }
  entry->origin = std::move(origin);
  entry->keep_alive = std::move(keep_alive);
  entries_.push_back(std::move(entry));
}

std::shared_ptr<const LayerEntry> LayerCatalog::find(std::string_view name) const noexcept {
  for (const auto& e : entries_)
    if (e->name == name) return e;
  return nullptr;
}

std::string LayerCatalog::names() const {
  std::vector<std::string> all;
  for (const auto& e : entries_) all.push_back(e->name);
  return all.empty() ? std::string("none") : support::join(all);
}

std::string LayerCatalog::suggestion(std::string_view name) const {
  std::string best;
  std::size_t best_distance = 3;  // at most 2 edits, as selectors and fault specs suggest
  for (const auto& e : entries_) {
    const std::size_t d = support::edit_distance(name, e->name);
    if (d < best_distance) {
      best_distance = d;
      best = e->name;
    }
  }
  return best;
}

std::string complete_unknown_option(const std::string& message, const LayerCatalog& catalog) {
  // The SDK's wording (plugins/common/options.cpp): "unknown option 'KEY' (known options: A, B)".
  static constexpr std::string_view head = "unknown option '";
  static constexpr std::string_view list = "' (known options: ";
  const std::size_t key_at = message.find(head);
  const std::size_t list_at = key_at == std::string::npos ? key_at : message.find(list, key_at);
  const std::size_t end = list_at == std::string::npos ? list_at : message.find(')', list_at);
  if (end == std::string::npos) return message;
  const std::string key = message.substr(key_at + head.size(), list_at - key_at - head.size());
  std::vector<std::string> keys{"layers"};  // the core's own
  for (std::string_view k :
       support::split(std::string_view(message).substr(list_at + list.size(),
                                                        end - list_at - list.size()),
                      ','))
    if (!support::trim(k).empty()) keys.emplace_back(support::trim(k));
  for (const auto& e : catalog.entries())
    keys.insert(keys.end(), e->option_keys.begin(), e->option_keys.end());
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::string best;
  std::size_t best_distance = 3;
  for (const std::string& k : keys) {
    const std::size_t d = support::edit_distance(key, k);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  std::string out = message.substr(0, list_at + list.size()) + support::join(keys) + ")";
  if (!best.empty()) out += "; did you mean " + best + "?";
  return out + message.substr(end + 1);
}

namespace {

/// One source of layer names (the `layers` option or GPUPLUG_LAYERS), each name checked against
/// the catalog. Refuses an empty item, a name given twice within this source and an unknown name
/// (with the known ones and the nearest).
LayerList parse_layer_list(const LayerCatalog& catalog, const std::string& spec,
                           std::string_view origin, std::string_view backend) {
  auto refuse = [&](const std::string& why) {
    return Error(Status::invalid_argument, std::string(backend), "create",
                 std::string(origin) + "'" + support::escape_text(spec) + "': " + why);
  };
  LayerList layers;
  if (support::trim(spec).empty()) return layers;
  for (std::string_view item : support::split(spec, ',')) {
    const std::string name(support::trim(item));
    if (name.empty()) throw refuse("an empty layer name");
    std::shared_ptr<const LayerEntry> layer = catalog.find(name);
    if (layer == nullptr) {
      std::string why = "unknown layer '" + support::escape_text(name) +
                        "' (known layers: " + catalog.names() + ")";
      if (const std::string near = catalog.suggestion(name); !near.empty())
        why += "; did you mean " + near + "?";
      throw refuse(why);
    }
    if (std::find(layers.begin(), layers.end(), layer) != layers.end())
      throw refuse("layer '" + name + "' is named twice");
    layers.push_back(std::move(layer));
  }
  return layers;
}

}  // namespace

LayerList enabled_layers(const LayerCatalog& catalog,
                         const std::map<std::string, std::string>& options,
                         std::string_view backend) {
  const auto option = options.find("layers");
  const std::optional<std::string> env = read_environment("GPUPLUG_LAYERS");
  LayerList layers;
  if (option != options.end()) {
    // An empty `layers=` is the application's "no layer here", whatever the environment says.
    if (support::trim(option->second).empty()) return layers;
    layers = parse_layer_list(catalog, option->second, "layers=", backend);
  }
  if (env) {
    // Both sources name layers: each is enabled once, the option's order first (as the Vulkan
    // loader merges the application's layers with VK_INSTANCE_LAYERS).
    for (auto& layer : parse_layer_list(catalog, *env, "GPUPLUG_LAYERS=", backend))
      if (std::find(layers.begin(), layers.end(), layer) == layers.end())
        layers.push_back(std::move(layer));
  }
  return layers;
}

}  // namespace gpuplug::detail
