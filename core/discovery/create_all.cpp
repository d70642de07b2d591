// SPDX-License-Identifier: Apache-2.0
// PluginRegistry::create_all: one backend per device a selector names (docs/interop.md).
#include <gpuplug/registry.hpp>
#include <gpuplug/support/text.hpp>
#include <set>
#include <string>
#include <vector>

#include "discovery/selector_rank.hpp"
#include "logging/environment.hpp"

namespace gpuplug {

namespace {

/// Expands `selector` into exact selectors ("cuda:0!"), one per device, in the order given:
/// - "name" or "name!": every device of that plugin ("name!" when it is not usable, so that
///   select() says why; plain "name" is then skipped, as a fallback would be);
/// - "name:1", "name:uuid=...", "name:pci=...": that device ("!" added; skipped when optional
///   and the plugin is not usable);
/// - "auto": GPUPLUG_BACKEND's expansion when it is set (`from_env` then says so), else every
///   device of every usable plugin but host that is not an emulator or a CPU, host's devices
///   only when there is none, and the emulated ones only when host is not usable either; a
///   device that is another plugin's GPU reached through a cross-vendor API (vulkan:0 that is
///   cuda:0's GPU) is left out, so that each GPU gets one backend, through its native plugin.
std::vector<std::string> expand(std::string_view selector, const std::vector<PluginInfo>& found,
                                bool allow_env) {
  auto usable = [&](std::string_view name) -> const PluginInfo* {
    for (const PluginInfo& p : found)
      if (p.name == name && p.state == PluginState::available) return &p;
    return nullptr;
  };
  auto all_devices = [](const PluginInfo& p, std::vector<std::string>& out) {
    for (std::size_t i = 0; i < p.devices.size(); ++i)
      out.push_back(p.name + ":" + std::to_string(i) + "!");
  };
  std::vector<std::string> out;
  for (std::string_view raw : support::split(selector, ',')) {
    const std::string element(support::trim(raw));
    const bool required = element.ends_with('!');
    const std::string name = element.substr(0, element.find_first_of(":!"));
    if (element.find(':') != std::string::npos) {
      if (required) {
        out.push_back(element);
      } else if (usable(name) != nullptr) {
        out.push_back(element + "!");
      }
    } else if (name == "auto") {
      if (auto env = allow_env ? detail::read_environment("GPUPLUG_BACKEND") : std::nullopt) {
        parse_selector(*env);  // a malformed variable fails as select() fails on it
        for (std::string& s : expand(*env, found, /*allow_env=*/false)) out.push_back(std::move(s));
        continue;
      }
      // The devices `auto` ranks above host come first; an emulator (lavapipe) or another
      // plugin's CPU device, which auto ranks below host, only when there is neither.
      auto emulated = [](const DeviceInfo& d) {
        return d.device_class == DeviceClass::emulator || d.device_class == DeviceClass::cpu;
      };
      auto devices_where = [&](bool want_emulated) {
        for (const PluginInfo& p : found) {
          if (p.state != PluginState::available || p.name == "host") continue;
          for (std::size_t i = 0; i < p.devices.size(); ++i)
            if (emulated(p.devices[i]) == want_emulated &&
                detail::native_route_of(p, p.devices[i], found).empty())
              out.push_back(p.name + ":" + std::to_string(i) + "!");
        }
      };
      const std::size_t before = out.size();
      devices_where(false);
      if (out.size() == before)
        if (const PluginInfo* host = usable("host")) all_devices(*host, out);
      if (out.size() == before) devices_where(true);
    } else if (const PluginInfo* p = usable(name)) {
      all_devices(*p, out);
    } else if (required) {
      out.push_back(name + "!");
    }
  }
  return out;
}

}  // namespace

std::vector<std::shared_ptr<GpuBackend>> PluginRegistry::create_all(std::string_view selector,
                                                                    const Options& options) {
  parse_selector(selector);  // malformed: the same Error as select()
  const std::vector<PluginInfo> found = plugins();
  // A device named twice ("cuda,cuda:0") gets one backend.
  std::vector<std::string> devices;
  std::set<std::string> seen;
  for (std::string& one : expand(selector, found, /*allow_env=*/true))
    if (seen.insert(one).second) devices.push_back(std::move(one));
  if (devices.empty()) {
    std::vector<std::string> names;
    for (const PluginInfo& p : found) names.push_back(p.name);
    throw Error(Status::not_found, "registry", "create_all",
                "selector '" + std::string(selector) + "' names no usable device (plugins found: " +
                    (names.empty() ? std::string("none") : support::join(names)) + ")");
  }
  std::vector<std::shared_ptr<GpuBackend>> backends;
  backends.reserve(devices.size());
  // Converted by name: BackendPtr converts to shared_ptr both ways, so push_back would be ambiguous.
  for (const std::string& one : devices)
    backends.push_back(std::shared_ptr<GpuBackend>(select(one, options).backend));
  return backends;
}

}  // namespace gpuplug
