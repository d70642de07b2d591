// SPDX-License-Identifier: Apache-2.0
// libgpuplug-cuda.so through its C table: loads anywhere, says why CUDA is unusable, and (on a GPU)
// works.

// Runs on both kinds of machine: without libcuda.so.1 it checks the "driver missing" report and
// clean refusals; with a driver and a device it also runs real work against CPU references.
// CTest also runs it against a fake libcuda.so.1 (fake_libcuda.c), once per driver failure.

#define BOOST_TEST_MODULE test_cuda_plugin
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gpuplug/gpuplug.hpp>

#include "gpu_plugin_cases.hpp"

using namespace gpuplug::test;  // NOLINT(google-build-using-namespace): the harness is the test's

std::filesystem::path gpuplug::test::plugin_under_test() {
  return GPUPLUG_TEST_PLUGIN_DIR "/libgpuplug-cuda.so";
}

namespace {

// Whether this machine has a CUDA driver at all, judged independently of the plugin.
bool driver_present() {
  static const bool present = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) != nullptr;
  return present;
}

}  // namespace

// ---- every machine ------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(plugin_loads_without_a_driver_and_names_itself) {
  check_identity("cuda", "NVIDIA");
  // Not linked against the driver: the loader must not have pulled libcuda in with the plugin.
  if (!driver_present()) BOOST_TEST(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) == nullptr);
}

BOOST_AUTO_TEST_CASE(probe_reports_why_cuda_is_or_is_not_usable) {
  const gpuplug_probe_result_t r = probe();
  const std::string message = r.message;
  BOOST_TEST_MESSAGE("probe: reason " << r.reason << ", " << r.device_count
                                      << " devices: " << message);
  BOOST_TEST(!message.empty());
  if (!driver_present()) {
    BOOST_TEST(r.reason == GPUPLUG_PROBE_DRIVER_MISSING);
    BOOST_TEST(contains(message, "driver missing"), message);
    BOOST_TEST(contains(message, "libcuda.so.1"), message);
    BOOST_TEST(r.device_count == 0u);
  } else if (r.reason == GPUPLUG_PROBE_AVAILABLE) {
    BOOST_TEST(r.device_count > 0u);
  } else {
    // A driver without a usable device: one of the typed reasons, never "missing".
    BOOST_TEST(r.reason != GPUPLUG_PROBE_DRIVER_MISSING);
    BOOST_TEST(r.device_count == 0u);
    if (r.reason == GPUPLUG_PROBE_DRIVER_TOO_OLD)
      BOOST_TEST(contains(message, "driver too old"), message);
    if (r.reason == GPUPLUG_PROBE_NO_DEVICE) BOOST_TEST(contains(message, "no device"), message);
  }
  // Runs against tests/unit/fake_libcuda.c set GPUPLUG_TEST_EXPECT_PROBE to
  // "<reason number>|<part of the message>|<another part>...".
  if (const char* expected = std::getenv("GPUPLUG_TEST_EXPECT_PROBE")) {
    std::vector<std::string> parts;
    std::stringstream list(expected);
    for (std::string part; std::getline(list, part, '|');) parts.push_back(part);
    BOOST_TEST_REQUIRE(!parts.empty());
    BOOST_TEST(r.reason == std::stoi(parts[0]));
    for (std::size_t i = 1; i < parts.size(); ++i) BOOST_TEST(contains(message, parts[i]), message);
  }
  check_probe_is_stable(r);
}

BOOST_AUTO_TEST_CASE(create_and_describe_refuse_cleanly_with_the_reason) {
  // With a device, the SDK refuses ordinal == device_count before the plugin's create runs:
  // "no device 1: cuda has 1 device".
  check_create_and_describe_refuse([](std::uint32_t ordinal) {
    return "no device " + std::to_string(ordinal) + ": cuda has " + std::to_string(ordinal) +
           " device";
  });
}

// ---- the fake driver's one device (every machine) ------------------------------------------

