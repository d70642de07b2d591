// SPDX-License-Identifier: Apache-2.0
// libgpuplug-hip.so against fake HIP runtimes: the plugin's device logic, run where no AMD GPU is.

// CTest runs this twice, with LD_LIBRARY_PATH on one of the fakes built beside it (the
// plugin dlopens "libamdhip64.so" first, so the fake wins over an installed runtime) and
// GPUPLUG_TEST_FAKE_HIP naming it:
//   full:    two fake GPUs (gfx90a:sramecc+:xnack- with managed memory, gfx1030 without); every
//            hook of HipDevice runs, including per-thread hipSetDevice, stream checks, module
//            loading from the real kernels/hip bundles, published globals, error mapping, the
//            XNACK warning, pointers the ledger does not know and the sweep at destroy;
//   too_old: a runtime without hipModuleGetGlobal, reported as "driver too old";
//   no_events: full without the event entry points (hipEvent*, hipStreamWaitEvent): the plugin
//            loads and works, and reports events unsupported naming the missing one;
//   no_graphs: full without the graph entry points (hipStreamBeginCapture, hipGraph*, ...): the
//            plugin loads and works, and reports graphs unsupported naming the missing one.

#define BOOST_TEST_MODULE test_hip_fake_runtime
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <memory>
#include <thread>
#include <vector>

#include <gpuplug/gpuplug.hpp>

#include "../gpu_graph_cases.hpp"
#include "../memory_cases.hpp"
#include "../plugin_table_harness.hpp"

using namespace gpuplug::test;  // NOLINT(google-build-using-namespace): the harness is the test's

std::filesystem::path gpuplug::test::plugin_under_test() {
  return GPUPLUG_TEST_PLUGIN_DIR "/libgpuplug-hip.so";
}

namespace {

std::string scenario() {
  const char* s = std::getenv("GPUPLUG_TEST_FAKE_HIP");
  return s != nullptr ? s : "";
}

boost::test_tools::assertion_result is_full_fake(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result ok(scenario() == "full");
  ok.message() << "GPUPLUG_TEST_FAKE_HIP is '" << scenario() << "'";
  return ok;
}

// A function, not a lambda: GCC 12 warns about boost::function copying an empty closure.
boost::unit_test::precondition full_fake() { return boost::unit_test::precondition(&is_full_fake); }

}  // namespace

BOOST_AUTO_TEST_CASE(the_fake_runtime_is_the_one_probed) {
  const gpuplug_probe_result_t r = probe();
  BOOST_TEST_MESSAGE("scenario '" << scenario() << "': reason " << r.reason << ": " << r.message);
  const std::string message = r.message;
  if (scenario() == "too_old") {
    BOOST_TEST(r.reason == GPUPLUG_PROBE_DRIVER_TOO_OLD);
    BOOST_TEST(contains(message, "driver too old: libamdhip64.so lacks hipModuleGetGlobal"),
               message);
    char error[512] = {};
    gpuplug_instance_t inst = nullptr;
    BOOST_TEST(table().create(0, nullptr, 0, nullptr, &inst, error, sizeof error) ==
               GPUPLUG_STATUS_UNAVAILABLE);
    BOOST_TEST(contains(error, "hipModuleGetGlobal"), error);
    return;
  }
  BOOST_TEST_REQUIRE((scenario() == "full" || scenario() == "no_events" ||
                      scenario() == "no_graphs"),
                     "set GPUPLUG_TEST_FAKE_HIP to full, too_old, no_events or no_graphs");
  BOOST_TEST(r.reason == GPUPLUG_PROBE_AVAILABLE);
  BOOST_TEST(r.device_count == 2u);
  BOOST_TEST(contains(message, "HIP runtime 6.0 (libamdhip64.so), 2 devices"), message);
}

