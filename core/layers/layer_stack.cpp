// SPDX-License-Identifier: Apache-2.0
// LayerStack: building the levels of a backend's layers, the forwarders for the slots a layer
// leaves null, and the options each level sees.
#include "layers/layer_stack.hpp"

#include <algorithm>
#include <cctype>
#include <gpuplug/log.hpp>
#include <gpuplug/support/c_string.hpp>
#include <gpuplug/support/text.hpp>

#include "logging/environment.hpp"
#include "layers/slots.hpp"

namespace gpuplug::detail {

namespace {

/// Calls the level below with the arguments as given: what a slot the layer leaves null does.
/// Reads the level below from the gpuplug_layer_next_t the layer's instance begins with.
template <auto Slot>
struct Forward;
template <class R, class... A, R (*gpuplug_plugin_v1::*Slot)(gpuplug_instance_t, A...)>
struct Forward<Slot> {
  static R call(gpuplug_instance_t inst, A... args) {
    const auto* next = reinterpret_cast<const gpuplug_layer_next_t*>(inst);
    return (next->table->*Slot)(next->instance, args...);
  }
};

std::string upper(std::string_view key) {
  std::string out(key);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

}  // namespace

gpuplug_plugin_v1 stack_table(const gpuplug_plugin_v1& layer, const gpuplug_plugin_v1& below) noexcept {
  // Identity and plugin-level slots (probe, describe_device, create, inspect_module) stay the
  // plugin's; only the instance slots are layered.
  gpuplug_plugin_v1 t = below;
  t.destroy = layer.destroy;
#define GPUPLUG_STACK_SLOT(slot)                                               \
  t.slot = below.slot == nullptr  ? nullptr                                    \
           : layer.slot != nullptr ? layer.slot                                \
                                   : &Forward<&gpuplug_plugin_v1::slot>::call;
  GPUPLUG_LAYERED_SLOTS(GPUPLUG_STACK_SLOT)
#undef GPUPLUG_STACK_SLOT
  return t;
}

SplitOptions split_options(const LayerCatalog& catalog, const LayerList& layers,
                           const Options& options, std::string_view backend) {
  SplitOptions out;
  out.plugin = options;
  out.plugin.erase("layers");
  for (const auto& layer : layers) {
    Options own;
    for (const std::string& key : layer->option_keys) {
      if (auto it = options.find(key); it != options.end()) {
        own.insert(*it);
      } else if (auto env = read_environment(("GPUPLUG_" + upper(key)).c_str())) {
        own.emplace(key, *env);
      }
    }
    out.layer_options.push_back(std::move(own));
  }
  for (const auto& entry : catalog.entries()) {
    const bool enabled = std::find(layers.begin(), layers.end(), entry) != layers.end();
    for (const std::string& key : entry->option_keys) {
      if (out.plugin.erase(key) != 0 && !enabled) {
        log(LogLevel::warning, backend,
            "option '" + key + "' is for layer '" + entry->name +
                "', which this backend does not enable: ignored");
      }
    }
  }
  return out;
}

LayerStack::LayerStack(const LayerList& layers,
                       std::span<const Options> layer_options, const gpuplug_plugin_v1& plugin,
                       gpuplug_instance_t instance, const gpuplug_layer_services_t& services,
                       std::string_view plugin_name, std::uint32_t ordinal,
                       std::string_view backend) {
  auto bottom = std::make_unique<Level>();
  bottom->table = plugin;
  bottom->instance = instance;
  levels_.push_back(std::move(bottom));
  const std::string plugin_c(plugin_name);
  for (std::size_t i = layers.size(); i-- > 0;) {
    const LayerEntry& layer = *layers[i];
    const Level& below = *levels_.back();
    const gpuplug_layer_next_t next{&below.table, below.instance};
    std::vector<gpuplug_option_t> opts;
    for (const auto& [key, value] : layer_options[i]) opts.push_back({key.c_str(), value.c_str()});
    auto level = std::make_unique<Level>();
    level->layer = layers[i];
    level->table = stack_table(layer.table, below.table);
    char error[1024] = {};
    const gpuplug_status_t st =
        layer.layer.create(&next, plugin_c.c_str(), ordinal, opts.data(),
                           static_cast<std::uint32_t>(opts.size()), &services, &level->instance,
                           error, sizeof error);
    if (st != GPUPLUG_STATUS_SUCCESS || level->instance == nullptr) {
      destroy_layers();
      std::string why = support::fixed_string(error, sizeof error);
      if (why.empty()) why = "the layer gave no reason";
      throw Error(st != GPUPLUG_STATUS_SUCCESS ? static_cast<Status>(st) : Status::internal,
                  std::string(backend), "create", "layer '" + layer.name + "': " + why);
    }
    levels_.push_back(std::move(level));
  }
}

LayerStack::~LayerStack() { destroy_layers(); }

void LayerStack::destroy_layers() noexcept {
  while (levels_.size() > 1) {
    const Level& top = *levels_.back();
    top.table.destroy(top.instance);
    levels_.pop_back();
  }
}

gpuplug_instance_t LayerStack::builtin_instance(const gpuplug_layer_v1& layer) const noexcept {
  for (const auto& level : levels_)
    if (level->layer != nullptr && level->layer->origin == "built-in" &&
        level->layer->layer.create == layer.create)
      return level->instance;
  return nullptr;
}

std::string LayerStack::names() const {
  std::vector<std::string> names;
  for (auto it = levels_.rbegin(); it != levels_.rend(); ++it)
    if ((*it)->layer != nullptr) names.push_back((*it)->layer->name);
  return support::join(names);
}

}  // namespace gpuplug::detail
