// SPDX-License-Identifier: Apache-2.0
// memory_info and device_free_memory (docs/memory.md, "Budgets"): on an integrated GPU free
// memory counts the host's MemAvailable, the driver's figure stays available, and
// device_memory_limit is the budget when set. On host (a CPU: both figures agree) and on the fake
// HIP runtime (GPUPLUG_TEST_FAKE_HIP=full: hip:0 discrete, hip:1 integrated, 1 GiB each).
#define BOOST_TEST_MODULE memory_budget
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gpuplug/gpuplug.hpp>
#include <optional>
#include <sstream>
#include <string>

namespace {

/// MemAvailable as the test reads it (its own reading of /proc/meminfo).
std::optional<std::uint64_t> mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kib = 0;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

bool on_fake_hip() { return std::getenv("GPUPLUG_TEST_FAKE_HIP") != nullptr; }

std::shared_ptr<gpuplug::GpuBackend> backend(gpuplug::PluginRegistry& registry,
                                             const std::string& selector,
                                             const gpuplug::Options& options = {}) {
  const auto plugin = std::filesystem::path(GPUPLUG_TEST_PLUGIN_DIR) /
                      (on_fake_hip() ? "libgpuplug-hip.so" : "libgpuplug-host.so");
  registry.add_plugin_file(plugin);
  return registry.create(selector, options);
}

constexpr std::uint64_t MiB = std::uint64_t{1} << 20;

}  // namespace

BOOST_AUTO_TEST_CASE(a_device_that_is_not_integrated_reports_the_drivers_figure) {
  gpuplug::PluginRegistry registry;
  auto gpu = backend(registry, on_fake_hip() ? "hip:0!" : "host!");
  BOOST_TEST_REQUIRE((gpu->device_info().device_class != gpuplug::DeviceClass::integrated_gpu));
  if (on_fake_hip()) {
    // The fake's figure is exact: 1 GiB less what is live.
    BOOST_TEST(gpu->memory_info().free_bytes == gpu->device_free_memory());
    BOOST_TEST(gpu->device_free_memory() == 1024 * MiB);
  } else {
    BOOST_TEST(gpu->device_free_memory() > 0u);  // the host's free memory moves by itself
  }
}

BOOST_AUTO_TEST_CASE(an_integrated_gpu_counts_the_hosts_available_memory) {
  if (!on_fake_hip()) return;  // no integrated device on host
  gpuplug::PluginRegistry registry;
  auto gpu = backend(registry, "hip:1!");
  BOOST_TEST_REQUIRE((gpu->device_info().device_class == gpuplug::DeviceClass::integrated_gpu));
  const gpuplug::DevicePtr p = gpu->alloc(256 * MiB, "budget");
  const std::uint64_t driver = gpu->device_free_memory();
  BOOST_TEST(driver == 768 * MiB);
  const std::optional<std::uint64_t> host = mem_available();
  BOOST_TEST_REQUIRE(host.has_value());
  const std::uint64_t free = gpu->memory_info().free_bytes;
  BOOST_TEST(free >= driver);
  // MemAvailable moves between the two readings; a machine with far more than the driver's
  // figure available must see most of it.
  if (*host > driver + 512 * MiB) BOOST_TEST(free > driver + 256 * MiB, free << " " << *host);
  gpu->free(p);
}

BOOST_AUTO_TEST_CASE(device_memory_limit_is_the_budget_even_on_an_integrated_gpu) {
  if (!on_fake_hip()) return;
  gpuplug::PluginRegistry registry;
  auto gpu = backend(registry, "hip:1!", {{"device_memory_limit", "64M"}});
  const gpuplug::DevicePtr p = gpu->alloc(16 * MiB, "budget");
  BOOST_TEST(gpu->memory_info().free_bytes == 48 * MiB);
  BOOST_TEST(gpu->device_free_memory() == 48 * MiB);
  gpu->free(p);
}
