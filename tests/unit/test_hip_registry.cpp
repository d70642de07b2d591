// SPDX-License-Identifier: Apache-2.0
// The HIP plugin seen through PluginRegistry: listed with its status, "auto" and "hip!" behave.

// Without an AMD GPU (the build machine has the HIP runtime but no /dev/kfd): hip is listed as
// unavailable with reason no_device and the runtime's words, "auto" falls back to host and says
// why hip was passed over, and "hip!" fails with that reason. With a GPU: hip is available with
// its devices, and "hip!" gives hip:0.

#define BOOST_TEST_MODULE test_hip_registry
#include <dlfcn.h>

#include <filesystem>
#include <string>

#include "registry_checks.hpp"

using gpuplug::test::contains;

namespace {

// Whether this machine can have a usable AMD GPU at all: the runtime and the kernel driver.
bool runtime_present() {
  for (const char* name :
       {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"})
    if (void* h = dlopen(name, RTLD_LAZY | RTLD_LOCAL)) {
      dlclose(h);
      return true;
    }
  return false;
}
bool kfd_present() { return std::filesystem::exists("/dev/kfd"); }

}  // namespace

BOOST_AUTO_TEST_CASE(hip_is_listed_with_its_status_and_reason) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  const gpuplug::PluginInfo hip = gpuplug::test::discovered_plugin(registry, "hip");
  gpuplug::test::check_listed(hip, "libgpuplug-hip.so", "AMD", "gfx");
  if (hip.state == gpuplug::PluginState::available) return;
  BOOST_TEST(hip.state == gpuplug::PluginState::unavailable);
  if (!runtime_present()) {
    BOOST_TEST(hip.reason == gpuplug::PluginReason::driver_missing);
    BOOST_TEST(contains(hip.message, "libamdhip64.so"), hip.message);
    BOOST_TEST(contains(hip.message, "/opt/rocm/lib"), hip.message);  // every place looked in
  } else if (!kfd_present()) {
    BOOST_TEST(hip.reason == gpuplug::PluginReason::no_device);
    BOOST_TEST(contains(hip.message, "no AMD GPU (hipErrorNoDevice)"), hip.message);
  }
}

BOOST_AUTO_TEST_CASE(auto_falls_back_to_host_saying_why_hip_was_passed_over) {
  gpuplug::test::check_auto_passes_over_saying_why("hip");
}

BOOST_AUTO_TEST_CASE(hip_bang_fails_with_the_reason_or_gives_hip) {
  gpuplug::test::check_demanded("hip");
}
