// SPDX-License-Identifier: Apache-2.0
// auto's ranking (core-private): the keys a device is ranked by, held as data, and the one line
// of Selection::ranking each ranked device becomes where a Selection is handed out.
#pragma once

#include <gpuplug/types.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "discovery/plugin_loader.hpp"

namespace gpuplug::detail {

/// The keys auto sorts a device by, in the order they are compared: its class (0 is tried first:
/// discrete_gpu, integrated_gpu, accelerator, cpu, emulator), then whether it is a second route
/// to a GPU a vendor's own plugin also drives (a cross-vendor API's device, e.g. vulkan:0 that is
/// cuda:0's GPU: the native plugin first), then its score, larger first
/// (peak_gflops, 0 when the plugin does not know it; then total_memory; then compute_units),
/// then its plugin's place in discovery order, then its ordinal. Plain numbers the plugin
/// declared, no weighting, so that the order is easy to predict and to explain.
struct Rank {
  int class_order = 0;
  DeviceClass declared = DeviceClass::unknown;  // what the plugin said (class_order may differ)
  // "cuda:0" when this device is that device's GPU reached through a cross-vendor API (ranked
  // after it); empty otherwise.
  std::string native_route;
  std::uint64_t peak_gflops = 0;
  std::uint64_t total_memory = 0;
  std::uint32_t compute_units = 0;
  std::size_t discovery = 0;
  std::uint32_t ordinal = 0;
};

/// `d`'s rank; `discovery` is the place of `e` (its plugin) in discovery order. A class auto does
/// not know (unknown: a plugin older than ABI 1.1, or a class of a later ABI) ranks as an
/// accelerator, below any plugin that declares a GPU; the plugin named "host" ranks as the CPU
/// whatever it declares, so that auto tries every GPU plugin before the host backend.
Rank rank_of(const PluginEntry& e, const DeviceInfo& d, std::size_t discovery);

/// When `e` is a plugin for a cross-vendor API (vulkan) and a usable plugin of `entries` that is
/// not one drives the same GPU as `d` (equal PCI address, or equal UUID), that device
/// ("cuda:0"); else "". The device a vendor's own plugin drives is the one auto should try: the
/// native runtime reaches the whole GPU (its libraries, its graphs), the portable API less.
std::string native_route_of(const PluginEntry& e, const DeviceInfo& d,
                            std::span<const PluginEntry> entries);
/// The same for plugin `p`, one of `plugins` (what PluginRegistry::plugins() lists).
std::string native_route_of(const PluginInfo& p, const DeviceInfo& d,
                            std::span<const PluginInfo> plugins);

/// Whether `a` is tried before `b` (the comparison of the keys above; a strict weak order).
bool ranks_before(const Rank& a, const Rank& b);

/// One device of auto's ranking and what became of it, as data until it is printed.
struct RankedDevice {
  enum class Fate {
    chosen,           // it made the backend
    would_be_chosen,  // a dry run: discovery found it usable
    refused,          // `detail` is its last refusal (nullopt when it gave none)
    ranked_below,     // a better device was chosen: `detail` names it
  };
  std::size_t position = 0;  // 1 for the best of one auto's ranking
  std::string device;        // "cuda:0"
  Rank rank;
  Fate fate = Fate::refused;
  std::optional<std::string> detail;
};

/// The line Selection::ranking shows for `r`: "1. cuda:0 discrete_gpu, score: 1000 GFLOP/s,
/// 8192 MiB, 16 CUs: chosen" (the ranked class, "(declared X)" after it when the plugin declared
/// another, "(the GPU of cuda:0, whose native plugin ranks first)" for a second route, the
/// score, the fate).
std::string to_string(const RankedDevice& r);

}  // namespace gpuplug::detail
