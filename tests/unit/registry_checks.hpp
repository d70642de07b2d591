// SPDX-License-Identifier: Apache-2.0
// What test_cuda_registry and test_hip_registry check alike: a GPU plugin as PluginRegistry lists
// it, passes it over, and gives it (or its reason) when it is demanded.
#pragma once

#include <boost/test/unit_test.hpp>
#include <gpuplug/gpuplug.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "contains.hpp"
#include "scoped_env.hpp"

namespace gpuplug {
// How Boost.Test prints the registry's enums in failed assertions (its ADL customisation point).
inline std::ostream& boost_test_print_type(std::ostream& os, PluginState s) {
  return os << to_string(s);
}
inline std::ostream& boost_test_print_type(std::ostream& os, PluginReason r) {
  return os << to_string(r);
}
}  // namespace gpuplug

namespace gpuplug::test {

/// The registry's entry for the plugin `name`; ends the case when it was not discovered.
inline PluginInfo discovered_plugin(const PluginRegistry& registry, std::string_view name) {
  for (const PluginInfo& p : registry.plugins())
    if (p.name == name) return p;
  BOOST_FAIL("the " << name << " plugin was not discovered");
  return {};
}

/// The plugin is listed from its file with its vendor, and never as failed (the plugin itself
/// always loads: only the driver or the device can be missing). Available: its devices are
/// named, of an architecture starting with `arch_prefix`, with memory. Otherwise: no devices,
/// and a message saying why.
inline void check_listed(const PluginInfo& plugin, std::string_view file, std::string_view vendor,
                         std::string_view arch_prefix) {
  BOOST_TEST_MESSAGE(plugin.name << ": " << to_string(plugin.state) << " ("
                                 << to_string(plugin.reason) << "): " << plugin.message);
  BOOST_TEST(plugin.path.filename() == file);
  BOOST_TEST(plugin.vendor == vendor);
  BOOST_TEST(plugin.state != PluginState::failed, plugin.message);
  if (plugin.state == PluginState::available) {
    BOOST_TEST(!plugin.devices.empty());
    for (const DeviceInfo& d : plugin.devices) {
      BOOST_TEST(!d.name.empty());
      BOOST_TEST(d.arch.rfind(arch_prefix, 0) == 0u, d.arch);
      BOOST_TEST(d.total_memory > 0u);
    }
  } else {
    BOOST_TEST(plugin.devices.empty());
    BOOST_TEST(!plugin.message.empty());
  }
}

/// "auto" prefers an available GPU to the CPU. When the plugin is unavailable, "auto" says why
/// it was passed over, and falls back to host unless another vendor's GPU is available.
inline void check_auto_passes_over_saying_why(std::string_view name) {
  ScopedEnv no_override("GPUPLUG_BACKEND", std::nullopt);
  PluginRegistry registry;
  registry.discover();
  const PluginInfo plugin = discovered_plugin(registry, name);
  const Selection chosen = registry.select("auto");
  BOOST_TEST_MESSAGE(chosen.explain());
  BOOST_TEST_REQUIRE(chosen.backend != nullptr);
  if (plugin.state == PluginState::available) {
    // Which GPU vendor comes first is the registry's order: only check that host was not chosen.
    BOOST_TEST(chosen.backend->plugin_name() != "host");
    return;
  }
  bool any_gpu = false;  // another vendor's GPU may legitimately win
  for (const PluginInfo& p : registry.plugins())
    any_gpu = any_gpu || (p.name != "host" && p.state == PluginState::available);
  if (!any_gpu) BOOST_TEST(chosen.chosen == "host:0");
  bool said_why = false;
  for (const std::string& why : chosen.passed_over)
    said_why = said_why || (contains(why, plugin.name) && contains(why, plugin.message));
  BOOST_TEST(said_why,
             "the " << name << " reason is among the passed-over candidates: " << chosen.explain());
  BOOST_TEST(contains(chosen.explain(), plugin.message), chosen.explain());
}

/// "<name>!" gives <name>:0 when the plugin is available. Otherwise it fails with the plugin's
/// reason, "<name>:0!" fails too, and the list "<name>,host" falls through to host saying why.
inline void check_demanded(std::string_view name) {
  PluginRegistry registry;
  registry.discover();
  const PluginInfo plugin = discovered_plugin(registry, name);
  const std::string demand = std::string(name) + "!";
  if (plugin.state == PluginState::available) {
    auto gpu = registry.create(demand);
    BOOST_TEST_REQUIRE(gpu != nullptr);
    BOOST_TEST(gpu->name() == std::string(name) + ":0");
    BOOST_TEST(gpu->device_info().name == plugin.devices.front().name);
    return;
  }
  try {
    registry.create(demand);
    BOOST_ERROR(demand << " succeeded although " << name << " is " << to_string(plugin.state));
  } catch (const Error& e) {
    BOOST_TEST_MESSAGE(demand << ": " << e.what());
    BOOST_TEST(contains(e.what(), plugin.message), e.what());
  }
  BOOST_CHECK_THROW(registry.create(std::string(name) + ":0!"), Error);
  const Selection listed = registry.select(std::string(name) + ",host");
  BOOST_TEST(listed.chosen == "host:0");
  BOOST_TEST(contains(listed.explain(), plugin.message), listed.explain());
}

}  // namespace gpuplug::test