BOOST_AUTO_TEST_CASE(devices_are_described, *full_fake()) {
  gpuplug_device_info_t d0{};
  d0.struct_size = sizeof d0;
  BOOST_TEST_REQUIRE(table().describe_device(0, &d0) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(std::string(d0.name) == "Fake AMD GPU 0");
  BOOST_TEST(std::string(d0.arch) == "gfx90a:sramecc+:xnack-");
  BOOST_TEST(std::string(d0.uuid) == "GPU-0123456789abcdef");
  BOOST_TEST(d0.compute_units == 104u);
  BOOST_TEST(d0.managed_memory == 1u);
  BOOST_TEST(d0.total_memory == (std::uint64_t{1} << 30));
  BOOST_TEST(d0.free_memory == d0.total_memory);

  gpuplug_device_info_t d1{};
  d1.struct_size = sizeof d1;
  BOOST_TEST_REQUIRE(table().describe_device(1, &d1) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(std::string(d1.arch) == "gfx1030");
  BOOST_TEST(d1.managed_memory == 0u);
  BOOST_TEST(d1.compute_units == 105u);

  // ABI 1.1 identity from the fake's answers (fake_amdhip64.cpp).
  BOOST_TEST(d0.struct_size == GPUPLUG_DEVICE_INFO_V1_1_SIZE);
  BOOST_TEST(d0.has_pci == 1u);
  BOOST_TEST((d0.pci_domain == 0u && d0.pci_bus == 0xc1u && d0.pci_device == 0u &&
              d0.pci_function == 0u));
  BOOST_TEST((d1.pci_domain == 1u && d1.pci_bus == 2u));
  BOOST_TEST(d0.pci_vendor_id == 0x1002u);
  BOOST_TEST(d0.warp_size == 64u);
  BOOST_TEST(d1.warp_size == 32u);
  BOOST_TEST(d0.max_shared_memory_per_block == 65536u);
  BOOST_TEST(std::string(d0.driver_version) == "6.1.41134");
  BOOST_TEST(std::string(d0.runtime_version) == "6.0.32830");
  BOOST_TEST(d0.device_class == GPUPLUG_DEVICE_CLASS_DISCRETE_GPU);
  BOOST_TEST(d1.device_class == GPUPLUG_DEVICE_CLASS_INTEGRATED_GPU);

  gpuplug_device_info_t none{};
  none.struct_size = sizeof none;
  BOOST_TEST(table().describe_device(2, &none) == GPUPLUG_STATUS_UNAVAILABLE);
  // The slot has no error buffer: the SDK's one device check puts its message in `name`.
  BOOST_TEST(std::string(none.name) == "no device 2: hip has 2 devices");
  char error[512] = {};
  gpuplug_instance_t inst = nullptr;
  BOOST_TEST(table().create(2, nullptr, 0, nullptr, &inst, error, sizeof error) ==
             GPUPLUG_STATUS_UNAVAILABLE);
  BOOST_TEST(contains(error, "no device"), error);  // the SDK or the plugin, both name it
  BOOST_TEST(contains(error, "2"), error);
}

BOOST_AUTO_TEST_CASE(axpy_runs_and_each_thread_gets_the_device_made_current, *full_fake()) {
  // Device 1 on purpose: a fresh thread starts on device 0, so every hook must switch.
  Instance dev(1);
  const std::uint32_t n = 1000;
  const float alpha = 2.0f;
  std::vector<float> x(n), y(n);
  for (std::uint32_t i = 0; i < n; ++i) x[i] = float(i), y[i] = 1.0f;
  std::uint64_t dx = dev.alloc(n * 4), dy = dev.alloc(n * 4);
  dev.ok(dev.t.copy_h2d(dev.inst, dx, x.data(), n * 4), "copy_h2d");
  std::thread([&] {
    dev.ok(dev.t.copy_h2d(dev.inst, dy, y.data(), n * 4), "copy_h2d (thread)");
  }).join();
  std::uint64_t f = 0;
  // From the default modules_dir, <plugin dir>/../kernels/hip/axpy.hsaco; gfx1030 is in it.
  dev.ok(dev.t.get_function(dev.inst, "axpy", "axpy", &f), "get_function axpy");
  void* params[] = {const_cast<std::uint32_t*>(&n), const_cast<float*>(&alpha), &dx, &dy};
  std::thread([&] {
    dev.ok(dev.t.launch(dev.inst, f, {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, 0, params),
           "launch (thread)");
  }).join();
  std::vector<float> got(n);
  dev.ok(dev.t.copy_d2h(dev.inst, got.data(), dy, n * 4), "copy_d2h");
  std::size_t bad = 0;
  for (std::uint32_t i = 0; i < n; ++i) bad += got[i] != alpha * x[i] + 1.0f ? 1 : 0;
  BOOST_TEST(bad == 0u);

  // A second backend on device 0 in the same thread: each switches to its own device.
  Instance other(0);
  const std::uint64_t p = other.alloc(64);
  dev.ok(dev.t.copy_d2d(dev.inst, dx, dy, 64), "copy_d2d on device 1 after device 0");
  other.ok(other.t.free(other.inst, p), "free on device 0 after device 1");

  // A missing kernel names what the module has.
  std::uint64_t missing = 0;
  BOOST_TEST(dev.t.get_function(dev.inst, "axpy", "axpy_f16", &missing) ==
             GPUPLUG_STATUS_NOT_FOUND);
  BOOST_TEST(contains(dev.last_error(), "axpy_f16"), dev.last_error());
  BOOST_TEST(contains(dev.last_error(), "axpy"), dev.last_error());
  BOOST_TEST(dev.t.get_function(dev.inst, "gemm", "gemm_f16", &missing) ==
             GPUPLUG_STATUS_NOT_FOUND);
  BOOST_TEST(contains(dev.last_error(), "gemm_a_e4m3, gemm_f32"), dev.last_error());
}

BOOST_AUTO_TEST_CASE(published_globals_are_found_with_their_size, *full_fake()) {
  Instance dev(0);
  for (const char* name : {"gemm_f32_n_tile", "gemm_a_e4m3_n_tile", "gemm_a_e4m3_a_e4m3"}) {
    std::uint64_t address = 0, size = 0;
    dev.ok(dev.t.get_global(dev.inst, "gemm", name, &address, &size), name);
    BOOST_TEST(size == 4u);
    std::uint32_t value = 0;
    dev.ok(dev.t.copy_d2h(dev.inst, &value, address, 4), name);
    BOOST_TEST(value == (contains(name, "n_tile") ? 64u : 1u), name);
  }
  std::uint64_t address = 0, size = 0;
  BOOST_TEST(dev.t.get_global(dev.inst, "gemm", "gemm_f16_n_tile", &address, &size) ==
             GPUPLUG_STATUS_NOT_FOUND);
}

BOOST_AUTO_TEST_CASE(streams_are_checked_and_ordered_work_lands, *full_fake()) {
  Instance dev(0);
  std::uint64_t stream = 0;
  dev.ok(dev.t.stream_create(dev.inst, &stream), "stream_create");
  const std::uint64_t a = dev.alloc(4096), b = dev.alloc(4096);
  std::vector<std::uint8_t> host(4096, 0);
  dev.ok(dev.t.memset_d8(dev.inst, a, 0x5A, 4096, stream), "memset_d8");
  dev.ok(dev.t.copy_d2d_async(dev.inst, b, a, 4096, stream), "copy_d2d_async");
  dev.ok(dev.t.copy_d2h_async(dev.inst, host.data(), b, 4096, stream), "copy_d2h_async");
  dev.ok(dev.t.stream_synchronize(dev.inst, stream), "stream_synchronize");
  BOOST_TEST(std::count(host.begin(), host.end(), 0x5A) == 4096);
  dev.ok(dev.t.copy_h2d_async(dev.inst, a, host.data(), 16, 0), "copy_h2d_async default stream");
  dev.ok(dev.t.synchronize(dev.inst), "synchronize");

  BOOST_TEST(dev.t.memset_d8(dev.inst, a, 0, 16, 0xBAD) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(dev.last_error(), "unknown stream 2989"), dev.last_error());  // 0xBAD
  BOOST_TEST(dev.t.stream_destroy(dev.inst, 0) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  dev.ok(dev.t.stream_destroy(dev.inst, stream), "stream_destroy");
  BOOST_TEST(dev.t.stream_destroy(dev.inst, stream) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(dev.t.stream_synchronize(dev.inst, stream) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  // A stream left open is destroyed with the backend.
  std::uint64_t open = 0;
  dev.ok(dev.t.stream_create(dev.inst, &open), "stream_create (left open)");
}

BOOST_AUTO_TEST_CASE(pointers_the_ledger_does_not_know_must_be_this_device_s, *full_fake()) {
  // The SDK checks every copy and memset against the ledger, the module globals, then
  // hipPointerGetAttributes (and hipMemGetAddressRange): memory of another device, host memory
  // and overruns of foreign allocations are refused before the runtime sees them, with the SDK's
  // message rather than a runtime error.
  Instance dev(0), same_device(0), other_device(1);
  std::vector<std::uint8_t> host(256, 7);
  const auto refused = [&](gpuplug_status_t s, const std::string& what) {
    BOOST_TEST(s == GPUPLUG_STATUS_INVALID_ARGUMENT, what);
    BOOST_TEST(contains(dev.last_error(), "is not memory of this device"), dev.last_error());
    BOOST_TEST(!contains(dev.last_error(), "hipError"), dev.last_error());
  };
  const std::uint64_t elsewhere = other_device.alloc(256);
  refused(dev.t.copy_h2d(dev.inst, elsewhere, host.data(), 16), "copy_h2d to device 1 memory");
  refused(dev.t.copy_d2h(dev.inst, host.data(), elsewhere, 16), "copy_d2h from device 1 memory");
  refused(dev.t.memset_d8(dev.inst, elsewhere, 0, 16, 0), "memset_d8 of device 1 memory");
  const auto on_host = reinterpret_cast<std::uint64_t>(host.data());
  refused(dev.t.copy_d2h(dev.inst, host.data(), on_host, 16), "copy_d2h from host memory");
  refused(dev.t.copy_h2d(dev.inst, 0x1000, host.data(), 16), "copy_h2d to 0x1000");

  // Memory of the same device from another backend is the runtime's to judge: accepted, within
  // the allocation the runtime knows.
  const std::uint64_t shared = same_device.alloc(256);
  dev.ok(dev.t.copy_h2d(dev.inst, shared + 16, host.data(), 64), "copy_h2d into a foreign buffer");
  std::vector<std::uint8_t> back(64, 0);
  dev.ok(dev.t.copy_d2h(dev.inst, back.data(), shared + 16, 64), "copy_d2h from a foreign buffer");
  BOOST_TEST(std::count(back.begin(), back.end(), 7) == 64);
  refused(dev.t.copy_h2d(dev.inst, shared + 128, host.data(), 256), "overrun of a foreign buffer");
  same_device.ok(same_device.t.free(same_device.inst, shared), "free");
  refused(dev.t.copy_h2d(dev.inst, shared, host.data(), 16), "copy_h2d to a freed foreign buffer");
  other_device.ok(other_device.t.free(other_device.inst, elsewhere), "free");
}

BOOST_AUTO_TEST_CASE(managed_memory_follows_the_device_and_warns_once_without_xnack, *full_fake()) {
  Instance xnack_off(0);
  std::uint64_t p = 0, q = 0;
  xnack_off.ok(xnack_off.t.alloc_managed(xnack_off.inst, 4096, "test", &p), "alloc_managed");
  xnack_off.ok(xnack_off.t.alloc_managed(xnack_off.inst, 4096, "test", &q), "alloc_managed");
  BOOST_TEST(xnack_off.log.count(GPUPLUG_LOG_WARNING, "XNACK off") == 1u);
  xnack_off.ok(xnack_off.t.free(xnack_off.inst, p), "free managed");
  xnack_off.ok(xnack_off.t.free(xnack_off.inst, q), "free managed");

  Instance none(1);
  BOOST_TEST(none.t.alloc_managed(none.inst, 4096, "test", &p) == GPUPLUG_STATUS_UNSUPPORTED);
  BOOST_TEST(contains(none.last_error(), "hipDeviceAttributeManagedMemory is 0"),
             none.last_error());
}

BOOST_AUTO_TEST_CASE(runtime_errors_carry_the_operation_and_hip_s_words, *full_fake()) {
  Instance dev(0);
  std::uint64_t p = 0;
  BOOST_TEST(dev.t.alloc(dev.inst, std::uint64_t{2} << 30, "too big", &p) ==
             GPUPLUG_STATUS_OUT_OF_MEMORY);
  BOOST_TEST(contains(dev.last_error(),
                      "hipMalloc(2147483648 bytes): hipErrorOutOfMemory "
                      "(out of memory)"),
             dev.last_error());

  std::uint64_t f = 0;
  dev.ok(dev.t.get_function(dev.inst, "activation", "bias_relu", &f), "bias_relu");
  BOOST_TEST(dev.t.launch(dev.inst, f, {0, 1, 1}, {256, 1, 1}, 0, 0, nullptr) ==
             GPUPLUG_STATUS_LAUNCH_FAILED);
  BOOST_TEST(contains(dev.last_error(),
                      "hipModuleLaunchKernel(grid 0x1x1, block 256x1x1, 0 "
                      "shared bytes): hipErrorInvalidConfiguration"),
             dev.last_error());

  const std::string junk = "not a code object at all";
  BOOST_TEST(dev.t.load_module(dev.inst, "junk", junk.data(), junk.size()) ==
             GPUPLUG_STATUS_INVALID_IMAGE);
  BOOST_TEST(contains(dev.last_error(), "module junk: not a HIP code object"), dev.last_error());

  const auto image = read_file_or_fail(std::string(GPUPLUG_TEST_KERNEL_DIR) + "/hip/e4m3.hsaco");
  BOOST_TEST_REQUIRE(image.size() > 4096u);
  BOOST_TEST(dev.t.load_module(dev.inst, "cut", image.data(), 4096) ==
             GPUPLUG_STATUS_INVALID_IMAGE);
  BOOST_TEST(contains(dev.last_error(), "module cut: malformed clang offload bundle"),
             dev.last_error());
  dev.ok(dev.t.load_module(dev.inst, "cast", image.data(), image.size()), "load_module bytes");
  dev.ok(dev.t.get_function(dev.inst, "cast", "cast_f32_e4m3", &f), "cast_f32_e4m3");
}

BOOST_AUTO_TEST_CASE(destroy_sweeps_what_was_left_on_the_right_device, *full_fake()) {
  {
    Instance leaky(1);
    leaky.alloc(1 << 20);
    leaky.alloc(1 << 10);
  }  // destroy: the SDK sweeps through HipDevice::vendor_free, which must make device 1 current
  Instance probe_dev(1);
  std::uint64_t free_bytes = 0, total = 0;
  probe_dev.ok(probe_dev.t.memory_info(probe_dev.inst, &free_bytes, &total), "memory_info");
  BOOST_TEST(free_bytes == total);
}

// Through the core: the registry's view of both fake devices (discovery probes in a child
// process, so the fields cross the probe record), and selectors by PCI address and uuid.
BOOST_AUTO_TEST_CASE(selectors_name_fake_devices_by_pci_and_uuid, *full_fake()) {
  gpuplug::PluginRegistry registry;
  const gpuplug::PluginInfo info = registry.add_plugin_file(plugin_under_test());
  BOOST_TEST_REQUIRE((info.state == gpuplug::PluginState::available), info.message);
  BOOST_TEST_REQUIRE(info.devices.size() == 2u);
  BOOST_TEST((info.devices[0].pci.value() == gpuplug::PciAddress{0, 0xc1, 0, 0}));
  BOOST_TEST((info.devices[1].pci.value() == gpuplug::PciAddress{1, 2, 0, 0}));
  BOOST_TEST((info.devices[1].device_class == gpuplug::DeviceClass::integrated_gpu));
  BOOST_TEST(info.devices[0].driver_version == "6.1.41134");

  BOOST_TEST(registry.select("hip:pci=0000:c1:00.0").chosen == "hip:0");
  BOOST_TEST(registry.select("hip:pci=c1:00.0").chosen == "hip:0");  // the short form
  BOOST_TEST(registry.select("hip:pci=0001:02:00.0!").chosen == "hip:1");
  BOOST_TEST(registry.select("hip:uuid=GPU-fedcba9876543210").chosen == "hip:1");
  auto backend = registry.create("hip:pci=1:02:00.0");
  BOOST_TEST(gpuplug::to_string(backend->device_info().pci.value()) == "0001:02:00.0");

  // Not there: not_found, listing the devices that are with their uuid and address.
  try {
    registry.create("hip:pci=0000:c3:00.0");
    BOOST_FAIL("an absent PCI address was selected");
  } catch (const gpuplug::Error& e) {
    const std::string what = e.what();
    BOOST_TEST((e.status() == gpuplug::Status::not_found));
    BOOST_TEST(contains(what, "hip:pci=0000:c3:00.0: no such device (hip has "
                              "0 (uuid GPU-0123456789abcdef, pci 0000:c1:00.0); "
                              "1 (uuid GPU-fedcba9876543210, pci 0001:02:00.0))"),
               what);
  }
}

// Kernel preflight through the plugin's slot: each fake device's gcnArchName, read
// from the runtime, picks its own code object of the built gemm bundle; no module is loaded.
BOOST_AUTO_TEST_CASE(inspect_module_picks_each_device_s_code_object, *full_fake()) {
  std::string why;
  const auto image = gpuplug::support::read_file(
      std::string(GPUPLUG_TEST_KERNEL_DIR) + "/hip/gemm.hsaco", why);
  BOOST_TEST_REQUIRE(image.has_value(), why);
  BOOST_TEST_REQUIRE(table().inspect_module != nullptr);
  auto out = std::make_unique<gpuplug_module_inspection_t>();
  const char* const expected[] = {"gfx90a:xnack-", "gfx1030"};  // device 0: xnack- (see the fake)
  for (std::uint32_t ordinal = 0; ordinal < 2; ++ordinal) {
    BOOST_TEST_CONTEXT("device " << ordinal) {
      out->struct_size = sizeof *out;
      BOOST_TEST_REQUIRE(table().inspect_module(ordinal, image->data(), image->size(), out.get()) ==
                         GPUPLUG_STATUS_SUCCESS);
      // The sanitizer presets build the bundles for fewer processors (GPUPLUG_HIP_TARGETS in
      // CMakePresets.json): there gfx1030 is not in the image, and the answer must say so.
      const std::string targets = " " + std::string(out->targets) + " ";
      if (contains(targets, " " + std::string(expected[ordinal]) + " ")) {
        BOOST_TEST(out->loadable == 1);
        BOOST_TEST(std::string(out->target) == expected[ordinal]);
      } else {
        BOOST_TEST(out->loadable == 0);
        BOOST_TEST(contains(out->reason, std::string("no code object for ") + expected[ordinal]),
                   out->reason);
      }
      BOOST_TEST(std::string(out->format) == "offload bundle");
      BOOST_TEST(std::string(out->functions) == "gemm_a_e4m3\ngemm_f32");
      BOOST_TEST(contains(out->symbols, "gemm_f32_n_tile=64"), out->symbols);
    }
  }
  out->struct_size = sizeof *out;
  BOOST_TEST(table().inspect_module(2, image->data(), image->size(), out.get()) ==
             GPUPLUG_STATUS_UNAVAILABLE);
  BOOST_TEST(out->reason[0] != '\0');
  BOOST_TEST(table().inspect_module(0, image->data(), 100, out.get()) ==
             GPUPLUG_STATUS_INVALID_IMAGE);
  BOOST_TEST(contains(out->reason, "malformed clang offload bundle"), out->reason);
}

// ABI 1.1 events: hipEvent* and hipStreamWaitEvent with the device current on every thread (the
// fake refuses events of another device), handles checked by the SDK before the runtime sees
// them, events left open destroyed with the backend.
BOOST_AUTO_TEST_CASE(events_run_on_the_device_and_bad_handles_never_reach_the_runtime,
                     *full_fake()) {
  BOOST_TEST_REQUIRE(probe().reason == GPUPLUG_PROBE_AVAILABLE);  // the plugin has loaded the fake
  void* fake = dlopen("libamdhip64.so", RTLD_NOW | RTLD_NOLOAD);
  BOOST_TEST_REQUIRE(fake != nullptr);
  const auto calls =
      reinterpret_cast<std::size_t (*)()>(dlsym(fake, "gpuplug_fake_hip_event_calls"));
  BOOST_TEST_REQUIRE(calls != nullptr);
  Instance dev(1);  // device 1: a thread's default device is 0, so hipSetDevice must run
  Instance other(0);
  std::uint64_t a = 0, b = 0, stream = 0, foreign = 0;
  dev.ok(dev.t.stream_create(dev.inst, &stream), "stream_create");
  dev.ok(dev.t.event_create(dev.inst, &a), "event_create");
  other.ok(other.t.event_create(other.inst, &foreign), "event_create (device 0)");
  std::thread([&] {  // another thread, never told about device 1
    dev.ok(dev.t.event_create(dev.inst, &b), "event_create");
    const std::uint64_t buf = dev.alloc(4096);
    dev.ok(dev.t.memset_d8(dev.inst, buf, 0x11, 4096, stream), "memset_d8");
    dev.ok(dev.t.event_record(dev.inst, a, stream), "event_record");
    dev.ok(dev.t.stream_wait_event(dev.inst, 0, a), "stream_wait_event");
    std::int32_t ready = 0;
    dev.ok(dev.t.event_query(dev.inst, a, &ready), "event_query");
    BOOST_TEST(ready == 1);
    dev.ok(dev.t.event_record(dev.inst, b, 0), "event_record (default stream)");
    dev.ok(dev.t.event_synchronize(dev.inst, b), "event_synchronize");
    float ms = -1;
    dev.ok(dev.t.event_elapsed_ms(dev.inst, a, b, &ms), "event_elapsed_ms");
    BOOST_TEST(ms >= 0.0f);
    dev.ok(dev.t.free(dev.inst, buf), "free");
  })
      .join();
  // Bad handles: refused naming the event and the operation; the runtime is not called.
  const std::size_t before = calls();
  BOOST_TEST(dev.t.event_record(dev.inst, foreign, stream) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(dev.last_error(), "event_record: unknown event " + std::to_string(foreign)),
             dev.last_error());
  BOOST_TEST(dev.t.stream_wait_event(dev.inst, 0xBAD, a) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(dev.last_error(), "unknown stream 2989"), dev.last_error());
  dev.ok(dev.t.event_destroy(dev.inst, a), "event_destroy");
  const std::size_t after_destroy = calls();
  BOOST_TEST(after_destroy == before + 1);
  std::int32_t ready = 0;
  BOOST_TEST(dev.t.event_query(dev.inst, a, &ready) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(dev.t.event_destroy(dev.inst, a) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  float ms = 0;
  BOOST_TEST(dev.t.event_elapsed_ms(dev.inst, b, a, &ms) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(dev.last_error(), "event_elapsed_ms (end): unknown event"), dev.last_error());
  BOOST_TEST(calls() == after_destroy);
  // b, the stream and the other instance's event are left open: destroy takes them.
}

BOOST_AUTO_TEST_CASE(a_runtime_without_events_still_loads_and_says_so) {
  if (scenario() != "no_events") return;
  Instance dev(0);
  std::uint64_t e = 0;
  BOOST_TEST(dev.t.event_create(dev.inst, &e) == GPUPLUG_STATUS_UNSUPPORTED);
  BOOST_TEST(contains(dev.last_error(), "events are not supported"), dev.last_error());
  BOOST_TEST(contains(dev.last_error(), "does not provide hipEventCreate"), dev.last_error());
  const std::uint64_t buf = dev.alloc(64);
  dev.ok(dev.t.memset_d8(dev.inst, buf, 1, 64, 0), "memset_d8");
  dev.ok(dev.t.synchronize(dev.inst), "synchronize");
  dev.ok(dev.t.free(dev.inst, buf), "free");
}

// ABI 1.3 graphs: the fake runtime records captures and replays them (tests/unit/
// gpu_graph_cases.hpp, shared with the CUDA plugin's test).
namespace {
GraphVendor hip_vendor() {
  BOOST_TEST_REQUIRE(probe().reason == GPUPLUG_PROBE_AVAILABLE);  // the plugin has loaded the fake
  void* fake = dlopen("libamdhip64.so", RTLD_NOW | RTLD_NOLOAD);
  BOOST_TEST_REQUIRE(fake != nullptr);
  const auto replays =
      reinterpret_cast<std::size_t (*)()>(dlsym(fake, "gpuplug_fake_hip_graph_launches"));
  const auto graphs =
      reinterpret_cast<std::size_t (*)()>(dlsym(fake, "gpuplug_fake_hip_live_graphs"));
  BOOST_TEST_REQUIRE((replays != nullptr && graphs != nullptr));
  return GraphVendor{"hipErrorStreamCaptureUnsupported", "hipErrorStreamCaptureInvalidated",
                     [replays] { return static_cast<long long>(replays()); },
                     [graphs] { return static_cast<long long>(graphs()); }};
}
}  // namespace

BOOST_AUTO_TEST_CASE(synchronize_during_capture_invalidates_and_abort_recovers, *full_fake()) {
  check_synchronize_invalidates_and_abort_recovers(hip_vendor());
}
BOOST_AUTO_TEST_CASE(default_stream_work_follows_stream_flags, *full_fake()) {
  check_default_stream_work_follows_stream_flags();
}
BOOST_AUTO_TEST_CASE(graph_replays_are_counted_and_uploads_staged, *full_fake()) {
  check_replays_are_counted_and_uploads_staged(hip_vendor());
}
BOOST_AUTO_TEST_CASE(a_global_capture_refuses_alloc, *full_fake()) {
  check_global_capture_refuses_alloc(hip_vendor());
}
BOOST_AUTO_TEST_CASE(a_runtime_without_graphs_still_loads_and_says_so) {
  if (scenario() != "no_graphs") return;
  check_graphs_unsupported_without_the_symbols("hipStreamBeginCapture");
}

// Memory you can see through the core on the fake's first device: the same cases as
// on host (tests/unit/memory_cases.hpp), through the HIP plugin's ledger.
namespace {
memory_cases::MakeBackend hip_backend() {
  auto registry = std::make_shared<gpuplug::PluginRegistry>();
  registry->add_plugin_file(plugin_under_test());
  return [registry](const gpuplug::Options& options) {
    return registry->create("hip:0!", options);
  };
}
}  // namespace

BOOST_AUTO_TEST_CASE(memory_snapshot_on_the_fake, *full_fake()) {
  memory_cases::check_snapshot(hip_backend());
}
BOOST_AUTO_TEST_CASE(memory_history_on_the_fake, *full_fake()) {
  memory_cases::check_history(hip_backend());
}
BOOST_AUTO_TEST_CASE(memory_scopes_on_the_fake, *full_fake()) {
  memory_cases::check_scopes(hip_backend());
}
BOOST_AUTO_TEST_CASE(memory_hammer_on_the_fake, *full_fake()) {
  memory_cases::check_hammer(hip_backend());
}
BOOST_AUTO_TEST_CASE(out_of_memory_report_on_the_fake, *full_fake()) {
  memory_cases::check_out_of_memory_report(hip_backend());
}
BOOST_AUTO_TEST_CASE(out_of_memory_observer_on_the_fake, *full_fake()) {
  memory_cases::check_out_of_memory_observer(hip_backend());
}
BOOST_AUTO_TEST_CASE(model_cache_scratch_on_the_fake, *full_fake()) {
  memory_cases::check_model_cache_scratch(hip_backend());
}
BOOST_AUTO_TEST_CASE(out_of_memory_in_scratch_on_the_fake, *full_fake()) {
  memory_cases::check_out_of_memory_in_scratch(hip_backend());
}

// Native handles and import through the core on the fake's two GPUs: the handles are
// the runtime's own, imports are checked with hipPointerGetAttributes (memory of GPU 1 and host
// memory refused by hip:0), and an imported stream is forgotten, never destroyed.
BOOST_AUTO_TEST_CASE(native_handles_and_imports_on_the_fake, *full_fake()) {
  gpuplug::PluginRegistry registry;
  registry.add_plugin_file(plugin_under_test());
  std::shared_ptr<gpuplug::GpuBackend> gpu = registry.create("hip:0!");
  std::shared_ptr<gpuplug::GpuBackend> owner = registry.create("hip:0!");  // "someone else"
  std::shared_ptr<gpuplug::GpuBackend> gpu1 = registry.create("hip:1!");

  const gpuplug::NativeHandles d = gpu->native();
  BOOST_TEST(d.vendor == "hip");
  BOOST_TEST(d.device == 0);
  BOOST_TEST(d.context == nullptr);
  BOOST_TEST(d.stream == nullptr);
  BOOST_TEST(gpu1->native().device == 1);

  // Memory another party allocated on device 0: imported, on the ledger, copied through.
  const gpuplug::DevicePtr theirs = owner->alloc(256, "owner");
  void* address = owner->native_pointer(theirs);
  BOOST_TEST(address == reinterpret_cast<void*>(theirs.value));
  int released = 0;
  const gpuplug::DevicePtr x = gpu->import_memory(address, 256, [&] { ++released; }, "torch");
  BOOST_TEST(gpu->native_pointer(x + 8) == static_cast<char*>(address) + 8);
  BOOST_TEST(gpu->ledger_stats().live_bytes == 256u);
  std::vector<std::uint8_t> in(256, 5), out(256, 0);
  gpu->copy_h2d(x, in.data(), in.size());
  owner->copy_d2h(out.data(), theirs, out.size());  // the owner sees what gpuplug wrote
  BOOST_TEST(std::count(out.begin(), out.end(), 5) == 256);
  BOOST_CHECK_THROW(gpu->copy_h2d(x + 1, in.data(), in.size()), gpuplug::Error);  // past it
  gpu->free(x);
  BOOST_TEST(released == 1);
  BOOST_TEST(gpu->ledger_stats().live_bytes == 0u);
  owner->copy_d2h(out.data(), theirs, out.size());  // forgotten, never freed: still the owner's

  const auto refused = [&](void* p, std::size_t bytes, const std::string& why) {
    try {
      (void)gpu->import_memory(p, bytes, [&] { ++released; });
      BOOST_FAIL("import of " << why << " was accepted");
    } catch (const gpuplug::Error& e) {
      BOOST_TEST((e.status() == gpuplug::Status::invalid_argument), e.what());
      BOOST_TEST(contains(e.what(), "hip:0"), e.what());
      BOOST_TEST(contains(e.what(), why), e.what());
    }
  };
  refused(static_cast<char*>(address), 512, "runs past the end of its HIP allocation of 256 bytes");
  const gpuplug::DevicePtr on1 = gpu1->alloc(64);
  refused(gpu1->native_pointer(on1), 64, "is memory of HIP device 1, not of hip:0");
  std::vector<char> host(64);
  refused(host.data(), host.size(), "is not memory the HIP runtime knows");
  BOOST_TEST(released == 1);

  // Streams: another backend's stream of device 0 imported, destroyed here, still alive there.
  const gpuplug::Stream theirs_s = owner->create_stream();
  void* native_s = owner->native(theirs_s).stream;
  BOOST_TEST(native_s == reinterpret_cast<void*>(theirs_s.value));  // the hipStream_t
  const gpuplug::Stream s = gpu->import_stream(native_s);
  BOOST_TEST(gpu->native(s).stream == native_s);
  const gpuplug::DevicePtr mine = gpu->alloc(128);
  gpu->memset(mine, 3, 128, s);
  gpu->synchronize(s);
  gpu->destroy_stream(s);
  owner->synchronize(theirs_s);      // the runtime still knows it...
  owner->destroy_stream(theirs_s);   // ...and its owner destroys it (hipStreamDestroy succeeds)
  const gpuplug::Stream s1 = gpu1->create_stream();
  try {
    (void)gpu->import_stream(gpu1->native(s1).stream);
    BOOST_FAIL("a stream of device 1 was imported on hip:0");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST(contains(e.what(), "is not a stream of hip:0"), e.what());
  }
  gpu1->destroy_stream(s1);
  gpu1->free(on1);
  gpu->free(mine);
  owner->free(theirs);
}

#if GPUPLUG_ABI_VERSION_MINOR >= 3
// ABI 1.3 pitched 2D copies: each is one hipMemcpy2DAsync with the kind of its direction (the
// fake counts them and refuses a device row outside the current device's allocations), the
// gaps between rows untouched.
BOOST_AUTO_TEST_CASE(pitched_copies_are_one_hip_memcpy_2d_async_each, *full_fake()) {
  BOOST_TEST_REQUIRE(probe().reason == GPUPLUG_PROBE_AVAILABLE);
  void* fake = dlopen("libamdhip64.so", RTLD_NOW | RTLD_NOLOAD);
  BOOST_TEST_REQUIRE(fake != nullptr);
  const auto copies =
      reinterpret_cast<std::size_t (*)()>(dlsym(fake, "gpuplug_fake_hip_copies_2d"));
  BOOST_TEST_REQUIRE(copies != nullptr);
  Instance dev(1);
  std::uint64_t stream = 0;
  dev.ok(dev.t.stream_create(dev.inst, &stream), "stream_create");
  constexpr std::uint64_t pitch = 64, width = 40, rows = 8;
  const std::uint64_t a = dev.alloc(pitch * rows), b = dev.alloc(pitch * rows);
  std::vector<std::uint8_t> in(pitch * rows), out(pitch * rows, 0xCC);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(i);
  dev.ok(dev.t.memset_d8(dev.inst, b, 0xEE, pitch * rows, stream), "memset_d8");
  const std::size_t before = copies();
  dev.ok(dev.t.copy_h2d_2d_async(dev.inst, a, pitch, in.data(), pitch, width, rows, stream),
         "copy_h2d_2d_async");
  dev.ok(dev.t.copy_d2d_2d_async(dev.inst, b, pitch, a, pitch, width, rows, stream),
         "copy_d2d_2d_async");
  dev.ok(dev.t.copy_d2h_2d_async(dev.inst, out.data(), pitch, b, pitch, pitch, rows, stream),
         "copy_d2h_2d_async");
  dev.ok(dev.t.stream_synchronize(dev.inst, stream), "stream_synchronize");
  BOOST_TEST(copies() - before == 3u);
  for (std::size_t i = 0; i < out.size(); ++i)
    BOOST_TEST(out[i] == (i % pitch < width ? in[i] : 0xEE), "byte " << i);
  dev.ok(dev.t.free(dev.inst, a), "free");
  dev.ok(dev.t.free(dev.inst, b), "free");
  dev.ok(dev.t.stream_destroy(dev.inst, stream), "stream_destroy");
}
#endif