namespace {

constexpr const char* kFakeDeviceCase = "primary_context_is_retained_once_and_callers_context_kept";

// The fake libcuda.so.1's folder in the build tree: tests/unit/fake-cuda beside bin/.
std::filesystem::path fake_driver_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::canonical("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe.parent_path().parent_path() / "tests/unit/fake-cuda";
}

// Runs this program's case `test` in a child process against the fake driver in `mode` (the
// driver is loaded once per process); returns its exit status, -1 when it did not exit.
int run_against_fake(const std::filesystem::path& dir, const char* mode, const char* test) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v(*e);
    if (!v.starts_with("GPUPLUG_FAKE_CUDA=") && !v.starts_with("GPUPLUG_TEST_EXPECT_PROBE=") &&
        !v.starts_with("LD_LIBRARY_PATH="))
      env.emplace_back(v);
  }
  const char* old_path = std::getenv("LD_LIBRARY_PATH");
  env.push_back("LD_LIBRARY_PATH=" + dir.string() +
                (old_path != nullptr && *old_path != '\0' ? ":" + std::string(old_path) : ""));
  env.push_back(std::string("GPUPLUG_FAKE_CUDA=") + mode);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string run = std::string("--run_test=") + test;
  std::string level = "--log_level=test_suite";
  std::string self = "/proc/self/exe";
  char* argv[] = {self.data(), run.data(), level.data(), nullptr};
  const pid_t child = fork();
  if (child == 0) {
    execve("/proc/self/exe", argv, envp.data());
    _exit(127);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace

// The primary context is retained once per process, not once per create/destroy, and
// no entry point (create, the hooks, destroy) changes the calling thread's current context.
BOOST_AUTO_TEST_CASE(primary_context_is_retained_once_and_callers_context_kept) {
  const char* mode = std::getenv("GPUPLUG_FAKE_CUDA");
  if (mode == nullptr) {
    const auto dir = fake_driver_dir();
    if (dir.empty() || !std::filesystem::exists(dir / "libcuda.so.1")) {
      BOOST_TEST_MESSAGE("skipped: no fake libcuda.so.1 beside this test program");
      return;
    }
    BOOST_TEST(run_against_fake(dir, "device", kFakeDeviceCase) == 0);
    return;
  }
  if (std::string_view(mode) != "device") return;  // the other fakes have no device

  BOOST_TEST_REQUIRE(probe().reason == GPUPLUG_PROBE_AVAILABLE, probe().message);
  void* fake = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  BOOST_TEST_REQUIRE(fake != nullptr);
  const auto retains =
      reinterpret_cast<int (*)()>(dlsym(fake, "gpuplug_fake_cuda_primary_retains"));
  const auto refcount =
      reinterpret_cast<int (*)()>(dlsym(fake, "gpuplug_fake_cuda_primary_refcount"));
  const auto get_current = reinterpret_cast<int (*)(void**)>(dlsym(fake, "cuCtxGetCurrent"));
  const auto set_current = reinterpret_cast<int (*)(void*)>(dlsym(fake, "cuCtxSetCurrent"));
  BOOST_TEST_REQUIRE((retains && refcount && get_current && set_current));
  auto current = [&] {
    void* c = nullptr;
    get_current(&c);
    return c;
  };

  // Listing before any backend: the context is borrowed and given back.
  gpuplug_device_info_t listed{};
  listed.struct_size = sizeof listed;
  BOOST_TEST_REQUIRE(table().describe_device(0, &listed) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(refcount() == 0);
  BOOST_TEST(listed.concurrent_managed_access == 1u);
  // ABI 1.1 identity, end to end from the fake's attributes (fake_libcuda.c).
  BOOST_TEST(listed.struct_size == GPUPLUG_DEVICE_INFO_V1_1_SIZE);
  BOOST_TEST(std::string(listed.uuid) == "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
  BOOST_TEST(listed.has_pci == 1u);
  BOOST_TEST(listed.pci_domain == 0u);
  BOOST_TEST(listed.pci_bus == 0xc1u);
  BOOST_TEST(listed.pci_device == 0u);
  BOOST_TEST(listed.pci_function == 0u);
  BOOST_TEST(listed.pci_vendor_id == 0x10deu);
  BOOST_TEST(listed.warp_size == 32u);
  BOOST_TEST(listed.max_shared_memory_per_block == 232448u);  // the opt-in maximum, not 48 KiB
  BOOST_TEST(std::string(listed.driver_version) == "13.0");
  BOOST_TEST(std::string(listed.runtime_version).empty());
  BOOST_TEST(listed.device_class == GPUPLUG_DEVICE_CLASS_DISCRETE_GPU);
  BOOST_TEST(listed.peak_gflops == 66908u);  // 132 SMs x 128 lanes x 2 x 1.98 GHz
  // A 1.0 host's struct: the plugin writes only what fits and says so.
  gpuplug_device_info_t old_host{};
  old_host.struct_size = GPUPLUG_DEVICE_INFO_V1_0_FULL_SIZE;
  old_host.warp_size = 12345;  // past the 1.0 struct: must be left alone
  BOOST_TEST_REQUIRE(table().describe_device(0, &old_host) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(old_host.struct_size == GPUPLUG_DEVICE_INFO_V1_0_FULL_SIZE);
  BOOST_TEST(old_host.warp_size == 12345u);
  BOOST_TEST(std::string(old_host.uuid) == std::string(listed.uuid));

  // The application's own context, current on this thread throughout.
  int app_object = 0;
  void* const app = &app_object;
  set_current(app);
  for (int cycle = 0; cycle < 4; ++cycle) {
    Instance dev;
    BOOST_TEST(current() == app, "create changed the thread's current context");
    gpuplug_device_info_t info{};
    info.struct_size = sizeof info;
    dev.ok(dev.t.device_info(dev.inst, &info), "device_info");
    BOOST_TEST(info.free_memory > 0u);  // the context is held, so free memory is known
    BOOST_TEST(info.managed_memory == 1u);
    BOOST_TEST(info.concurrent_managed_access == 1u);
    std::uint64_t free_bytes = 0, total_bytes = 0;
    dev.ok(dev.t.memory_info(dev.inst, &free_bytes, &total_bytes), "memory_info");
    dev.ok(dev.t.synchronize(dev.inst), "synchronize");  // needs the device's context current
    BOOST_TEST(current() == app, "a hook changed the thread's current context");
  }
  BOOST_TEST(current() == app, "destroy changed the thread's current context");
  BOOST_TEST(retains() == 1, "cuDevicePrimaryCtxRetain ran " << retains() << " times");
  BOOST_TEST(refcount() == 1);

  // A thread with no context of its own is left with none.
  std::thread([&] {
    {
      Instance dev;
      dev.ok(dev.t.synchronize(dev.inst), "synchronize");
    }
    BOOST_TEST(current() == nullptr);
  }).join();
  BOOST_TEST(retains() == 1);
  BOOST_TEST(refcount() == 1);
  set_current(nullptr);
}

// ABI 1.1 events against the fake driver: every hook reaches cuEvent* / cuStreamWaitEvent with
// the device's context current (the fake refuses them otherwise), bad handles never reach the
// driver, events left open are destroyed with the backend; and a driver without the event entry
// points still loads, reporting events unsupported and naming the one missing.
BOOST_AUTO_TEST_CASE(events_reach_the_driver_with_the_context_current) {
  const char* mode = std::getenv("GPUPLUG_FAKE_CUDA");
  if (mode == nullptr) {
    const auto dir = fake_driver_dir();
    if (dir.empty() || !std::filesystem::exists(dir / "libcuda.so.1")) {
      BOOST_TEST_MESSAGE("skipped: no fake libcuda.so.1 beside this test program");
      return;
    }
    const char* self = "events_reach_the_driver_with_the_context_current";
    BOOST_TEST(run_against_fake(dir, "device", self) == 0);
    BOOST_TEST(run_against_fake(dir, "device_no_events", self) == 0);
    return;
  }
  const std::string_view m(mode);
  if (m != "device" && m != "device_no_events") return;
  BOOST_TEST_REQUIRE(probe().reason == GPUPLUG_PROBE_AVAILABLE, probe().message);

  if (m == "device_no_events") {
    Instance dev;
    std::uint64_t e = 0;
    BOOST_TEST(dev.t.event_create(dev.inst, &e) == GPUPLUG_STATUS_UNSUPPORTED);
    BOOST_TEST(contains(dev.last_error(), "does not provide cuEventCreate"), dev.last_error());
    BOOST_TEST(dev.t.stream_wait_event(dev.inst, 0, 1) == GPUPLUG_STATUS_INVALID_ARGUMENT);
    dev.ok(dev.t.synchronize(dev.inst), "synchronize");  // the rest of the plugin works
    return;
  }

  void* fake = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  BOOST_TEST_REQUIRE(fake != nullptr);
  const auto live = reinterpret_cast<int (*)()>(dlsym(fake, "gpuplug_fake_cuda_live_events"));
  BOOST_TEST_REQUIRE(live != nullptr);
  {
    Instance dev;
    Instance other;
    std::uint64_t e = 0, e2 = 0, foreign = 0;
    dev.ok(dev.t.event_create(dev.inst, &e), "event_create");
    dev.ok(dev.t.event_create(dev.inst, &e2), "event_create");
    other.ok(other.t.event_create(other.inst, &foreign), "event_create (other)");
    BOOST_TEST(e != 0u);
    BOOST_TEST(live() == 3);
    std::int32_t ready = -1;
    dev.ok(dev.t.event_query(dev.inst, e, &ready), "event_query (never recorded)");
    BOOST_TEST(ready == 1);
    float ms = -1;
    BOOST_TEST(dev.t.event_elapsed_ms(dev.inst, e, e2, &ms) == GPUPLUG_STATUS_INVALID_ARGUMENT);
    BOOST_TEST(contains(dev.last_error(), "was never recorded"), dev.last_error());
    dev.ok(dev.t.event_record(dev.inst, e, 0), "event_record");
    dev.ok(dev.t.stream_wait_event(dev.inst, 0, e), "stream_wait_event");
    dev.ok(dev.t.event_synchronize(dev.inst, e), "event_synchronize");
    dev.ok(dev.t.event_record(dev.inst, e2, 0), "event_record");
    dev.ok(dev.t.event_elapsed_ms(dev.inst, e, e2, &ms), "event_elapsed_ms");
    BOOST_TEST(ms >= 0.0f);
    // Refused by the SDK, never passed to the driver.
    BOOST_TEST(dev.t.event_record(dev.inst, e, 0xBAD) == GPUPLUG_STATUS_INVALID_ARGUMENT);
    BOOST_TEST(contains(dev.last_error(), "event_record: unknown stream 2989"), dev.last_error());
    BOOST_TEST(dev.t.event_record(dev.inst, foreign, 0) == GPUPLUG_STATUS_INVALID_ARGUMENT);
    BOOST_TEST(contains(dev.last_error(), "unknown event " + std::to_string(foreign)),
               dev.last_error());
    dev.ok(dev.t.event_destroy(dev.inst, e), "event_destroy");
    BOOST_TEST(dev.t.event_destroy(dev.inst, e) == GPUPLUG_STATUS_INVALID_ARGUMENT);
    BOOST_TEST(dev.t.event_query(dev.inst, e, &ready) == GPUPLUG_STATUS_INVALID_ARGUMENT);
    BOOST_TEST(contains(dev.last_error(), "event_query: unknown event " + std::to_string(e)),
               dev.last_error());
    BOOST_TEST(live() == 2);
    // e2 and the other backend's event are left open: destroy takes them with the backend.
  }
  BOOST_TEST(live() == 0);
}

// True where a device is (a GPU, or the fake driver's "device" mode); otherwise the case says why
// it is skipped.
bool device_present() {
  if (probe().reason == GPUPLUG_PROBE_AVAILABLE) return true;
  BOOST_TEST_MESSAGE("skipped: no CUDA device (" << probe().message << ")");
  return false;
}

// ---- a machine with an NVIDIA GPU -----------------------------------------------------------

BOOST_AUTO_TEST_CASE(device_info_is_reported, *needs_device()) {
  const gpuplug_device_info_t info = check_device_info();
  BOOST_TEST(std::strncmp(info.uuid, "GPU-", 4) == 0);
  BOOST_TEST(std::strlen(info.uuid) == 40u);
  BOOST_TEST(std::strncmp(info.arch, "sm_", 3) == 0);
  BOOST_TEST(info.free_memory > 0u);  // the instance holds a context, so free memory is known
}

BOOST_AUTO_TEST_CASE(axpy_runs_on_the_device, *needs_device()) { check_axpy_runs(1e-6f); }

BOOST_AUTO_TEST_CASE(gemm_kernels_match_the_cpu, *needs_device()) {
  Instance dev;
  check_gemm_runs(dev, "gemm_f32", false);
  BOOST_TEST(dev.published("gemm", "gemm_a_e4m3_a_e4m3") == 1u);
  check_gemm_runs(dev, "gemm_a_e4m3", true);
}

BOOST_AUTO_TEST_CASE(e4m3_cast_is_bit_identical_to_the_shared_header, *needs_device()) {
  check_e4m3_casts();
}

BOOST_AUTO_TEST_CASE(streams_memset_async_copies_and_managed_memory, *needs_device()) {
  check_streams_and_managed_memory();
}

// Kernel preflight through the plugin's slot. With a device (a GPU, or the fake
// driver's "device" mode: compute capability 9.0) the driver's compute capability picks the
// target of the built gemm fatbin; without one, the slot says why with the probe's reason.
BOOST_AUTO_TEST_CASE(inspect_module_asks_the_driver_for_the_compute_capability) {
  std::string why;
  const auto image = gpuplug::support::read_file(
      std::string(GPUPLUG_TEST_KERNEL_DIR) + "/cuda/gemm.fatbin", why);
  BOOST_TEST_REQUIRE(image.has_value(), why);
  BOOST_TEST_REQUIRE(table().inspect_module != nullptr);
  auto out = std::make_unique<gpuplug_module_inspection_t>();
  out->struct_size = sizeof *out;
  const gpuplug_status_t status =
      table().inspect_module(0, image->data(), image->size(), out.get());
  const gpuplug_probe_result_t p = probe();
  if (p.reason != GPUPLUG_PROBE_AVAILABLE) {
    BOOST_TEST(status == GPUPLUG_STATUS_UNAVAILABLE);
    BOOST_TEST(contains(out->reason, p.message), out->reason << " vs " << p.message);
    return;
  }
  BOOST_TEST_REQUIRE(status == GPUPLUG_STATUS_SUCCESS, out->reason);
  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  BOOST_TEST_REQUIRE(table().describe_device(0, &info) == GPUPLUG_STATUS_SUCCESS);
  const std::string arch = info.arch;  // "sm_90"
  BOOST_TEST_MESSAGE(arch << ": " << out->target);
  if (arch == "sm_90" || arch == "sm_80") {
    BOOST_TEST(std::string(out->target) == arch + " (SASS)");
  } else {
    BOOST_TEST(out->target[0] != '\0');  // any newer GPU: SASS of its major, or the PTX
  }
  BOOST_TEST(out->loadable == 1);
  BOOST_TEST(std::string(out->functions) == "gemm_a_e4m3\ngemm_f32");
  BOOST_TEST(contains(out->symbols, "gemm_f32_n_tile=64"), out->symbols);
  const std::string mode = std::getenv("GPUPLUG_FAKE_CUDA") ? std::getenv("GPUPLUG_FAKE_CUDA") : "";
  if (mode == "device") BOOST_TEST(std::string(out->target) == "sm_90 (SASS)");
}

// Native handles through the core wherever a device is (a GPU, or the fake driver's
// "device" mode). Host memory is refused, as it is on a GPU: the driver does not know it. The
// context is the retained primary context: the same for every backend of the device.
BOOST_AUTO_TEST_CASE(native_handles_are_the_primary_context_and_cu_streams) {
  if (!device_present()) return;
  gpuplug::PluginRegistry registry;
  registry.add_plugin_file(plugin_under_test());
  auto gpu = registry.create("cuda:0!");
  auto again = registry.create("cuda:0!");
  const gpuplug::NativeHandles h = gpu->native();
  BOOST_TEST(h.vendor == "cuda");
  BOOST_TEST(h.device == 0);
  BOOST_TEST(h.context != nullptr);
  BOOST_TEST(h.context == again->native().context);
  BOOST_TEST(h.stream == nullptr);  // the legacy default stream
  const auto refused = [&](const std::function<void()>& call, const std::string& why) {
    try {
      call();
      BOOST_FAIL("accepted: " << why);
    } catch (const gpuplug::Error& e) {
      BOOST_TEST((e.status() == gpuplug::Status::invalid_argument), e.what());
      BOOST_TEST(contains(e.what(), "cuda:0"), e.what());
      BOOST_TEST(contains(e.what(), why), e.what());
    }
  };
  std::vector<char> host(64);
  int released = 0;
  refused([&] { (void)gpu->import_memory(host.data(), host.size(), [&] { ++released; }); },
          "is not memory the CUDA driver knows");
  refused([&] { (void)gpu->import_stream(nullptr); }, "the native stream is null");
  refused([&] { (void)gpu->native_pointer(gpuplug::DevicePtr{0x1000}); }, "native_pointer");
  refused([&] { (void)gpu->native(gpuplug::Stream{0xBAD}); }, "unknown stream 2989");
  gpu.reset();
  BOOST_TEST(released == 0);  // a refused import keeps no callback
}

// Wherever a device is (a GPU, or the fake driver's "device" mode, whose cuPointerGetAttribute
// knows its allocations): memory and a stream another party made on cuda:0 are imported, used,
// and forgotten without being freed or destroyed.
BOOST_AUTO_TEST_CASE(imports_of_driver_memory_and_streams) {
  if (!device_present()) return;
  gpuplug::PluginRegistry registry;
  registry.add_plugin_file(plugin_under_test());
  auto gpu = registry.create("cuda:0!");
  auto owner = registry.create("cuda:0!");  // "someone else" (the same primary context)
  constexpr std::size_t bytes = std::size_t{1} << 20;
  const gpuplug::DevicePtr theirs = owner->alloc(bytes, "owner");
  void* address = owner->native_pointer(theirs);
  int released = 0;
  const gpuplug::DevicePtr x = gpu->import_memory(address, bytes, [&] { ++released; }, "torch");
  std::vector<std::uint8_t> in(bytes, 5), out(bytes, 0);
  gpu->copy_h2d(x, in.data(), bytes);
  owner->copy_d2h(out.data(), theirs, bytes);
  BOOST_TEST(out == in);
  BOOST_CHECK_THROW(gpu->copy_h2d(x + 1, in.data(), bytes), gpuplug::Error);
  gpu->free(x);
  BOOST_TEST(released == 1);
  try {
    (void)gpu->import_memory(address, bytes + 4096, {});
    BOOST_FAIL("an import past the driver's allocation was accepted");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST(contains(e.what(), "runs past the end of its CUDA allocation"), e.what());
  }
  const gpuplug::Stream s = owner->create_stream();
  const gpuplug::Stream i = gpu->import_stream(owner->native(s).stream);
  const gpuplug::DevicePtr mine = gpu->alloc(4096);
  gpu->memset(mine, 7, 4096, i);
  gpu->synchronize(i);
  gpu->destroy_stream(i);
  owner->memset(theirs, 1, 64, s);  // the owner's stream still works...
  owner->synchronize(s);
  owner->destroy_stream(s);         // ...and is its owner's to destroy
  gpu->free(mine);
  owner->free(theirs);
}

// Memory you can see through the core wherever a device is (a GPU, or the fake
// driver's "device" mode): device_memory_limit refuses the request in the shared ledger before
// the driver is asked.
BOOST_AUTO_TEST_CASE(memory_snapshot_scopes_and_out_of_memory_report_through_the_core) {
  if (!device_present()) return;
  gpuplug::PluginRegistry registry;
  registry.add_plugin_file(plugin_under_test());
  auto gpu = registry.create("cuda:0!", {{"device_memory_limit", "1M"}, {"memory_history", "8"}});
  gpuplug::MemoryScope scope(*gpu, "nothing");
  const gpuplug::MemorySnapshot s = gpu->memory_snapshot();
  BOOST_TEST(s.complete);
  BOOST_TEST(s.backend == "cuda:0");
  BOOST_TEST(s.device_memory_limit.value_or(0) == 1u << 20);
  BOOST_TEST(s.history_capacity == 8u);
  BOOST_TEST(s.totals.live_bytes == 0u);
  gpu->reset_peak();
  try {
    (void)gpu->alloc(2 << 20, "too_big");
    BOOST_FAIL("alloc past device_memory_limit succeeded");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST((e.status() == gpuplug::Status::out_of_memory));
    BOOST_TEST(contains(e.what(), "out of memory allocating 2.0 MiB at too_big"), e.what());
    BOOST_TEST(contains(e.what(), "device_memory_limit 1.0 MiB"), e.what());
    BOOST_TEST(contains(e.what(), "op scratch held: 0 B live"), e.what());
  }
  BOOST_TEST(scope.end().peak_bytes == 0u);
}

// The fake driver's device serves a workload (the layer tests run on it), and refuses
// what a driver refuses: through the core, copies and memset move real bytes, memory_info sees
// what is live, a module's kernels and initialised globals are found and launches are counted;
// straight through its entry points, a call without the primary context current, an unknown,
// freed or overrun device range, a destroyed stream or module, and a bad launch are errors.
BOOST_AUTO_TEST_CASE(fake_device_serves_a_workload_and_refuses_what_a_driver_refuses) {
  const char* mode = std::getenv("GPUPLUG_FAKE_CUDA");
  if (mode == nullptr) {
    const auto dir = fake_driver_dir();
    if (dir.empty() || !std::filesystem::exists(dir / "libcuda.so.1")) {
      BOOST_TEST_MESSAGE("skipped: no fake libcuda.so.1 beside this test program");
      return;
    }
    BOOST_TEST(
        run_against_fake(dir, "device",
                         "fake_device_serves_a_workload_and_refuses_what_a_driver_refuses") == 0);
    return;
  }
  if (std::string_view(mode) != "device") return;
  BOOST_TEST_REQUIRE(probe().reason == GPUPLUG_PROBE_AVAILABLE, probe().message);
  void* fake = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  BOOST_TEST_REQUIRE(fake != nullptr);
  const auto count = [&](const char* name) {
    const auto f = reinterpret_cast<long long (*)()>(dlsym(fake, name));
    BOOST_TEST_REQUIRE(f != nullptr, name);
    return f;
  };
  const auto launches = count("gpuplug_fake_cuda_launches");
  const auto live_allocations =
      reinterpret_cast<int (*)()>(dlsym(fake, "gpuplug_fake_cuda_live_allocations"));
  const auto live_streams =
      reinterpret_cast<int (*)()>(dlsym(fake, "gpuplug_fake_cuda_live_streams"));
  BOOST_TEST_REQUIRE((live_allocations && live_streams));

  {
    gpuplug::PluginRegistry registry;
    registry.add_plugin_file(plugin_under_test());
    auto gpu = registry.create("cuda:0!");
    const std::size_t bytes = 4096;
    const std::uint64_t free_before = gpu->memory_info().free_bytes;
    const gpuplug::DevicePtr a = gpu->alloc(bytes, "a");
    const gpuplug::DevicePtr b = gpu->alloc(bytes, "b");
    BOOST_TEST(gpu->memory_info().free_bytes == free_before - 2 * bytes);
    std::vector<std::uint8_t> in(bytes), out(bytes, 0);
    for (std::size_t i = 0; i < bytes; ++i) in[i] = static_cast<std::uint8_t>(i * 7);
    const gpuplug::Stream s = gpu->create_stream();
    BOOST_TEST(live_streams() == 1);
    gpu->copy_h2d_async(a, in.data(), bytes, s);
    gpu->memset(a + 16, 0xAB, 16, s);
    gpu->copy_d2d(b, a, bytes);
    gpu->copy_d2h(out.data(), b, bytes);
    for (std::size_t i = 16; i < 32; ++i) in[i] = 0xAB;
    BOOST_TEST(out == in, "the bytes did not survive upload, memset, d2d and download");

    const long long before = launches();
    const gpuplug::KernelHandle axpy = gpu->kernel("axpy", "axpy");
    gpu->launch_args(axpy, {4, 1, 1}, {256, 1, 1}, 0, s, std::uint32_t{1024}, 2.0f, a.value,
                     b.value);
    gpu->synchronize(s);
    BOOST_TEST(launches() == before + 1);
    // A global holds its initial bytes from the cubin (kernels/cuda/gemm.cu: kNTile).
    const auto tile = gpu->device_symbol("gemm", "gemm_f32_n_tile");
    BOOST_TEST_REQUIRE(tile.has_value());
    std::uint32_t n_tile = 0;
    gpu->copy_d2h(&n_tile, tile->address, sizeof n_tile);
    BOOST_TEST(n_tile == 64u);
    BOOST_TEST(!gpu->device_symbol("gemm", "no_such_global").has_value());
    gpu->destroy_stream(s);
    gpu->free(a);
    gpu->free(b);
    BOOST_TEST(live_streams() == 0);
    BOOST_TEST(gpu->memory_info().free_bytes < free_before);  // the module globals are live
  }
  BOOST_TEST(live_allocations() == 0, "the modules' globals were freed with the backend");

  // Straight through the entry points, as a plugin with a bug would call them.
  using GetProc = int (*)(const char*, void**, int, unsigned long long, int*);
  const auto get_proc = reinterpret_cast<GetProc>(dlsym(fake, "cuGetProcAddress_v2"));
  BOOST_TEST_REQUIRE(get_proc != nullptr);
  const auto entry = [&](const char* name) {
    void* fn = nullptr;
    int found = -1;
    BOOST_TEST_REQUIRE((get_proc(name, &fn, 13000, 0, &found) == 0 && found == 0), name);
    return fn;
  };
  using Ptr = unsigned long long;
  const auto mem_alloc = reinterpret_cast<int (*)(Ptr*, std::size_t)>(entry("cuMemAlloc"));
  const auto mem_free = reinterpret_cast<int (*)(Ptr)>(entry("cuMemFree"));
  const auto htod = reinterpret_cast<int (*)(Ptr, const void*, std::size_t)>(entry("cuMemcpyHtoD"));
  const auto htod_async =
      reinterpret_cast<int (*)(Ptr, const void*, std::size_t, void*)>(entry("cuMemcpyHtoDAsync"));
  const auto stream_create = reinterpret_cast<int (*)(void**, unsigned)>(entry("cuStreamCreate"));
  const auto stream_destroy = reinterpret_cast<int (*)(void*)>(entry("cuStreamDestroy"));
  const auto load = reinterpret_cast<int (*)(void**, const void*)>(entry("cuModuleLoadData"));
  const auto unload = reinterpret_cast<int (*)(void*)>(entry("cuModuleUnload"));
  const auto get_function =
      reinterpret_cast<int (*)(void**, void*, const char*)>(entry("cuModuleGetFunction"));
  const auto launch =
      reinterpret_cast<int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, void*, void**, void**)>(entry("cuLaunchKernel"));
  const auto retain = reinterpret_cast<int (*)(void**, int)>(entry("cuDevicePrimaryCtxRetain"));
  const auto release = reinterpret_cast<int (*)(int)>(entry("cuDevicePrimaryCtxRelease"));
  const auto push = reinterpret_cast<int (*)(void*)>(entry("cuCtxPushCurrent"));
  const auto pop = reinterpret_cast<int (*)(void**)>(entry("cuCtxPopCurrent"));
  constexpr int kInvalidValue = 1, kInvalidContext = 201, kInvalidHandle = 400, kNotFound = 500;

  Ptr p = 0;
  BOOST_TEST(mem_alloc(&p, 64) == kInvalidContext);  // no context current on this thread
  void* primary = nullptr;
  BOOST_TEST_REQUIRE(retain(&primary, 0) == 0);
  BOOST_TEST_REQUIRE(push(primary) == 0);
  BOOST_TEST_REQUIRE(mem_alloc(&p, 64) == 0);
  std::vector<std::uint8_t> host(128);
  BOOST_TEST(htod(p, host.data(), 64) == 0);
  BOOST_TEST(htod(p + 32, host.data(), 32) == 0);
  BOOST_TEST(htod(p + 32, host.data(), 33) == kInvalidValue);  // one byte past the end
  BOOST_TEST(htod(p + 64, host.data(), 1) == kInvalidValue);   // the gap after it
  BOOST_TEST(htod(0x1000, host.data(), 1) == kInvalidValue);   // nobody's
  BOOST_TEST(mem_free(p + 8) == kInvalidValue);                // not what alloc returned
  BOOST_TEST(mem_free(p) == 0);
  BOOST_TEST(htod(p, host.data(), 1) == kInvalidValue);  // freed
  BOOST_TEST(mem_free(p) == kInvalidValue);

  void* s = nullptr;
  BOOST_TEST_REQUIRE(stream_create(&s, 0) == 0);
  BOOST_TEST(stream_destroy(s) == 0);
  BOOST_TEST(stream_destroy(s) == kInvalidHandle);
  BOOST_TEST_REQUIRE(mem_alloc(&p, 64) == 0);
  BOOST_TEST(htod_async(p, host.data(), 64, s) == kInvalidHandle);
  BOOST_TEST(htod_async(p, host.data(), 64, nullptr) == 0);

  std::string why;
  const auto image =
      gpuplug::support::read_file(std::string(GPUPLUG_TEST_KERNEL_DIR) + "/cuda/axpy.fatbin", why);
  BOOST_TEST_REQUIRE(image.has_value(), why);
  std::vector<std::uint64_t> aligned((image->size() + 7) / 8);
  std::memcpy(aligned.data(), image->data(), image->size());
  void* module = nullptr;
  BOOST_TEST_REQUIRE(load(&module, aligned.data()) == 0);
  void* f = nullptr;
  BOOST_TEST(get_function(&f, module, "gemm_f32") == kNotFound);
  BOOST_TEST_REQUIRE(get_function(&f, module, "axpy") == 0);
  const long long before = launches();
  BOOST_TEST(launch(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr) == 0);
  BOOST_TEST(launch(f, 0, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr) == kInvalidValue);
  BOOST_TEST(launch(f, 1, 1, 1, 32, 0, 1, 0, nullptr, nullptr, nullptr) == kInvalidValue);
  BOOST_TEST(launch(f, 1, 1, 1, 2048, 1, 1, 0, nullptr, nullptr, nullptr) == kInvalidValue);
  BOOST_TEST(launch(f, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr) == kInvalidHandle);
  BOOST_TEST(launch(host.data(), 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr) ==
             kInvalidHandle);
  BOOST_TEST(unload(module) == 0);
  BOOST_TEST(unload(module) == kInvalidHandle);
  BOOST_TEST(launch(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr) == kInvalidHandle);
  BOOST_TEST(launches() == before + 1);
  const char not_ptx[] = "not a kernel image";
  BOOST_TEST(load(&module, not_ptx) != 0);

  BOOST_TEST(mem_free(p) == 0);
  BOOST_TEST(live_allocations() == 0);
  void* popped = nullptr;
  BOOST_TEST(pop(&popped) == 0);
  BOOST_TEST(popped == primary);
  BOOST_TEST(release(0) == 0);
}

#if GPUPLUG_ABI_VERSION_MINOR >= 3
// ABI 1.3 pitched 2D copies on the fake driver's device: one cuMemcpy2DAsync each (CUDA_MEMCPY2D
// with the memory types of its direction), the gaps between rows untouched. Run by
// test_cuda_plugin.fake_device_pitched (GPUPLUG_FAKE_CUDA=device); elsewhere it says so.
BOOST_AUTO_TEST_CASE(pitched_copies_are_one_cu_memcpy_2d_async_each) {
  const char* mode = std::getenv("GPUPLUG_FAKE_CUDA");
  if (mode == nullptr || std::string_view(mode) != "device") {
    BOOST_TEST_MESSAGE("skipped: needs GPUPLUG_FAKE_CUDA=device");
    return;
  }
  BOOST_TEST_REQUIRE(probe().reason == GPUPLUG_PROBE_AVAILABLE, probe().message);
  void* fake = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  BOOST_TEST_REQUIRE(fake != nullptr);
  const auto copies = reinterpret_cast<long long (*)()>(dlsym(fake, "gpuplug_fake_cuda_copies_2d"));
  BOOST_TEST_REQUIRE(copies != nullptr);
  Instance dev;
  std::uint64_t stream = 0;
  dev.ok(dev.t.stream_create(dev.inst, &stream), "stream_create");
  constexpr std::uint64_t pitch = 96, width = 50, rows = 7;
  const std::uint64_t a = dev.alloc(pitch * rows), b = dev.alloc(pitch * rows);
  std::vector<std::uint8_t> in(pitch * rows), out(pitch * rows, 0xCC);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(i * 3);
  dev.ok(dev.t.memset_d8(dev.inst, b, 0xEE, pitch * rows, stream), "memset_d8");
  const long long before = copies();
  dev.ok(dev.t.copy_h2d_2d_async(dev.inst, a, pitch, in.data(), pitch, width, rows, stream),
         "copy_h2d_2d_async");
  dev.ok(dev.t.copy_d2d_2d_async(dev.inst, b, pitch, a, pitch, width, rows, stream),
         "copy_d2d_2d_async");
  dev.ok(dev.t.copy_d2h_2d_async(dev.inst, out.data(), pitch, b, pitch, pitch, rows, stream),
         "copy_d2h_2d_async");
  dev.ok(dev.t.stream_synchronize(dev.inst, stream), "stream_synchronize");
  BOOST_TEST(copies() - before == 3);
  for (std::size_t i = 0; i < out.size(); ++i)
    BOOST_TEST(out[i] == (i % pitch < width ? in[i] : 0xEE), "byte " << i);
  dev.ok(dev.t.free(dev.inst, a), "free");
  dev.ok(dev.t.free(dev.inst, b), "free");
  dev.ok(dev.t.stream_destroy(dev.inst, stream), "stream_destroy");
}
#endif
