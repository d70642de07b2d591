// SPDX-License-Identifier: Apache-2.0
// The CUDA plugin seen through PluginRegistry: listed with its status, "auto" and "cuda!" behave.

// Without a driver (the build machine): cuda is listed as unavailable with the reason, "auto"
// falls back to host and says why, and "cuda!" fails with that reason. With a GPU: cuda is
// available with its devices, "auto" chooses it, and "cuda!" works.

#define BOOST_TEST_MODULE test_cuda_registry
#include <cstdlib>
#include <string>

#include "registry_checks.hpp"

using gpuplug::test::contains;

BOOST_AUTO_TEST_CASE(cuda_is_listed_with_its_status_and_reason) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  const gpuplug::PluginInfo cuda = gpuplug::test::discovered_plugin(registry, "cuda");
  gpuplug::test::check_listed(cuda, "libgpuplug-cuda.so", "NVIDIA", "sm_");
  if (cuda.state == gpuplug::PluginState::available) {
    for (const gpuplug::DeviceInfo& d : cuda.devices) BOOST_TEST(d.uuid.rfind("GPU-", 0) == 0u);
  } else {
    const bool typed = cuda.reason == gpuplug::PluginReason::driver_missing ||
                       cuda.reason == gpuplug::PluginReason::driver_too_old ||
                       cuda.reason == gpuplug::PluginReason::no_device ||
                       cuda.reason == gpuplug::PluginReason::probe_failed;
    BOOST_TEST(typed);
    if (cuda.reason == gpuplug::PluginReason::driver_missing)
      BOOST_TEST(contains(cuda.message, "libcuda.so.1"));
  }
  // Set by the runs against tests/unit/fake_libcuda.c: the reason the registry must report.
  if (const char* expected = std::getenv("GPUPLUG_TEST_EXPECT_REASON")) {
    BOOST_TEST(std::string(to_string(cuda.reason)) == expected);
  }
}

BOOST_AUTO_TEST_CASE(auto_prefers_cuda_or_falls_back_to_host_saying_why) {
  gpuplug::test::check_auto_passes_over_saying_why("cuda");
}

BOOST_AUTO_TEST_CASE(cuda_bang_fails_with_the_reason_or_gives_cuda) {
  gpuplug::test::check_demanded("cuda");
}
