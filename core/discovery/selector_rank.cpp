// SPDX-License-Identifier: Apache-2.0
// auto's ranking: a device's rank from what its plugin declared, the order of two ranks, and
// the text of a ranked device.
#include "discovery/selector_rank.hpp"

#include <string_view>
#include <tuple>

namespace gpuplug::detail {

namespace {

constexpr std::string_view class_names[] = {"discrete_gpu", "integrated_gpu", "accelerator", "cpu",
                                            "emulator"};

int class_order(const PluginEntry& e, const DeviceInfo& d) {
  switch (d.device_class) {
    case DeviceClass::discrete_gpu: return 0;
    case DeviceClass::integrated_gpu: return 1;
    case DeviceClass::accelerator: return 2;
    case DeviceClass::cpu: return 3;
    case DeviceClass::emulator: return 4;
    case DeviceClass::unknown: break;
  }
  // Any other value (unknown, or a class from a later ABI this core does not know) is unknown.
  return e.info.name == "host" ? 3 : 2;
}

// The plugins of cross-vendor APIs: a device of theirs may be a GPU a vendor's plugin drives too.
constexpr std::string_view portable_plugins[] = {"vulkan"};

bool portable(const std::string& plugin) {
  for (const std::string_view p : portable_plugins)
    if (plugin == p) return true;
  return false;
}

// A UUID as text in one spelling: lower case, without CUDA's "GPU-" prefix.
std::string uuid_key(const std::string& uuid) {
  std::string key = uuid.rfind("GPU-", 0) == 0 ? uuid.substr(4) : uuid;
  for (char& c : key) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return key;
}

bool same_gpu(const DeviceInfo& a, const DeviceInfo& b) {
  if (a.pci && b.pci) return *a.pci == *b.pci;
  return !a.uuid.empty() && uuid_key(a.uuid) == uuid_key(b.uuid);
}

std::tuple<std::uint64_t, std::uint64_t, std::uint32_t> score(const Rank& r) {
  return {r.peak_gflops, r.total_memory, r.compute_units};
}

std::string fate_text(const RankedDevice& r) {
  switch (r.fate) {
    case RankedDevice::Fate::chosen: return "chosen";
    case RankedDevice::Fate::would_be_chosen: return "would be chosen";
    case RankedDevice::Fate::ranked_below: return "ranked below " + r.detail.value_or("");
    case RankedDevice::Fate::refused: break;
  }
  return "refused (" + r.detail.value_or("no reason") + ")";
}

}  // namespace

Rank rank_of(const PluginEntry& e, const DeviceInfo& d, std::size_t discovery) {
  return {class_order(e, d), d.device_class,   {},        d.peak_gflops, d.total_memory,
          d.compute_units,   discovery,        d.ordinal};
}

namespace {

// "other:N" when usable, non-portable `other` drives the GPU `d` is; else "".
std::string route_via(const DeviceInfo& d, const PluginInfo& other) {
  if (portable(other.name) || other.state != PluginState::available) return {};
  for (const DeviceInfo& o : other.devices)
    if (same_gpu(d, o)) return other.name + ":" + std::to_string(o.ordinal);
  return {};
}

}  // namespace

std::string native_route_of(const PluginEntry& e, const DeviceInfo& d,
                            std::span<const PluginEntry> entries) {
  if (!portable(e.info.name)) return {};
  for (const PluginEntry& other : entries)
    if (&other != &e)
      if (std::string route = route_via(d, other.info); !route.empty()) return route;
  return {};
}

std::string native_route_of(const PluginInfo& p, const DeviceInfo& d,
                            std::span<const PluginInfo> plugins) {
  if (!portable(p.name)) return {};
  for (const PluginInfo& other : plugins)
    if (&other != &p)
      if (std::string route = route_via(d, other); !route.empty()) return route;
  return {};
}

bool ranks_before(const Rank& a, const Rank& b) {
  if (a.class_order != b.class_order) return a.class_order < b.class_order;
  if (a.native_route.empty() != b.native_route.empty()) return a.native_route.empty();
  if (score(a) != score(b)) return score(a) > score(b);
  if (a.discovery != b.discovery) return a.discovery < b.discovery;
  return a.ordinal < b.ordinal;
}

std::string to_string(const RankedDevice& r) {
  const Rank& k = r.rank;
  std::string text = std::to_string(r.position) + ". " + r.device + " ";
  const std::string_view ranked_class = class_names[k.class_order];
  text += ranked_class;
  if (to_string(k.declared) != ranked_class) text += " (declared " + to_string(k.declared) + ")";
  if (!k.native_route.empty())
    text += " (the GPU of " + k.native_route + ", whose native plugin ranks first)";
  text += ", score: " + (k.peak_gflops != 0 ? std::to_string(k.peak_gflops) + " GFLOP/s"
                                           : std::string("peak unknown")) +
          ", " + std::to_string(k.total_memory >> 20) + " MiB, " +
          std::to_string(k.compute_units) + " CUs";
  return text + ": " + fate_text(r);
}

}  // namespace gpuplug::detail
