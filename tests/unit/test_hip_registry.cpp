// SPDX-License-Identifier: Apache-2.0
// The HIP plugin seen through PluginRegistry: listed with its status, "auto" and "hip!" behave.

// Without an AMD GPU (the build machine has the HIP runtime but no /dev/kfd): hip is listed as
// unavailable with reason no_device and the runtime's words, "auto" falls back to host and says
// why hip was passed over, and "hip!" fails with that reason. With a GPU: hip is available with
// its devices, and "hip!" gives hip:0.

#define BOOST_TEST_MODULE test_hip_registry
#include <dlfcn.h>

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <gpuplug/gpuplug.hpp>
#include <optional>
#include <ostream>
#include <string>

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

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Whether this machine can have a usable AMD GPU at all: the runtime and the kernel driver.
bool runtime_present() {
  for (const char* name : {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"})
    if (void* h = dlopen(name, RTLD_LAZY | RTLD_LOCAL)) {
      dlclose(h);
      return true;
    }
  return false;
}
bool kfd_present() { return std::filesystem::exists("/dev/kfd"); }

gpuplug::PluginInfo hip_entry(const gpuplug::PluginRegistry& registry) {
  for (const gpuplug::PluginInfo& p : registry.plugins())
    if (p.name == "hip") return p;
  BOOST_FAIL("the hip plugin was not discovered");
  return {};
}

}  // namespace

BOOST_AUTO_TEST_CASE(hip_is_listed_with_its_status_and_reason) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  const gpuplug::PluginInfo hip = hip_entry(registry);
  BOOST_TEST_MESSAGE("hip: " << to_string(hip.state) << " (" << to_string(hip.reason)
                             << "): " << hip.message);
  BOOST_TEST(hip.path.filename() == "libgpuplug-hip.so");
  BOOST_TEST(hip.vendor == "AMD");
  // The plugin itself always loads: only the runtime or the GPU can be missing.
  BOOST_TEST(hip.state != gpuplug::PluginState::failed, hip.message);
  if (hip.state == gpuplug::PluginState::available) {
    BOOST_TEST(!hip.devices.empty());
    for (const gpuplug::DeviceInfo& d : hip.devices) {
      BOOST_TEST(!d.name.empty());
      BOOST_TEST(d.arch.rfind("gfx", 0) == 0u, d.arch);
      BOOST_TEST(d.total_memory > 0u);
    }
    return;
  }
  BOOST_TEST(hip.state == gpuplug::PluginState::unavailable);
  BOOST_TEST(hip.devices.empty());
  if (!runtime_present()) {
    BOOST_TEST(hip.reason == gpuplug::PluginReason::driver_missing);
    BOOST_TEST(contains(hip.message, "libamdhip64.so"), hip.message);
  } else if (!kfd_present()) {
    BOOST_TEST(hip.reason == gpuplug::PluginReason::no_device);
    BOOST_TEST(contains(hip.message, "no AMD GPU (hipErrorNoDevice)"), hip.message);
  }
}

BOOST_AUTO_TEST_CASE(auto_falls_back_to_host_saying_why_hip_was_passed_over) {
  gpuplug::test::ScopedEnv no_override("GPUPLUG_BACKEND", std::nullopt);
  gpuplug::PluginRegistry registry;
  registry.discover();
  const gpuplug::PluginInfo hip = hip_entry(registry);
  const gpuplug::Selection chosen = registry.select("auto");
  BOOST_TEST_MESSAGE(chosen.explain());
  BOOST_TEST_REQUIRE(chosen.backend != nullptr);
  if (hip.state == gpuplug::PluginState::available) {
    BOOST_TEST(chosen.backend->plugin_name() != "host");  // a GPU is preferred to the CPU
    return;
  }
  bool any_gpu = false;  // another vendor's GPU may legitimately win
  for (const gpuplug::PluginInfo& p : registry.plugins())
    any_gpu = any_gpu || (p.name != "host" && p.state == gpuplug::PluginState::available);
  if (!any_gpu) BOOST_TEST(chosen.chosen == "host:0");
  bool said_why = false;
  for (const std::string& why : chosen.passed_over)
    said_why = said_why || (contains(why, "hip") && contains(why, hip.message));
  BOOST_TEST(said_why, "hip's reason is among the passed-over candidates: " << chosen.explain());
  BOOST_TEST(contains(chosen.explain(), hip.message), chosen.explain());
}

BOOST_AUTO_TEST_CASE(hip_bang_fails_with_the_reason_or_gives_hip) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  const gpuplug::PluginInfo hip = hip_entry(registry);
  if (hip.state == gpuplug::PluginState::available) {
    auto gpu = registry.create("hip!");
    BOOST_TEST_REQUIRE(gpu != nullptr);
    BOOST_TEST(gpu->name() == "hip:0");
    BOOST_TEST(gpu->device_info().name == hip.devices.front().name);
    return;
  }
  try {
    registry.create("hip!");
    BOOST_ERROR("hip! succeeded although hip is " << to_string(hip.state));
  } catch (const gpuplug::Error& e) {
    BOOST_TEST_MESSAGE("hip!: " << e.what());
    BOOST_TEST(contains(e.what(), hip.message), e.what());
  }
  // "hip:0!" is the same demand for one device.
  BOOST_CHECK_THROW(registry.create("hip:0!"), gpuplug::Error);
  // A list falls through to host, again saying why.
  const gpuplug::Selection listed = registry.select("hip,host");
  BOOST_TEST(listed.chosen == "host:0");
  BOOST_TEST(contains(listed.explain(), hip.message), listed.explain());
}
