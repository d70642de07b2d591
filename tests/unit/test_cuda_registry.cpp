// SPDX-License-Identifier: Apache-2.0
// The CUDA plugin seen through PluginRegistry: listed with its status, "auto" and "cuda!" behave.

// Without a driver (the build machine): cuda is listed as unavailable with the reason, "auto"
// falls back to host and says why, and "cuda!" fails with that reason. With a GPU: cuda is
// available with its devices, "auto" chooses it, and "cuda!" works.

#define BOOST_TEST_MODULE test_cuda_registry
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <gpuplug/gpuplug.hpp>
#include <optional>
#include <string>

#include "scoped_env.hpp"

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

gpuplug::PluginInfo cuda_entry(const gpuplug::PluginRegistry& registry) {
  for (const gpuplug::PluginInfo& p : registry.plugins()) {
    if (p.name == "cuda") return p;
  }
  BOOST_FAIL("the cuda plugin was not discovered");
  return {};
}

}  // namespace

BOOST_AUTO_TEST_CASE(cuda_is_listed_with_its_status_and_reason) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  const gpuplug::PluginInfo cuda = cuda_entry(registry);
  BOOST_TEST_MESSAGE("cuda: " << to_string(cuda.state) << " (" << to_string(cuda.reason)
                              << "): " << cuda.message);
  BOOST_TEST(cuda.path.filename() == "libgpuplug-cuda.so");
  BOOST_TEST(cuda.vendor == "NVIDIA");
  // The plugin itself always loads: only the driver or device can be missing.
  BOOST_TEST((cuda.state != gpuplug::PluginState::failed), cuda.message);
  if (cuda.state == gpuplug::PluginState::available) {
    BOOST_TEST(!cuda.devices.empty());
    for (const gpuplug::DeviceInfo& d : cuda.devices) {
      BOOST_TEST(!d.name.empty());
      BOOST_TEST(d.arch.rfind("sm_", 0) == 0u);
      BOOST_TEST(d.uuid.rfind("GPU-", 0) == 0u);
      BOOST_TEST(d.total_memory > 0u);
    }
  } else {
    BOOST_TEST(cuda.devices.empty());
    BOOST_TEST(!cuda.message.empty());
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
  gpuplug::test::ScopedEnv no_override("GPUPLUG_BACKEND", std::nullopt);
  gpuplug::PluginRegistry registry;
  registry.discover();
  const gpuplug::PluginInfo cuda = cuda_entry(registry);
  const gpuplug::Selection chosen = registry.select("auto");
  BOOST_TEST_MESSAGE(chosen.explain());
  BOOST_TEST_REQUIRE(chosen.backend != nullptr);
  if (cuda.state == gpuplug::PluginState::available) {
    // A GPU is preferred; which GPU vendor comes first is the registry's order, so only check
    // that host was not chosen over an available CUDA device.
    BOOST_TEST(chosen.backend->plugin_name() != "host");
  } else {
    BOOST_TEST(chosen.chosen == "host:0");
    bool said_why = false;
    for (const std::string& why : chosen.passed_over) {
      if (contains(why, "cuda") && contains(why, cuda.message)) said_why = true;
    }
    BOOST_TEST(said_why,
               "the cuda reason is among the passed-over candidates: " << chosen.explain());
    BOOST_TEST(contains(chosen.explain(), cuda.message));
  }
}

BOOST_AUTO_TEST_CASE(cuda_bang_fails_with_the_reason_or_gives_cuda) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  const gpuplug::PluginInfo cuda = cuda_entry(registry);
  if (cuda.state == gpuplug::PluginState::available) {
    auto gpu = registry.create("cuda!");
    BOOST_TEST_REQUIRE(gpu != nullptr);
    BOOST_TEST(gpu->name() == "cuda:0");
    BOOST_TEST(gpu->device_info().name == cuda.devices.front().name);
    return;
  }
  try {
    registry.create("cuda!");
    BOOST_ERROR("cuda! succeeded although cuda is " << to_string(cuda.state));
  } catch (const gpuplug::Error& e) {
    BOOST_TEST_MESSAGE("cuda!: " << e.what());
    BOOST_TEST(contains(e.what(), cuda.message), e.what());
  }
  // A list falls through to host, again saying why.
  const gpuplug::Selection listed = registry.select("cuda,host");
  BOOST_TEST(listed.chosen == "host:0");
  BOOST_TEST(contains(listed.explain(), cuda.message));
}
