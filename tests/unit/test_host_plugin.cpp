// SPDX-License-Identifier: Apache-2.0
// The host plugin through its C table only: what the C edge shows (statuses, caller buffers,
// struct sizes, out-parameters, host services, per-thread errors) and what only the host plugin
// has (its options, exact accounting and messages, host memory, ELF modules and their executor).

// The contracts every backend shares (memory, copies, streams, modules, launches, the sample
// kernels against the CPU, concurrency) are conformance cases, run on this plugin too by
// test_conformance: tests/conformance/*_cases.cpp.

#define BOOST_TEST_MODULE host_plugin
#include <dlfcn.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "plugin_table_harness.hpp"

namespace fs = std::filesystem;
using namespace gpuplug::test;  // NOLINT(google-build-using-namespace): the harness is the test's

fs::path gpuplug::test::plugin_under_test() {
  return fs::path(GPUPLUG_TEST_PLUGIN_DIR) / "libgpuplug-host.so";
}

namespace {

const fs::path kKernels = fs::path(GPUPLUG_TEST_KERNEL_DIR) / "host";
const fs::path kTestKernels = GPUPLUG_TEST_HOST_KERNEL_DIR;  // bad_n_tile.so, test_probe.so

const gpuplug_plugin_v1& api() { return table(); }

}  // namespace

// ---- identity, probe, create -----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(identity_and_every_optional_slot) {
  BOOST_TEST(std::string(api().vendor) == "gpuplug");
  // Every slot is filled, optional ones included.
  const void* const* slots = reinterpret_cast<const void* const*>(&api().probe);
  const std::size_t count =
      (sizeof(gpuplug_plugin_v1) - offsetof(gpuplug_plugin_v1, probe)) / sizeof(void*);
  for (std::size_t i = 0; i < count; ++i) BOOST_TEST(slots[i] != nullptr, "slot " << i);
  // The whole table, slots appended after the first release (load_module_file) included.
  BOOST_TEST(api().struct_size == sizeof(gpuplug_plugin_v1));
}

BOOST_AUTO_TEST_CASE(probe_and_describe) {
  BOOST_TEST(probe().device_count == 1u);

  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  BOOST_REQUIRE(api().describe_device(0, &info) == GPUPLUG_STATUS_SUCCESS);
  utsname u{};
  uname(&u);
  // The machine with its SIMD level ("x86_64-v3"); the uuid derived from the machine (checked
  // in test_device_identity and tool.list.schema), or "" where the machine has no machine-id.
  BOOST_TEST(std::string(info.arch).rfind(u.machine, 0) == 0u, info.arch);
  BOOST_TEST((std::strlen(info.uuid) == 36u || std::strlen(info.uuid) == 0u), info.uuid);
  BOOST_TEST(info.warp_size == 1u);
  BOOST_TEST(info.device_class == GPUPLUG_DEVICE_CLASS_CPU);
  BOOST_TEST(info.has_pci == 0u);
  BOOST_TEST(std::string(info.driver_version) == u.release);
  BOOST_TEST(info.total_memory > 0u);
  BOOST_TEST(info.free_memory <= info.total_memory);
  BOOST_TEST(info.compute_units >= 1u);
  BOOST_TEST(info.managed_memory == 1u);
  BOOST_TEST(info.concurrent_managed_access == 1u);
  BOOST_TEST(info.struct_size == sizeof info);
  BOOST_TEST(api().describe_device(1, &info) == GPUPLUG_STATUS_UNAVAILABLE);
}

