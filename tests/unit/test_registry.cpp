// SPDX-License-Identifier: Apache-2.0
// The plugin loader against fake plugins built by the tests, one per failure kind, beside the
// real host plugin: each is listed with its state, reason and message; host keeps working.
#define BOOST_TEST_MODULE registry
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <gpuplug/gpuplug.hpp>
#include <map>
#include <thread>
#include <vector>

#include "abi_text.hpp"
#include "loader_env.hpp"
#include "test_print.hpp"

namespace fs = std::filesystem;
using gpuplug::PluginInfo;
using gpuplug::PluginReason;
using gpuplug::PluginState;
using namespace gpuplug::test;

BOOST_TEST_GLOBAL_FIXTURE(LoaderEnvironment);

namespace {

std::map<std::string, PluginInfo> by_file_name(const std::vector<PluginInfo>& plugins) {
  std::map<std::string, PluginInfo> out;
  for (const auto& p : plugins) out.emplace(p.path.filename().string(), p);
  return out;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Runs axpy on `n` elements on `gpu` and checks it (the host plugin's real kernel).
void check_axpy(gpuplug::GpuBackend& gpu, std::uint32_t n = 4096) {
  std::vector<float> x(n), y(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  const auto dx = gpu.alloc(n * sizeof(float), "test x");
  const auto dy = gpu.alloc(n * sizeof(float), "test y");
  gpu.copy_h2d(dx, x.data(), n * sizeof(float));
  gpu.copy_h2d(dy, y.data(), n * sizeof(float));
  const auto k = gpu.op_cache().kernel(gpu, "axpy", "axpy");
  gpu.launch_args(k, {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, {}, n, 2.0f, dx.value, dy.value);
  gpu.synchronize();
  std::vector<float> out(n);
  gpu.copy_d2h(out.data(), dy, n * sizeof(float));
  gpu.free(dx);
  gpu.free(dy);
  for (std::uint32_t i = 0; i < n; ++i) BOOST_REQUIRE_EQUAL(out[i], 2.0f * x[i] + 1.0f);
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_fake_is_listed_with_its_reason) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  const auto plugins = by_file_name(registry.plugins());
  auto get = [&](const std::string& file) -> const PluginInfo& {
    BOOST_TEST_INFO("plugin file " << file);
    BOOST_REQUIRE(plugins.count(file) == 1);
    return plugins.at(file);
  };
  auto expect = [&](const std::string& file, PluginState state, PluginReason reason,
                    const std::string& message_part) {
    const PluginInfo& p = get(file);
    BOOST_TEST_INFO(file << ": " << p.message);
    BOOST_TEST(p.state == state);
    BOOST_TEST(p.reason == reason);
    BOOST_TEST(contains(p.message, message_part));
    if (state == PluginState::failed) BOOST_TEST(p.devices.empty());
  };

  expect("libgpuplug-notso.so", PluginState::failed, PluginReason::not_a_shared_object,
         "not a shared object");
  expect("libgpuplug-nodep.so", PluginState::failed, PluginReason::missing_dependency,
         "libgpuplug-fake-gone.so.1");
  expect("libgpuplug-noentry.so", PluginState::failed, PluginReason::missing_entry_symbol,
         "gpuplug_plugin_entry");
  expect("libgpuplug-nullentry.so", PluginState::failed, PluginReason::entry_returned_null,
         "returned null");
  expect("libgpuplug-abi2.so", PluginState::failed, PluginReason::abi_mismatch,
         "plugin speaks ABI 2.0, host speaks " GPUPLUG_TEST_ABI_TEXT);
  BOOST_TEST(get("libgpuplug-abi2.so").abi_version == GPUPLUG_MAKE_VERSION(2, 0));
  // ABI-4: an answer of a later minor than the host asked for is refused, not trimmed to the
  // known prefix.
  expect("libgpuplug-later_minor.so", PluginState::failed, PluginReason::abi_mismatch,
         "breaks ABI-4: plugin answered ABI 1.5 to a host that asked for " GPUPLUG_TEST_ABI_TEXT);
  BOOST_TEST(get("libgpuplug-later_minor.so").abi_version == GPUPLUG_MAKE_VERSION(1, 5));
  expect("libgpuplug-small.so", PluginState::failed, PluginReason::table_too_small, "16 bytes");
  expect("libgpuplug-nullslot.so", PluginState::failed, PluginReason::abi_mismatch,
         "'probe' is null");
  expect("libgpuplug-fake_missing.so", PluginState::unavailable, PluginReason::driver_missing,
         "driver missing: libfakegpu.so.1 not found");
  expect("libgpuplug-fake_many.so", PluginState::unavailable, PluginReason::probe_failed,
         "probe reported 4294967295 devices");
  BOOST_TEST(get("libgpuplug-fake_many.so").devices.empty());
  BOOST_TEST(get("libgpuplug-fake_missing.so").name == "fake_missing");
  BOOST_TEST(get("libgpuplug-fake_missing.so").vendor == "Fake GPUs Inc.");
  BOOST_TEST(get("libgpuplug-fake_missing.so").abi_version == GPUPLUG_ABI_VERSION);

  // The duplicate names both files; the first one found (the real host) wins.
  const PluginInfo& dup = get("libgpuplug-duphost.so");
  expect("libgpuplug-duphost.so", PluginState::failed, PluginReason::duplicate_name, "'host'");
  BOOST_TEST(contains(dup.message, host_plugin_file().string()));
  BOOST_TEST(contains(dup.message, (fake_plugin_dir() / "libgpuplug-duphost.so").string()));

  // Failed files are named after the file until a table names them.
  BOOST_TEST(get("libgpuplug-notso.so").name == "notso");

  const PluginInfo& host = get("libgpuplug-host.so");
  BOOST_TEST(host.state == PluginState::available);
  BOOST_TEST(host.reason == PluginReason::none);
  BOOST_TEST(host.name == "host");
  BOOST_TEST(host.abi_version == GPUPLUG_ABI_VERSION);
  BOOST_TEST(!host.version.empty());
  BOOST_REQUIRE(!host.devices.empty());
  BOOST_TEST(!host.devices[0].name.empty());
  BOOST_TEST(host.devices[0].total_memory > 0u);
}

BOOST_AUTO_TEST_CASE(host_works_beside_the_fakes) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  auto gpu = registry.create("host");
  BOOST_REQUIRE(gpu);
  BOOST_TEST(gpu->name() == "host:0");
  BOOST_TEST(gpu->plugin_name() == "host");
  check_axpy(*gpu);
  BOOST_TEST(gpu->live_alloc_count() == 0u);
}

BOOST_AUTO_TEST_CASE(the_library_outlives_the_registry) {
  auto registry = std::make_unique<gpuplug::PluginRegistry>();
  registry->discover();
  auto gpu = registry->create("host");
  auto second = registry->create("host");
  registry.reset();  // the plugin library must stay loaded for the backends
  check_axpy(*gpu);
  gpu.reset();
  check_axpy(*second);  // the last backend alone keeps it loaded
  second.reset();
}

BOOST_AUTO_TEST_CASE(discovery_order_follows_the_search_path) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  const auto plugins = registry.plugins();
  BOOST_REQUIRE(plugins.size() >= 11u);
  // GPUPLUG_PLUGIN_PATH first: the host file named directly, then the fake folder, sorted.
  BOOST_TEST(plugins[0].path == host_plugin_file());
  std::vector<std::string> fakes;
  std::size_t i = 1;
  for (; i < plugins.size() && plugins[i].path.parent_path() == fake_plugin_dir(); ++i) {
    fakes.push_back(plugins[i].path.filename().string());
  }
  BOOST_TEST(fakes.size() == 11u);
  BOOST_TEST(std::is_sorted(fakes.begin(), fakes.end()));
  // Nothing from the fake folder later, and the real host (also in the build tree's plugin
  // folder) is not listed twice.
  std::size_t host_files = 0;
  for (const auto& p : plugins) {
    if (fs::equivalent(p.path, host_plugin_file())) ++host_files;
  }
  BOOST_TEST(host_files == 1u);
  for (; i < plugins.size(); ++i) BOOST_TEST(plugins[i].path.parent_path() != fake_plugin_dir());
}

BOOST_AUTO_TEST_CASE(search_path_lists_the_environment_first) {
  ScopedEnv env("GPUPLUG_PLUGIN_PATH", "/nonexistent/a::/nonexistent/b.so:");
  const auto path = gpuplug::PluginRegistry::search_path();
  BOOST_REQUIRE(path.size() >= 3u);
  BOOST_TEST(path[0] == fs::path("/nonexistent/a"));
  BOOST_TEST(path[1] == fs::path("/nonexistent/b.so"));
  // Then <folder of libgpuplug.so>/gpuplug/plugins (the build tree's lib/ here).
  BOOST_TEST(fs::equivalent(path[2], GPUPLUG_TEST_PLUGIN_DIR));
  // Missing entries are skipped, not fatal.
  gpuplug::PluginRegistry registry;
  BOOST_CHECK_NO_THROW(registry.discover());
  BOOST_TEST(by_file_name(registry.plugins()).count("libgpuplug-host.so") == 1u);
}

BOOST_AUTO_TEST_CASE(folders_take_plugin_names_files_are_taken_as_named) {
  const fs::path dir = fs::temp_directory_path() / ("gpuplug-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path custom = dir / "custom-name.so";
  fs::copy_file(fake_plugin_dir() / "libgpuplug-fake_missing.so", custom,
                fs::copy_options::overwrite_existing);
  {
    ScopedEnv env("GPUPLUG_PLUGIN_PATH", dir.string());
    gpuplug::PluginRegistry registry;
    registry.discover();
    for (const auto& p : registry.plugins()) BOOST_TEST(p.path.parent_path() != dir);
  }
  {
    ScopedEnv env("GPUPLUG_PLUGIN_PATH", custom.string());
    gpuplug::PluginRegistry registry;
    registry.discover();
    const auto plugins = registry.plugins();
    BOOST_REQUIRE(!plugins.empty());
    BOOST_TEST(plugins[0].path == custom);
    BOOST_TEST(plugins[0].name == "fake_missing");
    BOOST_TEST(plugins[0].state == PluginState::unavailable);
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(add_plugin_file_loads_one_file_once) {
  gpuplug::PluginRegistry registry;  // not discovered
  BOOST_TEST(registry.plugins().empty());
  const PluginInfo notso = registry.add_plugin_file(fake_plugin_dir() / "libgpuplug-notso.so");
  BOOST_TEST(notso.state == PluginState::failed);
  BOOST_TEST(notso.reason == PluginReason::not_a_shared_object);
  const PluginInfo host = registry.add_plugin_file(host_plugin_file());
  BOOST_TEST(host.state == PluginState::available);
  BOOST_TEST(registry.add_plugin_file(host_plugin_file()).name == "host");
  BOOST_TEST(registry.plugins().size() == 2u);
  auto gpu = registry.create("host");
  BOOST_TEST(gpu->name() == "host:0");
}

BOOST_AUTO_TEST_CASE(rediscovery_keeps_backends_alive) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  const auto before = registry.plugins().size();
  auto gpu = registry.create("host");
  registry.discover();
  BOOST_TEST(registry.plugins().size() == before);
  check_axpy(*gpu);
}

BOOST_AUTO_TEST_CASE(concurrent_listing_and_creation) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  std::vector<std::thread> threads;
  std::atomic<int> created{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 3; ++i) {
        auto gpu = registry.create("fake_missing,host");
        if (gpu && gpu->name() == "host:0") ++created;
        (void)registry.plugins();
      }
    });
  }
  for (auto& t : threads) t.join();
  BOOST_TEST(created.load() == 12);
}

