// SPDX-License-Identifier: Apache-2.0
// Containment: hostile plugins that crash, exit, hang or lie about lengths are probed in
// child processes and reported with a reason; special files and untrusted folders are refused
// without being opened or loaded; only the plugins an application creates backends from are
// mapped into it.
#define BOOST_TEST_MODULE containment
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <gpuplug/gpuplug.hpp>
#include <map>
#include <sstream>

#include "contains.hpp"
#include "scoped_env.hpp"
#include "test_print.hpp"

namespace fs = std::filesystem;
using gpuplug::PluginInfo;
using gpuplug::PluginReason;
using gpuplug::PluginState;
using gpuplug::test::contains;
using gpuplug::test::ScopedEnv;

namespace {

const fs::path hostile_dir = GPUPLUG_TEST_HOSTILE_PLUGIN_DIR;
const fs::path plugin_dir = GPUPLUG_TEST_PLUGIN_DIR;

std::map<std::string, PluginInfo> by_file_name(const std::vector<PluginInfo>& plugins) {
  std::map<std::string, PluginInfo> out;
  for (const auto& p : plugins) out.emplace(p.path.filename().string(), p);
  return out;
}

/// A private folder under /tmp (mkdtemp: mode 0700, ours), removed at the end of the scope.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "gpuplug-containment-XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, ec);
    fs::remove_all(path, ec);
  }
};

