// SPDX-License-Identifier: Apache-2.0
// Device identity and capabilities (ABI 1.1): the host plugin's fields, a 1.0 plugin's
// devices read with the defaults, and selectors by uuid= and pci=.
#define BOOST_TEST_MODULE device_identity
#include <sys/utsname.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <gpuplug/gpuplug.hpp>
#include <string>
#include <thread>
#include <vector>

#include "contains.hpp"
#include "error_of.hpp"
#include "loader_env.hpp"
#include "test_print.hpp"

using gpuplug::DeviceClass;
using gpuplug::DeviceInfo;
using gpuplug::Error;
using gpuplug::parse_selector;
using gpuplug::PciAddress;
using gpuplug::Status;
using namespace gpuplug::test;
namespace fs = std::filesystem;

BOOST_TEST_GLOBAL_FIXTURE(LoaderEnvironment);

namespace gpuplug {
inline std::ostream& boost_test_print_type(std::ostream& os, const DeviceClass& c) {
  return os << to_string(c);
}
}  // namespace gpuplug

namespace {

DeviceInfo host_device(const gpuplug::PluginRegistry& registry) {
  for (const auto& p : registry.plugins()) {
    if (p.name == "host" && p.state == gpuplug::PluginState::available) return p.devices.at(0);
  }
  BOOST_FAIL("host is not available");
  return {};
}

bool is_uuid(const std::string& u) {
  if (u.size() != 36) return false;
  for (std::size_t i = 0; i < u.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (u[i] == '-')) return false;
    if (!dash && !((u[i] >= '0' && u[i] <= '9') || (u[i] >= 'a' && u[i] <= 'f'))) return false;
  }
  return true;
}

bool has_machine_id() {
  return fs::exists("/etc/machine-id") || fs::exists("/var/lib/dbus/machine-id");
}

fs::path host_module_file(const std::string& module) {
  const fs::path dir = fs::path(GPUPLUG_TEST_KERNEL_DIR) / "host";
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().stem() == module) return entry.path();
  }
  BOOST_FAIL("no host kernel module '" << module << "' in " << dir);
  return {};
}

}  // namespace

// ---- the host plugin -------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(host_reports_its_identity_and_capabilities) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  const DeviceInfo d = host_device(registry);
  BOOST_TEST(d.device_class == DeviceClass::cpu);
  BOOST_TEST(!d.pci.has_value());
  BOOST_TEST(d.pci_vendor_id == 0u);
  BOOST_TEST(d.warp_size == 1u);
  BOOST_TEST(d.max_shared_memory_per_block == 64u << 20);
  utsname u{};
  BOOST_TEST_REQUIRE(uname(&u) == 0);
  BOOST_TEST(d.driver_version == std::string(u.release));
  BOOST_TEST(d.arch.rfind(u.machine, 0) == 0u, d.arch);
#if defined(__x86_64__)
  // x86-64-v2 at least on anything that runs this build (SSE4.2 and POPCNT since 2008).
  BOOST_TEST((d.arch == "x86_64-v2" || d.arch == "x86_64-v3" || d.arch == "x86_64-v4"), d.arch);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd"))
    BOOST_TEST(d.arch == "x86_64-v4");
#endif
  if (has_machine_id()) {
    BOOST_TEST(is_uuid(d.uuid), d.uuid);
    BOOST_TEST(d.uuid[14] == '8', "not an RFC 9562 version-8 UUID: " << d.uuid);
  }
}

// The id is derived, not random: the same in another registry, in the isolated probe's child
// process and from a live backend, from many threads at once.
BOOST_AUTO_TEST_CASE(host_uuid_is_stable_across_processes_and_threads) {
  gpuplug::PluginRegistry isolated;
  isolated.discover({gpuplug::ProbeMode::isolated, std::nullopt});
  gpuplug::PluginRegistry in_process;
  in_process.discover({gpuplug::ProbeMode::in_process, std::nullopt});
  const DeviceInfo a = host_device(isolated);
  const DeviceInfo b = host_device(in_process);
  BOOST_TEST(a.uuid == b.uuid);
  // Every ABI 1.1 field crosses the isolated probe's record intact.
  BOOST_TEST(a.arch == b.arch);
  BOOST_TEST(a.driver_version == b.driver_version);
  BOOST_TEST(a.warp_size == b.warp_size);
  BOOST_TEST(a.max_shared_memory_per_block == b.max_shared_memory_per_block);
  BOOST_TEST(a.device_class == b.device_class);
  BOOST_TEST(a.concurrent_managed_access == b.concurrent_managed_access);
  auto backend = in_process.create("host");
  std::vector<std::thread> threads;
  std::vector<std::string> seen(8);
  for (std::size_t i = 0; i < seen.size(); ++i)
    threads.emplace_back([&, i] { seen[i] = backend->device_info().uuid; });
  for (auto& t : threads) t.join();
  for (const auto& s : seen) BOOST_TEST(s == a.uuid);
}