// The first *usable* plugin of a name wins. The fake folder first on the path puts the
// unavailable fake "host" (duplicate_host.c) before the real one: the real host still answers
// "host" and "auto", and the fake is the duplicate, naming the file that won.
BOOST_AUTO_TEST_CASE(an_unavailable_namesake_first_does_not_hide_the_real_host) {
  ScopedEnv env("GPUPLUG_PLUGIN_PATH", fake_plugin_dir().string() + ":" + host_plugin_file().string());
  gpuplug::PluginRegistry registry;
  registry.discover();
  const auto plugins = by_file_name(registry.plugins());
  BOOST_REQUIRE(plugins.count("libgpuplug-duphost.so") == 1);
  const PluginInfo& dup = plugins.at("libgpuplug-duphost.so");
  BOOST_TEST_INFO(dup.message);
  BOOST_TEST(dup.reason == PluginReason::duplicate_name);
  BOOST_TEST(contains(dup.message, host_plugin_file().string()));
  BOOST_TEST(plugins.at("libgpuplug-host.so").state == PluginState::available);
  for (const char* selector : {"host", "auto", "host!"}) {
    BOOST_TEST_INFO(selector);
    auto gpu = registry.create(selector);
    BOOST_TEST(gpu->plugin_name() == "host");
    check_axpy(*gpu, 256);
  }
}

// With only the unavailable namesake, the error about "host" names it and why.
BOOST_AUTO_TEST_CASE(an_error_about_a_name_names_every_candidate) {
  ScopedEnv env("GPUPLUG_PLUGIN_PATH",
                (fake_plugin_dir() / "libgpuplug-duphost.so").string());
  gpuplug::PluginRegistry registry;
  registry.discover();
  try {
    registry.create("host!");
    // The default folder's real host wins when it is there; then the fake is the duplicate.
    const auto plugins = by_file_name(registry.plugins());
    BOOST_TEST(plugins.at("libgpuplug-duphost.so").reason == PluginReason::duplicate_name);
  } catch (const gpuplug::Error& e) {
    BOOST_TEST(contains(e.what(), "libgpuplug-duphost.so"));
  }
}