std::string maps() {
  std::ifstream in("/proc/self/maps");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

BOOST_AUTO_TEST_CASE(hostile_plugins_are_contained) {
  ScopedEnv path("GPUPLUG_PLUGIN_PATH", hostile_dir.string());
  ScopedEnv timeout("GPUPLUG_PROBE_TIMEOUT", "2");
  ScopedEnv mode("GPUPLUG_PROBE", std::nullopt);
  ScopedEnv backend("GPUPLUG_BACKEND", std::nullopt);
  gpuplug::PluginRegistry registry;
  const auto start = std::chrono::steady_clock::now();
  registry.discover();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST_MESSAGE("discovery with the hostile plugins took " << seconds << " s");
  BOOST_TEST(seconds < 2.0 + 3.0);  // the timeout, plus slack for a loaded machine

  const auto plugins = by_file_name(registry.plugins());
  auto expect = [&](const std::string& file, PluginReason reason,
                    std::initializer_list<std::string> parts) {
    BOOST_TEST_INFO("plugin file " << file);
    BOOST_REQUIRE(plugins.count(file) == 1);
    const PluginInfo& p = plugins.at(file);
    BOOST_TEST_INFO(file << ": " << p.message);
    BOOST_TEST(p.state == PluginState::failed);
    BOOST_TEST(p.reason == reason);
    for (const std::string& part : parts) BOOST_TEST(contains(p.message, part));
  };
  expect("libgpuplug-segv_entry.so", PluginReason::crashed, {"SIGSEGV", "gpuplug_plugin_entry"});
  expect("libgpuplug-abort_ctor.so", PluginReason::crashed, {"SIGABRT", "static constructors"});
  expect("libgpuplug-exit_probe.so", PluginReason::exited, {"status 0", "probe"});
  expect("libgpuplug-hang_probe.so", PluginReason::timed_out, {"2 s", "probe", "SIGKILL"});
  expect("libgpuplug-crash_describe.so", PluginReason::crashed, {"SIGSEGV", "describe_device"});

  // The liar is usable; its lengths are capped.
  BOOST_REQUIRE(plugins.count("libgpuplug-overrun.so") == 1);
  const PluginInfo& overrun = plugins.at("libgpuplug-overrun.so");
  BOOST_TEST_INFO(overrun.message);
  BOOST_TEST(overrun.state == PluginState::available);
  BOOST_TEST(overrun.message.size() <= 512);  // the probe message field, read up to its end
  // Its impossible ABI 1.1 device fields (crossing the isolated probe's record) are not believed.
  BOOST_REQUIRE(overrun.devices.size() == 1u);
  const gpuplug::DeviceInfo& lied = overrun.devices[0];
  BOOST_TEST(!lied.pci.has_value());
  BOOST_TEST(lied.pci_vendor_id == 0u);
  BOOST_TEST(lied.pci_device_id == 0u);
  BOOST_TEST((lied.device_class == gpuplug::DeviceClass::unknown));
  BOOST_TEST(lied.driver_version == std::string(64, 'V'));  // read up to the field's end
  BOOST_TEST(lied.runtime_version == std::string(64, 'R'));
  auto liar = registry.create("hostile_overrun");
  try {
    liar->alloc(64, "test");
    BOOST_FAIL("the overrun plugin's alloc cannot succeed");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST(e.status() == gpuplug::Status::out_of_memory);
    BOOST_TEST(std::string(e.what()).size() <= gpuplug::max_plugin_text_bytes + 1024);
    BOOST_TEST(contains(e.what(), "truncated"));
  }
  const std::string report = liar->alloc_report(10);
  BOOST_TEST(report.size() <= gpuplug::max_plugin_text_bytes + 1024);

  // The real host (from the default folder) is still there and works.
  auto host = registry.create("host");
  BOOST_TEST(host->plugin_name() == "host");
}

BOOST_AUTO_TEST_CASE(special_files_are_refused_without_blocking) {
  TempDir dir;
  BOOST_REQUIRE(::mkfifo((dir.path / "libgpuplug-fifo.so").c_str(), 0600) == 0);
  fs::create_directory(dir.path / "libgpuplug-folder.so");
  fs::create_symlink("/dev/stdin", dir.path / "libgpuplug-stdin.so");
  ScopedEnv path("GPUPLUG_PLUGIN_PATH", dir.path.string());
  gpuplug::PluginRegistry registry;
  registry.discover();
  const auto plugins = by_file_name(registry.plugins());
  for (const auto& [file, what] : std::map<std::string, std::string>{
           {"libgpuplug-fifo.so", "a FIFO, not a regular file"},
           {"libgpuplug-folder.so", "a directory, not a regular file"},
           {"libgpuplug-stdin.so", "not a regular file"}}) {
    BOOST_TEST_INFO(file);
    BOOST_REQUIRE(plugins.count(file) == 1);
    BOOST_TEST_INFO(plugins.at(file).message);
    BOOST_TEST(plugins.at(file).state == PluginState::failed);
    BOOST_TEST(plugins.at(file).reason == PluginReason::not_a_regular_file);
    BOOST_TEST(contains(plugins.at(file).message, what));
  }
}

BOOST_AUTO_TEST_CASE(folders_writable_by_others_are_untrusted) {
  TempDir dir;
  const fs::path open_dir = dir.path / "open";
  fs::create_directory(open_dir);
  fs::permissions(open_dir, fs::perms::all);  // 0777, no sticky bit
  fs::copy_file(plugin_dir / "libgpuplug-host.so", open_dir / "libgpuplug-host2.so");
  const fs::path file_dir = dir.path / "file";
  fs::create_directory(file_dir);
  fs::copy_file(plugin_dir / "libgpuplug-host.so", file_dir / "libgpuplug-host3.so");
  fs::permissions(file_dir / "libgpuplug-host3.so", fs::perms::others_write, fs::perm_options::add);
  ScopedEnv path("GPUPLUG_PLUGIN_PATH", open_dir.string() + ":" + file_dir.string());
  gpuplug::PluginRegistry registry;
  registry.discover();
  const auto plugins = by_file_name(registry.plugins());
  BOOST_REQUIRE(plugins.count("libgpuplug-host2.so") == 1);
  const PluginInfo& in_open = plugins.at("libgpuplug-host2.so");
  BOOST_TEST_INFO(in_open.message);
  BOOST_TEST(in_open.reason == PluginReason::untrusted_path);
  BOOST_TEST(contains(in_open.message, "folder '" + fs::canonical(open_dir).string() +
                                           "' is writable by other users (mode 0777)"));
  BOOST_REQUIRE(plugins.count("libgpuplug-host3.so") == 1);
  BOOST_TEST_INFO(plugins.at("libgpuplug-host3.so").message);
  BOOST_TEST(plugins.at("libgpuplug-host3.so").reason == PluginReason::untrusted_path);
  // A private folder under the sticky, root-owned /tmp is trusted: the real host copy in the
  // private folder itself would load (checked by the fifo test's folder being probed at all).
  BOOST_TEST(registry.create("host")->plugin_name() == "host");
}

BOOST_AUTO_TEST_CASE(relative_path_elements_are_ignored) {
  ScopedEnv path("GPUPLUG_PLUGIN_PATH", "relative/plugins:.");
  const auto searched = gpuplug::PluginRegistry::search_path();
  for (const fs::path& p : searched) BOOST_TEST(p.is_absolute(), p.string());
}

BOOST_AUTO_TEST_CASE(only_created_plugins_are_mapped) {
  // The default folder: host and, in a CUDA build, cuda. "host!" must not map the cuda plugin.
  ScopedEnv path("GPUPLUG_PLUGIN_PATH", std::nullopt);
  ScopedEnv mode("GPUPLUG_PROBE", std::nullopt);
  gpuplug::PluginRegistry registry;
  registry.discover();
  auto host = registry.create("host!");
  BOOST_TEST(host->plugin_name() == "host");
  const std::string mapped = maps();
  BOOST_TEST(contains(mapped, "libgpuplug-host.so"));
  BOOST_TEST(!contains(mapped, "libgpuplug-cuda.so"));
  BOOST_TEST(!contains(mapped, "libgpuplug-hip.so"));
}