BOOST_AUTO_TEST_CASE(host_refuses_more_shared_memory_than_it_reports) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  // One worker: each one taking part in a launch allocates the block's shared memory.
  auto gpu = registry.create("host", {{"threads", "1"}});
  const std::uint64_t limit = gpu->device_info().max_shared_memory_per_block;
  gpu->load_module_file("axpy", host_module_file("axpy"));
  const gpuplug::KernelHandle k = gpu->kernel("axpy", "axpy");
  const gpuplug::DevicePtr dx = gpu->alloc(4), dy = gpu->alloc(4);
  const std::uint32_t n = 1;
  const Error e = [&] {
    try {
      gpu->launch_args(k, {1, 1, 1}, {1, 1, 1}, static_cast<std::uint32_t>(limit + 1), {}, n, 1.0f,
                       dx.value, dy.value);
    } catch (const Error& err) {
      return err;
    }
    BOOST_FAIL("a launch over the shared memory limit was accepted");
    return Error(Status::success, "", "");
  }();
  BOOST_TEST(e.status() == Status::invalid_argument);
  BOOST_TEST(contains(e.what(), std::to_string(limit + 1) + " shared bytes"), e.what());
  // At the limit it runs.
  gpu->launch_args(k, {1, 1, 1}, {1, 1, 1}, static_cast<std::uint32_t>(limit), {}, n, 1.0f,
                   dx.value, dy.value);
  gpu->synchronize();
  gpu->free(dx);
  gpu->free(dy);
}

// ---- a plugin built against ABI 1.0 ---------------------------------------------------------

// Its device description ends at GPUPLUG_DEVICE_INFO_V1_0_FULL_SIZE with garbage past it: the
// core reads the 1.0 fields and leaves every 1.1 field at its "not reported" default, in both
// the discovery path (describe_device, in process and through the isolated probe's record) and
// a live backend's device_info.
BOOST_AUTO_TEST_CASE(a_1_0_plugin_reports_the_defaults) {
  for (const auto mode : {gpuplug::ProbeMode::in_process, gpuplug::ProbeMode::isolated}) {
    BOOST_TEST_CONTEXT((mode == gpuplug::ProbeMode::in_process ? "in process" : "isolated")) {
      gpuplug::PluginRegistry registry;
      registry.discover();
      const DeviceInfo real = host_device(registry);
      const gpuplug::PluginInfo info =
          registry.add_plugin_file(GPUPLUG_TEST_OLD_INFO_PLUGIN, {mode, std::nullopt});
      BOOST_TEST_REQUIRE(info.state == gpuplug::PluginState::available, info.message);
      BOOST_TEST_REQUIRE(info.devices.size() == 1u);
      auto backend = registry.create("host_info_v1_0");
      for (const DeviceInfo& d : {info.devices[0], backend->device_info()}) {
        BOOST_TEST(d.name == real.name);  // the 1.0 fields are read
        BOOST_TEST(d.uuid == real.uuid);
        BOOST_TEST(d.arch == real.arch);
        BOOST_TEST(d.concurrent_managed_access);
        BOOST_TEST(!d.pci.has_value());  // the 1.1 fields are not, garbage and all
        BOOST_TEST(d.pci_vendor_id == 0u);
        BOOST_TEST(d.warp_size == 0u);
        BOOST_TEST(d.max_shared_memory_per_block == 0u);
        BOOST_TEST(d.driver_version.empty());
        BOOST_TEST(d.runtime_version.empty());
        BOOST_TEST(d.device_class == DeviceClass::unknown);
        BOOST_TEST(d.peak_gflops == 0u);
      }
    }
  }
}

// ---- selectors by uuid= and pci= ------------------------------------------------------------