// A host built against ABI 1.0 passes the 1.0 struct: it is filled up to its end, no further.
BOOST_AUTO_TEST_CASE(an_abi_1_0_device_info_is_filled_only_up_to_its_size) {
  gpuplug_device_info_t info{};
  info.struct_size = GPUPLUG_DEVICE_INFO_V1_0_SIZE;
  info.concurrent_managed_access = 0xDEADBEEFu;  // past the 1.0 struct: must stay untouched
  BOOST_REQUIRE(api().describe_device(0, &info) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(info.struct_size == GPUPLUG_DEVICE_INFO_V1_0_SIZE);
  BOOST_TEST(info.total_memory > 0u);
  BOOST_TEST(info.concurrent_managed_access == 0xDEADBEEFu);

  Instance d;
  gpuplug_device_info_t live{};
  live.struct_size = GPUPLUG_DEVICE_INFO_V1_0_SIZE;
  live.concurrent_managed_access = 0xDEADBEEFu;
  d.ok(api().device_info(d.inst, &live), "device_info 1.0");
  BOOST_TEST(live.struct_size == GPUPLUG_DEVICE_INFO_V1_0_SIZE);
  BOOST_TEST(live.concurrent_managed_access == 0xDEADBEEFu);

  // A 1.0 host's full struct (concurrent_managed_access included): nothing of ABI 1.1 written.
  gpuplug_device_info_t full_1_0{};
  full_1_0.struct_size = GPUPLUG_DEVICE_INFO_V1_0_FULL_SIZE;
  full_1_0.warp_size = 0xDEADBEEFu;
  d.ok(api().device_info(d.inst, &full_1_0), "device_info 1.0 full");
  BOOST_TEST(full_1_0.struct_size == GPUPLUG_DEVICE_INFO_V1_0_FULL_SIZE);
  BOOST_TEST(full_1_0.concurrent_managed_access == 1u);
  BOOST_TEST(full_1_0.warp_size == 0xDEADBEEFu);
}

BOOST_AUTO_TEST_CASE(no_device_past_the_last) {
  gpuplug_instance_t inst = nullptr;
  std::string error;
  BOOST_TEST(try_create({}, &inst, &error, nullptr, 1) == GPUPLUG_STATUS_UNAVAILABLE);
  BOOST_TEST(inst == nullptr);
  BOOST_TEST(error == "no device 1: host has 1 device");
}

BOOST_AUTO_TEST_CASE(threads_option_and_a_struct_too_small) {
  Instance d(OptionList{{"threads", "3"}});
  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  d.ok(api().device_info(d.inst, &info), "device_info");
  BOOST_TEST(info.compute_units == 3u);
  info.struct_size = 4;  // too small for v1
  d.expect(api().device_info(d.inst, &info), GPUPLUG_STATUS_INVALID_ARGUMENT, "device_info small");
}

// A modules_dir that is missing or a file fails create and names the option, instead of
// failing at the first kernel lookup.
BOOST_AUTO_TEST_CASE(modules_dir_is_checked_at_create) {
  gpuplug_instance_t inst = nullptr;
  std::string error;
  BOOST_TEST(try_create({{"modules_dir", "/nonexistent/gpuplug"}}, &inst, &error) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(inst == nullptr);
  BOOST_TEST(error == "option modules_dir='/nonexistent/gpuplug': No such file or directory");
  BOOST_TEST(try_create({{"modules_dir", "/etc/passwd"}}, &inst, &error) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(error == "option modules_dir='/etc/passwd': not a folder");
}

BOOST_AUTO_TEST_CASE(unknown_and_malformed_options_are_rejected) {
  gpuplug_instance_t inst = nullptr;
  std::string error;
  BOOST_TEST(try_create({{"frobnicate", "1"}}, &inst, &error) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(inst == nullptr);
  BOOST_TEST(
      error ==
      "unknown option 'frobnicate' (known options: device_memory_limit, memory_history, "
      "modules_dir, threads)");

  BOOST_TEST(try_create({{"device_memory_limit", "12X"}}, &inst, &error) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(error, "device_memory_limit='12X'"), error);
  BOOST_TEST(try_create({{"threads", "0"}}, &inst, &error) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(error, "threads='0'"), error);
  BOOST_TEST(try_create({{"modules_dir", ""}}, &inst, &error) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(try_create({{"threads", "2"}, {"threads", "3"}}, &inst, &error) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(error, "given more than once"), error);
  BOOST_TEST(inst == nullptr);
}

// ---- memory ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(exact_accounting_and_the_report_buffer) {
  Instance d;
  const std::uint64_t a = d.alloc(1000, "weights");
  const std::uint64_t m = d.alloc_managed(24, "kv");
  BOOST_TEST(a % 256 == 0u);
  BOOST_TEST(m % 256 == 0u);
  const auto st = d.stats();
  BOOST_TEST(st.live_bytes == 1024u);
  BOOST_TEST(st.live_managed_bytes == 24u);

  char report[1024];
  const std::size_t length = api().ledger_report(d.inst, 5, report, sizeof report);
  BOOST_TEST(length == std::strlen(report));
  BOOST_TEST(contains(report, "host:0: 2 live allocations, 1024 bytes"), report);
  BOOST_TEST(contains(report, "1000 bytes in 1 allocation: weights"), report);
  char tiny[8];
  BOOST_TEST(api().ledger_report(d.inst, 5, tiny, sizeof tiny) ==
             length);  // full length, truncated copy
  BOOST_TEST(std::strlen(tiny) == 7u);

  // Device memory is host memory: it can be written directly.
  std::memset(reinterpret_cast<void*>(a), 1, 1000);
  d.free(a);
  d.free(m);
  BOOST_TEST(d.stats().peak_bytes == 1024u);
}

BOOST_AUTO_TEST_CASE(device_memory_limit_messages_and_out_parameter) {
  Instance d(OptionList{{"device_memory_limit", "1M"}});
  const std::uint64_t a = d.alloc(600 * 1024);
  std::uint64_t b = 0;
  const std::string msg = d.expect(api().alloc(d.inst, 600 * 1024, "second", &b),
                                   GPUPLUG_STATUS_OUT_OF_MEMORY, "alloc past limit");
  BOOST_TEST(b == 0u);
  BOOST_TEST(contains(msg, "device_memory_limit of 1048576 bytes (1.0 MiB) reached"), msg);
  BOOST_TEST(contains(msg, "614400 bytes (600.0 KiB) live"), msg);
  BOOST_TEST(contains(msg, "614400 bytes (600.0 KiB) requested"), msg);
  d.free(a);
}

BOOST_AUTO_TEST_CASE(module_memory_is_readable_but_not_writable_or_overrun) {
  Instance d;
  std::vector<char> host(64);
  const std::string msg = d.expect(api().copy_h2d(d.inst, 0x1000, host.data(), 16),
                                   GPUPLUG_STATUS_INVALID_ARGUMENT, "copy_h2d to 0x1000");
  BOOST_TEST(contains(msg, "copy_h2d: 0x1000 + 16 bytes is not memory of this device"), msg);
  // Module globals are device memory: readable, but the read-only ones cannot be written.
  const auto [tile, size] = d.global("gemm", "gemm_f32_n_tile");
  std::uint32_t value = 0;
  d.ok(api().copy_d2h(d.inst, &value, tile, size), "read n_tile");
  d.expect(api().copy_d2h(d.inst, &value, tile, 1 << 20), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "read past the module's segment");
  const std::string ro = d.expect(api().copy_h2d(d.inst, tile, &value, 4),
                                  GPUPLUG_STATUS_INVALID_ARGUMENT, "write a const global");
  BOOST_TEST(contains(ro, "read-only module memory"), ro);
}

// ---- streams ---------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(stream_error_messages) {
  Instance d;
  const std::string zero = d.expect(api().stream_destroy(d.inst, 0),
                                    GPUPLUG_STATUS_INVALID_ARGUMENT, "destroy the default stream");
  BOOST_TEST(contains(zero, "default stream"), zero);
  const std::string unknown = d.expect(api().stream_synchronize(d.inst, 4242),
                                       GPUPLUG_STATUS_INVALID_ARGUMENT, "unknown stream");
  BOOST_TEST(contains(unknown, "unknown stream 4242"), unknown);
}

// free waits for the work still queued on any stream, as cuMemFree does: a copy queued behind
// long work that reads the memory has run, with the bytes it held, by the time free returns.
BOOST_AUTO_TEST_CASE(free_waits_for_queued_work_that_names_the_memory) {
  Instance d;
  constexpr std::uint64_t busy = std::uint64_t{64} << 20, small = 4096;
  const std::uint64_t a = d.alloc(busy), b = d.alloc(busy), x = d.alloc(small);
  const std::vector<std::uint8_t> data(small, 0x6B);
  d.ok(api().copy_h2d(d.inst, x, data.data(), small), "copy_h2d");
  std::uint64_t s = 0;
  d.ok(api().stream_create_with_flags(d.inst, GPUPLUG_STREAM_NON_BLOCKING, &s), "stream_create");
  for (int i = 0; i < 4; ++i)  // tens of milliseconds of copies ahead of the read
    d.ok(api().copy_d2d_async(d.inst, i % 2 ? a : b, i % 2 ? b : a, busy, s), "copy_d2d_async");
  std::vector<std::uint8_t> out(small, 0);
  d.ok(api().copy_d2h_async(d.inst, out.data(), x, small, s), "copy_d2h_async");
  d.free(x);
  BOOST_TEST(out == data);  // the queued read ran before the memory went
  d.ok(api().stream_destroy(d.inst, s), "stream_destroy");
  d.free(a);
  d.free(b);
}

// ---- modules and launches ---------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(symbols_are_the_module_s_own) {
  Instance d;
  std::uint64_t address = 0, size = 0;
  const std::string missing =
      d.expect(api().get_global(d.inst, "gemm", "gemm_f32_a_e4m3", &address, &size),
               GPUPLUG_STATUS_NOT_FOUND, "absent metadata");
  BOOST_TEST(missing == "symbol gemm::gemm_f32_a_e4m3 not found in module gemm");
  // Functions are not globals, globals are not functions, and the module's dependencies
  // (libc...) are not the module.
  d.expect(api().get_global(d.inst, "gemm", "gemm_f32", &address, &size), GPUPLUG_STATUS_NOT_FOUND,
           "function as global");
  std::uint64_t f = 0;
  d.expect(api().get_function(d.inst, "gemm", "gemm_f32_n_tile", &f), GPUPLUG_STATUS_NOT_FOUND,
           "global as function");
  d.expect(api().get_function(d.inst, "gemm", "memcpy", &f), GPUPLUG_STATUS_NOT_FOUND,
           "libc through the module");
  d.expect(api().get_global(d.inst, "gemm", "stdout", &address, &size), GPUPLUG_STATUS_NOT_FOUND,
           "libc global");

  // The deliberately bad module publishes a 2-byte n_tile.
  const auto bad = read_file_or_fail(kTestKernels / "bad_n_tile.so");
  d.ok(api().load_module(d.inst, "bad", bad.data(), bad.size()), "load bad_n_tile");
  BOOST_TEST(d.global("bad", "gemm_f32_n_tile").second == 2u);
  BOOST_TEST(d.function("bad", "gemm_f32") != 0u);
}

BOOST_AUTO_TEST_CASE(not_found_messages_list_what_exists) {
  Instance d;
  std::uint64_t f = 0;
  const std::string kernel = d.expect(api().get_function(d.inst, "gemm", "gemm_f16", &f),
                                      GPUPLUG_STATUS_NOT_FOUND, "unknown kernel");
  BOOST_TEST(kernel == "kernel gemm::gemm_f16 not found (module gemm has: gemm_a_e4m3, gemm_f32)");

  const std::string module = d.expect(api().get_function(d.inst, "nosuch", "f", &f),
                                      GPUPLUG_STATUS_NOT_FOUND, "unknown module");
  BOOST_TEST(contains(module, "module nosuch not found"), module);
  BOOST_TEST(contains(module, "nosuch.so"), module);
  BOOST_TEST(contains(module, kKernels.lexically_normal().string()), module);
  BOOST_TEST(contains(module, "loaded modules: gemm"),
             module);  // gemm was loaded by the first lookup
}

BOOST_AUTO_TEST_CASE(modules_from_bytes_are_copies_and_reload_under_one_name) {
  Instance d;
  const auto image = read_file_or_fail(kKernels / "axpy.so");
  d.ok(api().load_module(d.inst, "mine", image.data(), image.size()), "load_module");
  d.ok(api().load_module(d.inst, "mine2", image.data(), image.size()), "load the same bytes again");
  const std::string dup = d.expect(api().load_module(d.inst, "mine", image.data(), image.size()),
                                   GPUPLUG_STATUS_INVALID_ARGUMENT, "duplicate name");
  BOOST_TEST(dup == "module mine is already loaded");
  BOOST_TEST(d.function("mine", "axpy") != d.function("mine2", "axpy"));  // two copies of the code
  d.ok(api().unload_module(d.inst, "mine"), "unload_module");
  // Reload under the old name: a fresh module (the memfd path is reused safely).
  for (int i = 0; i < 20; ++i) {
    d.ok(api().load_module(d.inst, "mine", image.data(), image.size()), "reload");
    BOOST_TEST(d.function("mine", "axpy") != 0u);
    d.ok(api().unload_module(d.inst, "mine"), "unload again");
  }
}

BOOST_AUTO_TEST_CASE(corrupt_module_images_are_invalid_image) {
  Instance d;
  std::vector<std::byte> junk(4096);
  std::mt19937 gen(42);
  for (auto& b : junk) b = static_cast<std::byte>(gen());
  const std::string random = d.expect(api().load_module(d.inst, "junk", junk.data(), junk.size()),
                                      GPUPLUG_STATUS_INVALID_IMAGE, "random bytes");
  BOOST_TEST(contains(random, "invalid ELF header"), random);  // dlerror's words

  const auto image = read_file_or_fail(kKernels / "axpy.so");
  const std::vector<std::byte> header_only(image.begin(), image.begin() + 64);
  d.expect(api().load_module(d.inst, "hdr", header_only.data(), header_only.size()),
           GPUPLUG_STATUS_INVALID_IMAGE, "header only");
  d.expect(api().load_module(d.inst, "empty", image.data(), 0), GPUPLUG_STATUS_INVALID_IMAGE,
           "empty image");
}

BOOST_AUTO_TEST_CASE(modules_dir_option_and_default) {
  Instance d(OptionList{{"modules_dir", kTestKernels.string()}});
  std::int32_t has = 0;
  d.ok(api().has_module(d.inst, "bad_n_tile", &has), "has_module");
  BOOST_TEST(has == 1);
  d.ok(api().has_module(d.inst, "gemm", &has), "has_module");
  BOOST_TEST(has == 1);  // the built-in folder is still searched, first
  BOOST_TEST(d.global("bad_n_tile", "gemm_f32_n_tile").second == 2u);
  BOOST_TEST(d.published("gemm", "gemm_f32_n_tile") != 0u);  // the sample module, not the test one
}

BOOST_AUTO_TEST_CASE(every_block_runs_once_with_its_own_shared_memory) {
  Instance d(OptionList{{"threads", "4"}});
  const auto image = read_file_or_fail(kTestKernels / "test_probe.so");
  d.ok(api().load_module(d.inst, "probe", image.data(), image.size()), "load test_probe");
  const std::uint64_t f = d.function("probe", "block_probe");
  const std::uint64_t s = d.stream();
  const struct {
    gpuplug_dim3_t grid;
    std::uint32_t shared;
    std::uint64_t stream;
  } launches[] = {
      {dim(1), 8, 0}, {dim(5, 3, 2), 1024, 0}, {dim(7, 1, 9), 4096, s}, {dim(300), 256, s}};
  for (const auto& l : launches) {
    BOOST_TEST_CONTEXT("grid " << l.grid.x << "x" << l.grid.y << "x" << l.grid.z << ", stream "
                               << l.stream) {
      const std::uint64_t blocks = std::uint64_t{l.grid.x} * l.grid.y * l.grid.z;
      std::uint64_t out = d.alloc(blocks * 4);
      d.ok(api().memset_d8(d.inst, out, 0, blocks * 4, l.stream), "memset");
      void* params[] = {&out};
      d.ok(api().launch(d.inst, f, l.grid, dim(7), l.shared, l.stream, params),
           "launch block_probe");
      d.ok(api().stream_synchronize(d.inst, l.stream), "synchronize");
      const auto seen = d.download<std::uint32_t>(out, blocks);
      std::size_t bad = 0;
      for (std::uint64_t i = 0; i < blocks; ++i) bad += seen[i] != i + 1;
      BOOST_TEST(bad == 0u);
      d.free(out);
    }
  }
  d.ok(api().stream_destroy(d.inst, s), "stream_destroy");
}

BOOST_AUTO_TEST_CASE(launch_errors) {
  Instance d;
  std::uint32_t n = 1;
  void* params[] = {&n};
  const std::uint64_t f = d.function("axpy", "axpy");
  d.expect(api().launch(d.inst, f, dim(0), dim(256), 0, 0, params), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "empty grid");
  d.expect(api().launch(d.inst, f, dim(1), dim(1, 0), 0, 0, params),
           GPUPLUG_STATUS_INVALID_ARGUMENT, "empty block");
  d.expect(api().launch(d.inst, f, dim(1), dim(1), 0, 999, params), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "unknown stream");
}

// ---- errors, sweep ----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(last_error_can_be_reread_and_is_truncated_safely) {
  Instance d;
  d.expect(api().free(d.inst, 0x1234), GPUPLUG_STATUS_INVALID_ARGUMENT, "free unknown");
  char small[8];
  const std::size_t length = api().last_error(d.inst, small, sizeof small);
  BOOST_TEST(length > sizeof small);
  BOOST_TEST(std::strlen(small) == 7u);
  char full[256];
  BOOST_TEST(api().last_error(d.inst, full, sizeof full) == length);  // still there
  BOOST_TEST(contains(full, "free of 0x1234"), full);
}

BOOST_AUTO_TEST_CASE(destroy_sweeps_unreleased_allocations_with_a_warning) {
  LogCapture log;
  gpuplug_instance_t inst = nullptr;
  std::string error;
  BOOST_REQUIRE(try_create({}, &inst, &error, &log.services) == GPUPLUG_STATUS_SUCCESS);
  std::uint64_t p = 0;
  BOOST_REQUIRE(api().alloc(inst, 1000, "load_weights", &p) == GPUPLUG_STATUS_SUCCESS);
  BOOST_REQUIRE(api().alloc(inst, 2000, "load_weights", &p) == GPUPLUG_STATUS_SUCCESS);
  BOOST_REQUIRE(api().alloc_managed(inst, 24, "kv_cache", &p) == GPUPLUG_STATUS_SUCCESS);
  std::uint64_t s = 0;
  BOOST_REQUIRE(api().stream_create(inst, &s) == GPUPLUG_STATUS_SUCCESS);
  BOOST_REQUIRE(api().memset_d8(inst, p, 7, 24, s) ==
                GPUPLUG_STATUS_SUCCESS);  // pending work is waited for
  api().destroy(inst);
  const std::string logged = log.all();
  BOOST_TEST_INFO(logged);
  BOOST_TEST(contains(logged, "3: swept 3 unreleased allocations, 3024 bytes"));
  BOOST_TEST(contains(logged, "load_weights (3000 bytes in 2 allocations)"));
  BOOST_TEST(contains(logged, "kv_cache (24 bytes in 1 allocation)"));
}

BOOST_AUTO_TEST_CASE(explicit_sweep_reports_what_it_freed) {
  Instance d;
  d.alloc(100, "a");
  d.alloc_managed(50, "b");
  gpuplug_ledger_stats_t swept{};
  swept.struct_size = sizeof swept;
  d.ok(api().sweep_unreleased(d.inst, &swept), "sweep_unreleased");
  BOOST_TEST(swept.live_bytes == 150u);
  BOOST_TEST(swept.live_managed_bytes == 50u);
  BOOST_TEST(swept.total_frees == 2u);
  BOOST_TEST(d.stats().total_frees == 2u);
  BOOST_TEST(contains(d.log.all(), "swept 2 unreleased allocations"), d.log.all());
  d.ok(api().sweep_unreleased(d.inst, nullptr), "empty sweep");
}

// ---- modules_dir with several folders -------------------------------------------------------

namespace {

/// A fresh empty folder under the temp dir, removed with its content at the end of the case.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() /
           ("gpuplug-host-" + tag + "-" + std::to_string(::getpid()) + "-" +
            std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace

BOOST_AUTO_TEST_CASE(modules_dir_folders_are_searched_in_order_after_the_built_in_one) {
  TempDir a("a"), b("b");
  // "pick" is test_probe in folder a and bad_n_tile in folder b: which one loads shows the order.
  fs::copy_file(kTestKernels / "test_probe.so", a.path / "pick.so");
  fs::copy_file(kTestKernels / "bad_n_tile.so", b.path / "pick.so");
  fs::copy_file(kTestKernels / "bad_n_tile.so", b.path / "only_b.so");
  // b also holds an "axpy", shadowed by the built-in one.
  fs::copy_file(kTestKernels / "bad_n_tile.so", b.path / "axpy.so");
  Instance d(OptionList{{"modules_dir", a.path.string() + ":" + b.path.string()}});
  BOOST_TEST(d.function("pick", "block_probe") != 0u);  // from a, the earlier folder
  BOOST_TEST(d.global("only_b", "gemm_f32_n_tile").second == 2u);  // b is searched too
  BOOST_TEST(d.function("gemm", "gemm_f32") != 0u);  // the built-in modules are still there
  // The shadowed files are logged with both paths.
  BOOST_TEST(d.log.count(GPUPLUG_LOG_WARNING, (b.path / "pick.so").string() + " is shadowed") ==
                 1u,
             d.log.all());
  BOOST_TEST(d.log.count(GPUPLUG_LOG_WARNING, (a.path / "pick.so").string()) == 1u, d.log.all());
  BOOST_TEST(d.function("axpy", "axpy") != 0u);  // the built-in axpy, not b's
  BOOST_TEST(d.log.count(GPUPLUG_LOG_WARNING, (b.path / "axpy.so").string() + " is shadowed") ==
                 1u,
             d.log.all());
  BOOST_TEST(d.log.count(GPUPLUG_LOG_WARNING, (kKernels / "axpy.so").lexically_normal().string()) ==
                 1u,
             d.log.all());
  // A module found in one folder only is not "shadowed".
  BOOST_TEST(d.log.count(GPUPLUG_LOG_WARNING, "only_b") == 0u, d.log.all());

  std::uint64_t f = 0;
  const std::string missing = d.expect(api().get_function(d.inst, "nosuch", "f", &f),
                                       GPUPLUG_STATUS_NOT_FOUND, "a module in no folder");
  BOOST_TEST(contains(missing, a.path.string() + ":" + b.path.string()), missing);
}

BOOST_AUTO_TEST_CASE(modules_dir_refuses_empty_elements_and_names_a_bad_folder) {
  TempDir a("a");
  gpuplug_instance_t inst = nullptr;
  std::string error;
  for (const std::string& value :
       {a.path.string() + "::" + a.path.string(), ":" + a.path.string(), a.path.string() + ":",
        std::string(":")}) {
    BOOST_TEST_CONTEXT("modules_dir='" << value << "'") {
      BOOST_TEST(try_create({{"modules_dir", value}}, &inst, &error) ==
                 GPUPLUG_STATUS_INVALID_ARGUMENT);
      BOOST_TEST(inst == nullptr);
      BOOST_TEST(contains(error, "empty element"), error);
      BOOST_TEST(contains(error, "current folder"), error);
    }
  }
  BOOST_TEST(try_create({{"modules_dir", a.path.string() + ":/nonexistent/gpuplug"}}, &inst,
                        &error) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(error, "folder 2 of 2 '/nonexistent/gpuplug': No such file or directory"),
             error);
  BOOST_TEST(try_create({{"modules_dir", "/etc/passwd:" + a.path.string()}}, &inst, &error) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(contains(error, "folder 1 of 2 '/etc/passwd': not a folder"), error);
  // A folder name with a terminal escape is shown escaped.
  BOOST_TEST(try_create({{"modules_dir", a.path.string() + ":/no\x1b[31m"}}, &inst, &error) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(!contains(error, "\x1b"), error);
  BOOST_TEST(contains(error, "/no\\x1b[31m"), error);
}

// ---- modules loaded from files keep $ORIGIN; missing dependencies are named ------------------

namespace {
const fs::path kOriginKernels = GPUPLUG_TEST_HOST_ORIGIN_DIR;  // test_origin.so + its sibling
constexpr const char* kSibling = "libgpuplug_test_sibling.so";
}  // namespace

// First in this group: once the sibling is loaded, glibc would match a later DT_NEEDED by soname.
BOOST_AUTO_TEST_CASE(a_missing_dependency_is_named_not_invalid_image) {
  BOOST_TEST_REQUIRE(::dlopen(kSibling, RTLD_LAZY | RTLD_NOLOAD) == nullptr);
  TempDir alone("alone");
  fs::copy_file(kOriginKernels / "test_origin.so", alone.path / "test_origin.so");
  Instance d(OptionList{{"modules_dir", alone.path.string()}});
  std::uint64_t f = 0;
  const std::string from_file = d.expect(api().get_function(d.inst, "test_origin", "sibling_value", &f),
                                         GPUPLUG_STATUS_NOT_FOUND, "sibling missing");
  BOOST_TEST(contains(from_file, std::string("module test_origin needs ") + kSibling +
                                     ", which was not found"),
             from_file);
  BOOST_TEST(contains(from_file, (alone.path / "test_origin.so").string()), from_file);
  // From bytes as well (there $ORIGIN cannot help at all).
  const auto image = read_file_or_fail(kOriginKernels / "test_origin.so");
  const std::string from_bytes =
      d.expect(api().load_module(d.inst, "bytes", image.data(), image.size()),
               GPUPLUG_STATUS_NOT_FOUND, "sibling missing, from bytes");
  BOOST_TEST(contains(from_bytes, std::string("module bytes needs ") + kSibling), from_bytes);
}

BOOST_AUTO_TEST_CASE(a_module_from_a_file_finds_its_sibling_through_origin) {
  Instance d(OptionList{{"modules_dir", kOriginKernels.string()}});
  const std::uint64_t f = d.function("test_origin", "sibling_value");
  const std::uint64_t out = d.alloc(4);
  void* params[] = {const_cast<std::uint64_t*>(&out)};
  d.launch(f, dim(1), dim(1), params, "sibling_value");
  BOOST_TEST(d.download<std::uint32_t>(out, 1)[0] == 20260u);
  // A second instance gets its own copy of the module (private globals), still working.
  Instance e(OptionList{{"modules_dir", kOriginKernels.string()}});
  const std::uint64_t g = e.function("test_origin", "sibling_value");
  const std::uint64_t out2 = e.alloc(4);
  void* params2[] = {const_cast<std::uint64_t*>(&out2)};
  e.launch(g, dim(1), dim(1), params2, "sibling_value in a second instance");
  BOOST_TEST(e.download<std::uint32_t>(out2, 1)[0] == 20260u);
  d.free(out);
  e.free(out2);
}

// The load_module_file slot (what GpuBackend::load_module_file calls): the file is loaded by its
// path, as from a module folder, and registered by name as load_module registers it.
BOOST_AUTO_TEST_CASE(the_load_module_file_slot_loads_by_path_and_registers_by_name) {
  Instance d;
  const fs::path file = kOriginKernels / "test_origin.so";
  d.ok(api().load_module_file(d.inst, "origin_by_path", file.c_str()), "load_module_file");
  const std::uint64_t f = d.function("origin_by_path", "sibling_value");
  const std::uint64_t out = d.alloc(4);
  void* params[] = {const_cast<std::uint64_t*>(&out)};
  d.launch(f, dim(1), dim(1), params, "sibling_value");
  BOOST_TEST(d.download<std::uint32_t>(out, 1)[0] == 20260u);
  d.free(out);

  const std::string taken =
      d.expect(api().load_module_file(d.inst, "origin_by_path", file.c_str()),
               GPUPLUG_STATUS_INVALID_ARGUMENT, "a name already loaded");
  BOOST_TEST(contains(taken, "module origin_by_path is already loaded"), taken);
  d.expect(api().load_module_file(d.inst, "x", nullptr), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "a null path");
  d.expect(api().load_module_file(d.inst, nullptr, file.c_str()),
           GPUPLUG_STATUS_INVALID_ARGUMENT, "a null name");
  const std::string empty = d.expect(api().load_module_file(d.inst, "x", ""),
                                     GPUPLUG_STATUS_INVALID_ARGUMENT, "an empty path");
  BOOST_TEST(contains(empty, "the file path is empty"), empty);
  d.expect(api().load_module_file(d.inst, "a/b", file.c_str()), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "a name with '/'");
  const std::string missing =
      d.expect(api().load_module_file(d.inst, "gone", "/nonexistent/gpuplug/gone.so"),
               GPUPLUG_STATUS_NOT_FOUND, "a missing file");
  BOOST_TEST(contains(missing, "/nonexistent/gpuplug/gone.so"), missing);
  std::int32_t has = 1;
  d.ok(api().has_module(d.inst, "gone", &has), "has_module");
  BOOST_TEST(has == 0);  // a failed load leaves the name free
  d.ok(api().unload_module(d.inst, "origin_by_path"), "unload_module");
}

// ---- kernel handles belong to their instance --------------------------------------------------

BOOST_AUTO_TEST_CASE(a_kernel_handle_from_another_instance_is_refused) {
  Instance a, b;
  const std::uint64_t fa = a.function("axpy", "axpy");
  const std::uint64_t fb = b.function("axpy", "axpy");
  BOOST_TEST(fa != fb);
  std::uint32_t n = 0;  // nothing to do: n = 0
  float alpha = 1.0f;
  std::uint64_t x = b.alloc(4), y = b.alloc(4);
  void* params[] = {&n, &alpha, &x, &y};
  const std::string message = b.expect(api().launch(b.inst, fa, dim(1), dim(1), 0, 0, params),
                                       GPUPLUG_STATUS_INVALID_ARGUMENT, "a's handle on b");
  // Named by its value: a handle of another instance is never read, so not by its kernel.
  BOOST_TEST(contains(message, "kernel handle 0x"), message);
  BOOST_TEST(contains(message, "belongs to another backend instance"), message);
  b.launch(fb, dim(1), dim(1), params, "b's own handle");
  b.free(x);
  b.free(y);
}

// ---- kernels that throw fail their launch, not the process ------------------------------------

namespace {
struct Throws {
  Instance d{OptionList{{"threads", "4"}, {"modules_dir", kTestKernels.string()}}};
  std::uint64_t runtime = d.function("test_throws", "throw_runtime");
  std::uint64_t other = d.function("test_throws", "throw_other");
  std::uint64_t hostile = d.function("test_throws", "throw_hostile");
  std::uint64_t count = d.function("test_throws", "count");
  std::uint64_t counter = d.alloc(4);

  std::uint32_t counted() const { return d.download<std::uint32_t>(counter, 1)[0]; }
  void reset() const { d.upload(counter, std::vector<std::uint32_t>{0}); }
  /// Launches `count` over `blocks` blocks on `stream` and checks it ran every block.
  void good_launch(std::uint64_t stream, std::uint32_t blocks = 16) const {
    reset();
    void* params[] = {const_cast<std::uint64_t*>(&counter)};
    d.ok(api().launch(d.inst, count, dim(blocks), dim(1), 0, stream, params), "count");
    d.ok(api().stream_synchronize(d.inst, stream), "synchronize after count");
    BOOST_TEST(counted() == blocks);
  }
};
}  // namespace

BOOST_FIXTURE_TEST_CASE(a_throwing_kernel_is_reported_once_at_the_next_synchronize, Throws) {
  std::uint32_t fail_block = 3;
  void* params[] = {&fail_block, &counter};
  reset();
  // The launch itself succeeds, as an asynchronous launch would; the failure is pending.
  d.ok(api().launch(d.inst, runtime, dim(8), dim(1), 0, 0, params), "throw_runtime");
  const std::string message =
      d.expect(api().synchronize(d.inst), GPUPLUG_STATUS_LAUNCH_FAILED, "synchronize");
  BOOST_TEST(contains(message, "the default stream: kernel test_throws::throw_runtime threw "
                               "std::runtime_error in block (3, 0, 0): boom in block 3"),
             message);
  BOOST_TEST(counted() <= 7u);  // blocks not started when block 3 threw were skipped
  d.ok(api().synchronize(d.inst), "reported once: the next synchronize succeeds");
  good_launch(0);

  // A type that is not a std::exception, every block throwing.
  d.ok(api().launch(d.inst, other, dim(4), dim(1), 0, 0, params), "throw_other");
  const std::string unknown =
      d.expect(api().stream_synchronize(d.inst, 0), GPUPLUG_STATUS_LAUNCH_FAILED, "sync other");
  BOOST_TEST(contains(unknown, "kernel test_throws::throw_other threw an exception that is not a "
                               "std::exception"),
             unknown);
  BOOST_TEST(contains(unknown, "unknown exception"), unknown);
  good_launch(0);
}

BOOST_FIXTURE_TEST_CASE(a_hostile_exception_message_is_bounded_and_escaped, Throws) {
  d.ok(api().launch(d.inst, hostile, dim(1), dim(1), 0, 0, nullptr), "throw_hostile");
  const std::string message =
      d.expect(api().synchronize(d.inst), GPUPLUG_STATUS_LAUNCH_FAILED, "synchronize");
  BOOST_TEST(message.size() < 1200u, message.size());
  BOOST_TEST(!contains(message, "\x1b"), message);
  BOOST_TEST(!contains(message, "\n"), message);
  BOOST_TEST(contains(message, "evil\\x1b[31mred\\nforged log line\\xff\\xfe"), message);
  BOOST_TEST(contains(message, "(100030 bytes in all)"), message);
  good_launch(0);
}

BOOST_FIXTURE_TEST_CASE(on_a_stream_the_next_launch_reports_it_and_is_not_run, Throws) {
  const std::uint64_t s = d.stream();
  std::uint32_t fail_block = 0;
  void* params[] = {&fail_block, &counter};
  d.ok(api().launch(d.inst, runtime, dim(2), dim(1), 0, s, params), "throw_runtime");
  d.ok(api().launch(d.inst, runtime, dim(2), dim(1), 0, 0, params), "default stream");
  reset();
  void* count_params[] = {&counter};
  const std::string earlier =
      d.expect(api().launch(d.inst, count, dim(4), dim(1), 0, s, count_params),
               GPUPLUG_STATUS_LAUNCH_FAILED, "launch after the failure");
  BOOST_TEST(contains(earlier, "launch of test_throws::count not run"), earlier);
  BOOST_TEST(contains(earlier, "stream " + std::to_string(s) + ": kernel test_throws::throw_runtime"),
             earlier);
  BOOST_TEST(counted() == 0u);  // it did not run
  good_launch(s);               // reported once: the stream works again
  // The default stream's failure is still pending, independently.
  const std::string other =
      d.expect(api().synchronize(d.inst), GPUPLUG_STATUS_LAUNCH_FAILED, "default stream");
  BOOST_TEST(contains(other, "the default stream"), other);
  // Destroying a stream reports what is pending on it, and the stream is gone either way.
  d.ok(api().launch(d.inst, runtime, dim(2), dim(1), 0, s, params), "throw_runtime again");
  d.expect(api().stream_destroy(d.inst, s), GPUPLUG_STATUS_LAUNCH_FAILED, "stream_destroy");
  d.expect(api().stream_synchronize(d.inst, s), GPUPLUG_STATUS_INVALID_ARGUMENT, "destroyed");
  d.ok(api().synchronize(d.inst), "nothing left pending");
}

// ABI 1.1: an event whose capture covers a failed launch reports it from event_synchronize,
// naming the event and the kernel; the stream still reports it once, as before.
BOOST_FIXTURE_TEST_CASE(event_synchronize_reports_a_failed_launch_it_captured, Throws) {
  const std::uint64_t s = d.stream();
  std::uint64_t e = 0;
  d.ok(api().event_create(d.inst, &e), "event_create");
  std::uint32_t fail_block = 0;
  void* params[] = {&fail_block, &counter};
  d.ok(api().launch(d.inst, runtime, dim(2), dim(1), 0, s, params), "throw_runtime");
  d.ok(api().event_record(d.inst, e, s), "event_record");
  const std::string message =
      d.expect(api().event_synchronize(d.inst, e), GPUPLUG_STATUS_LAUNCH_FAILED, "event_sync");
  BOOST_TEST(contains(message, "a launch captured by event " + std::to_string(e) + " failed"),
             message);
  BOOST_TEST(
      contains(message, "stream " + std::to_string(s) + ": kernel test_throws::throw_runtime"),
      message);
  d.expect(api().stream_synchronize(d.inst, s), GPUPLUG_STATUS_LAUNCH_FAILED, "stream sync");
  d.ok(api().stream_synchronize(d.inst, s), "reported once by the stream");
  // Recorded again after the stream reported it: a clean capture.
  d.ok(api().event_record(d.inst, e, s), "event_record again");
  d.ok(api().event_synchronize(d.inst, e), "event_synchronize, clean");
  // On the default stream (a record there covers it too).
  d.ok(api().launch(d.inst, runtime, dim(2), dim(1), 0, 0, params), "throw_runtime on 0");
  d.ok(api().event_record(d.inst, e, 0), "event_record on 0");
  const std::string on_default =
      d.expect(api().event_synchronize(d.inst, e), GPUPLUG_STATUS_LAUNCH_FAILED, "event_sync 0");
  BOOST_TEST(contains(on_default, "the default stream: kernel test_throws::throw_runtime"),
             on_default);
  d.expect(api().synchronize(d.inst), GPUPLUG_STATUS_LAUNCH_FAILED, "synchronize");
  d.ok(api().event_destroy(d.inst, e), "event_destroy");
}

BOOST_FIXTURE_TEST_CASE(failures_on_concurrent_streams_stay_on_their_stream, Throws) {
  constexpr int kThreads = 6, kRounds = 40;
  std::vector<std::thread> threads;
  std::vector<std::string> problems(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::uint64_t s = 0;
      if (api().stream_create(d.inst, &s) != GPUPLUG_STATUS_SUCCESS) {
        problems[t] = "stream_create failed";
        return;
      }
      std::uint64_t ran = 0;
      if (api().alloc(d.inst, 4, "ran", &ran) != GPUPLUG_STATUS_SUCCESS) {
        problems[t] = "alloc failed";
        return;
      }
      for (int r = 0; r < kRounds && problems[t].empty(); ++r) {
        const std::uint32_t zero = 0;
        api().copy_h2d(d.inst, ran, &zero, 4);
        if (r % 2 == 0) {
          // Block t of 8 throws; the message must name this thread's block.
          std::uint32_t fail_block = static_cast<std::uint32_t>(t);
          void* params[] = {&fail_block, &ran};
          if (api().launch(d.inst, runtime, dim(8), dim(1), 0, s, params) != GPUPLUG_STATUS_SUCCESS)
            problems[t] = "throwing launch refused: " + d.last_error();
          else if (api().stream_synchronize(d.inst, s) != GPUPLUG_STATUS_LAUNCH_FAILED)
            problems[t] = "round " + std::to_string(r) + ": no LAUNCH_FAILED";
          else if (!contains(d.last_error(),
                             "stream " + std::to_string(s) + ": kernel test_throws::throw_runtime "
                             "threw std::runtime_error in block (" + std::to_string(t)))
            problems[t] = "wrong message: " + d.last_error();
        } else {
          void* params[] = {&ran};
          std::uint32_t n = 0;
          if (api().launch(d.inst, count, dim(8), dim(1), 0, s, params) != GPUPLUG_STATUS_SUCCESS ||
              api().stream_synchronize(d.inst, s) != GPUPLUG_STATUS_SUCCESS)
            problems[t] = "round " + std::to_string(r) + ": good kernel failed: " + d.last_error();
          else if (api().copy_d2h(d.inst, &n, ran, 4) != GPUPLUG_STATUS_SUCCESS || n != 8)
            problems[t] = "round " + std::to_string(r) + ": count ran " + std::to_string(n);
        }
      }
      api().free(d.inst, ran);
      api().stream_destroy(d.inst, s);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) BOOST_TEST(problems[t].empty(), "thread " << t << ": " << problems[t]);
  d.ok(api().synchronize(d.inst), "nothing pending at the end");
  good_launch(0);
}