BOOST_AUTO_TEST_CASE(parse_uuid_and_pci_items) {
  const auto items = parse_selector(
      "cuda:uuid=GPU-8932f937-d72c-4106-c12f-20bd9faed9f6!, "
      "hip:pci=0000:c1:00.0,hip:pci=C1:1f.7,cuda:pci=00010000:02:00.1");
  BOOST_TEST_REQUIRE(items.size() == 4u);
  BOOST_TEST(items[0].name == "cuda");
  BOOST_TEST(items[0].uuid.value() == "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6");
  BOOST_TEST(items[0].required);
  BOOST_TEST(!items[0].ordinal.has_value());
  BOOST_TEST(!items[0].pci.has_value());
  BOOST_TEST((items[1].pci.value() == PciAddress{0, 0xc1, 0, 0}));
  BOOST_TEST(!items[1].required);
  BOOST_TEST((items[2].pci.value() == PciAddress{0, 0xc1, 0x1f, 7}));  // short form: domain 0
  BOOST_TEST((items[3].pci.value() == PciAddress{0x10000, 2, 0, 1}));
  BOOST_TEST(gpuplug::to_string(*items[3].pci) == "10000:02:00.1");
}

BOOST_AUTO_TEST_CASE(malformed_uuid_and_pci_values_name_the_selector) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"host:uuid=", "empty uuid"},
      {"host:uuid=GPU 1", "a letter, a digit or '-'"},
      {"host:uuid=" + std::string(64, 'a'), "longer than 63"},
      {"host:pci=", "empty PCI address"},
      {"hip:pci=c1:00", "domain:bus:device.function"},
      {"hip:pci=c1:20.0", "device at most 1f"},
      {"hip:pci=c1:00.8", "function at most 7"},
      {"hip:pci=123:c1:00.0:1", "domain:bus:device.function"},
      {"hip:pci=0000:c1:00.0x", "domain:bus:device.function"},
      {"hip:pci=000000000:c1:00.0", "domain:bus:device.function"},
      {"auto:uuid=abc", "names a device for 'auto'"},
      {"Hip:pci=c1:00.0", "bad character in the name"},
      {":pci=c1:00.0", "no backend name"},
  };
  for (const auto& [selector, why] : cases) {
    BOOST_TEST_CONTEXT(selector) {
      const std::string what =
          error_of([&] { parse_selector(selector); }, Status::invalid_argument).what();
      BOOST_TEST(contains(what, "'" + selector + "'"), what);
      BOOST_TEST(contains(what, why), what);
    }
  }
  // Other options in a selector are still options, with where they go.
  const std::string option =
      error_of([&] { parse_selector("host:threads=4"); }, Status::invalid_argument).what();
  BOOST_TEST(contains(option, "holds an option ('threads=4')"), option);
}

BOOST_AUTO_TEST_CASE(host_is_selected_by_its_uuid) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  const DeviceInfo d = host_device(registry);
  if (d.uuid.empty()) {
    BOOST_TEST(!has_machine_id());  // no id only where the machine has none
    return;
  }
  BOOST_TEST(registry.select("host:uuid=" + d.uuid).chosen == "host:0");
  std::string upper = d.uuid;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  BOOST_TEST(registry.select("host:uuid=" + upper + "!").chosen == "host:0");
  BOOST_TEST(registry.select("host:uuid=GPU-" + d.uuid).chosen ==
             "host:0");  // the prefix is optional

  // A uuid that is not there: not_found, listing the devices that are.
  const std::string other = "00000000-0000-8000-8000-000000000000";
  const std::string what =
      error_of([&] { registry.create("host:uuid=" + other); }, Status::not_found).what();
  BOOST_TEST(contains(what, "host:uuid=" + other + ": no such device"), what);
  BOOST_TEST(contains(what, "host has 0 (uuid " + d.uuid + ", pci none)"), what);
  // Required, at once; as a fallback, the next item is used.
  error_of([&] { registry.create("host:uuid=" + other + "!,host"); }, Status::not_found).what();
  const auto fallback = registry.select("host:uuid=" + other + ",host");
  BOOST_TEST(fallback.chosen == "host:0");
  BOOST_TEST_REQUIRE(fallback.passed_over.size() == 1u);
  BOOST_TEST(contains(fallback.passed_over[0], "no such device"), fallback.passed_over[0]);
}

BOOST_AUTO_TEST_CASE(a_pci_address_the_host_lacks_is_not_found) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  const std::string what =
      error_of([&] { registry.create("host:pci=c1:00.0"); }, Status::not_found).what();
  BOOST_TEST(contains(what, "host:pci=0000:c1:00.0: no such device (host has 0 (uuid "), what);
  BOOST_TEST(contains(what, "pci none)"), what);
}
