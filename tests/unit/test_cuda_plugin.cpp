// SPDX-License-Identifier: Apache-2.0
// libgpuplug-cuda.so through its C table: loads anywhere, says why CUDA is unusable, and (on a GPU)
// works.

// Runs on both kinds of machine: without libcuda.so.1 it checks the "driver missing" report and
// clean refusals; with a driver and a device it also runs real work against CPU references.
// CTest also runs it against a fake libcuda.so.1 (fake_libcuda.c), once per driver failure.

#define BOOST_TEST_MODULE test_cuda_plugin
#include <dlfcn.h>
#include <gpuplug/abi.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../../kernels/common/e4m3.h"

namespace {

const char* const kPluginFile = GPUPLUG_TEST_PLUGIN_DIR "/libgpuplug-cuda.so";

// The plugin, loaded once for the whole run (the loader keeps it until exit).
const gpuplug_plugin_v1& table() {
  static const gpuplug_plugin_v1* t = [] {
    void* lib = dlopen(kPluginFile, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) BOOST_FAIL("dlopen " << kPluginFile << ": " << dlerror());
    auto entry = reinterpret_cast<gpuplug_plugin_entry_fn>(dlsym(lib, GPUPLUG_PLUGIN_ENTRY_SYMBOL));
    BOOST_TEST_REQUIRE(entry != nullptr);
    const gpuplug_plugin_v1* tab = entry(GPUPLUG_ABI_VERSION);
    BOOST_TEST_REQUIRE(tab != nullptr);
    return tab;
  }();
  return *t;
}

// Whether this machine has a CUDA driver at all, judged independently of the plugin.
bool driver_present() {
  static const bool present = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) != nullptr;
  return present;
}

gpuplug_probe_result_t probe() {
  gpuplug_probe_result_t r{};
  r.struct_size = sizeof r;
  BOOST_TEST_REQUIRE(table().probe(&r) == GPUPLUG_STATUS_SUCCESS);
  return r;
}

// Precondition of the GPU cases: a device is available. Otherwise Boost.Test reports the case
// as skipped, with the probe's reason as the message.
boost::test_tools::assertion_result device_ready(boost::unit_test::test_unit_id) {
  gpuplug_probe_result_t r{};
  r.struct_size = sizeof r;
  const bool probed = table().probe(&r) == GPUPLUG_STATUS_SUCCESS;
  boost::test_tools::assertion_result ready(probed && r.reason == GPUPLUG_PROBE_AVAILABLE);
  ready.message() << (probed ? r.message : "probe failed");
  return ready;
}

boost::unit_test::precondition needs_device() {
  return boost::unit_test::precondition(&device_ready);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- a created instance, for the GPU-only cases --------------------------------------------

struct Instance {
  gpuplug_instance_t inst = nullptr;
  const gpuplug_plugin_v1& t = table();

  Instance() {
    char error[512] = {};
    const gpuplug_status_t s = t.create(0, nullptr, 0, nullptr, &inst, error, sizeof error);
    BOOST_TEST_REQUIRE(s == GPUPLUG_STATUS_SUCCESS, "create(0): " << error);
  }
  ~Instance() {
    if (inst != nullptr) t.destroy(inst);
  }
  std::string last_error() const {
    char buf[1024] = {};
    t.last_error(inst, buf, sizeof buf);
    return buf;
  }
  void ok(gpuplug_status_t s, const char* what) const {
    BOOST_TEST_REQUIRE(s == GPUPLUG_STATUS_SUCCESS,
                       what << ": status " << s << ": " << last_error());
  }
  std::uint64_t alloc(std::uint64_t bytes) {
    std::uint64_t p = 0;
    ok(t.alloc(inst, bytes, "test_cuda_plugin", &p), "alloc");
    BOOST_TEST_REQUIRE(p != 0);
    return p;
  }
  template <class T>
  std::uint64_t upload(const std::vector<T>& host) {
    const std::uint64_t p = alloc(host.size() * sizeof(T));
    ok(t.copy_h2d(inst, p, host.data(), host.size() * sizeof(T)), "copy_h2d");
    return p;
  }
  template <class T>
  std::vector<T> download(std::uint64_t p, std::size_t n) {
    std::vector<T> host(n);
    ok(t.copy_d2h(inst, host.data(), p, n * sizeof(T)), "copy_d2h");
    return host;
  }
  std::uint64_t function(const char* module, const char* func) {
    std::uint64_t f = 0;
    ok(t.get_function(inst, module, func, &f), func);
    BOOST_TEST_REQUIRE(f != 0);
    return f;
  }
  // A published 4-byte symbol, read back from the device.
  std::uint32_t published(const char* module, const char* symbol) {
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    ok(t.get_global(inst, module, symbol, &address, &size), symbol);
    BOOST_TEST_REQUIRE(size == 4u);
    std::uint32_t value = 0;
    ok(t.copy_d2h(inst, &value, address, sizeof value), symbol);
    return value;
  }
};

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// C = A * B in double, with A optionally rounded through E4M3 first.
std::vector<float> gemm_reference(std::uint32_t M, std::uint32_t N, std::uint32_t K,
                                  const std::vector<float>& A, const std::vector<float>& B,
                                  bool round_a) {
  std::vector<float> C(std::size_t{M} * N);
  for (std::uint32_t i = 0; i < M; ++i) {
    for (std::uint32_t j = 0; j < N; ++j) {
      double sum = 0;
      for (std::uint32_t k = 0; k < K; ++k) {
        float a = A[std::size_t{i} * K + k];
        if (round_a) a = gpuplug_e4m3_to_f32(gpuplug_f32_to_e4m3(a));
        sum += double{a} * B[std::size_t{k} * N + j];
      }
      C[std::size_t{i} * N + j] = static_cast<float>(sum);
    }
  }
  return C;
}

void run_gemm(Instance& dev, const char* func, bool round_a) {
  const std::uint32_t M = 67, N = 131, K = 45;  // no dimension a multiple of a tile
  const auto A = random_floats(std::size_t{M} * K, 1);
  const auto B = random_floats(std::size_t{K} * N, 2);
  const std::uint64_t a = dev.upload(A), b = dev.upload(B), c = dev.alloc(std::size_t{M} * N * 4);
  const std::uint32_t n_tile = dev.published("gemm", (std::string(func) + "_n_tile").c_str());
  BOOST_TEST_REQUIRE(n_tile > 0u);
  const std::uint64_t f = dev.function("gemm", func);
  void* params[] = {const_cast<std::uint32_t*>(&M), const_cast<std::uint32_t*>(&N),
                    const_cast<std::uint32_t*>(&K), const_cast<std::uint64_t*>(&a),
                    const_cast<std::uint64_t*>(&b), const_cast<std::uint64_t*>(&c)};
  dev.ok(dev.t.launch(dev.inst, f, {(N + n_tile - 1) / n_tile, (M + 15) / 16, 1}, {16, 16, 1}, 0, 0,
                      params),
         func);
  dev.ok(dev.t.synchronize(dev.inst), "synchronize");
  const auto got = dev.download<float>(c, std::size_t{M} * N);
  const auto want = gemm_reference(M, N, K, A, B, round_a);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(got[i] - want[i]) > 1e-4f * (1.0f + std::fabs(want[i]))) ++bad;
  }
  BOOST_TEST(bad == 0u,
             func << ": " << bad << " of " << got.size() << " elements differ from the CPU");
  for (std::uint64_t p : {a, b, c}) dev.ok(dev.t.free(dev.inst, p), "free");
}

}  // namespace

// ---- every machine ------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(plugin_loads_without_a_driver_and_names_itself) {
  const gpuplug_plugin_v1& t = table();
  BOOST_TEST(t.struct_size >= GPUPLUG_PLUGIN_V1_MIN_SIZE);
  BOOST_TEST(GPUPLUG_VERSION_MAJOR(t.abi_version) == GPUPLUG_ABI_VERSION_MAJOR);
  BOOST_TEST(std::string(t.name) == "cuda");
  BOOST_TEST(std::string(t.vendor) == "NVIDIA");
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
  // The driver is loaded once per process: a second probe says the same.
  const gpuplug_probe_result_t again = probe();
  BOOST_TEST(again.reason == r.reason);
  BOOST_TEST(std::string(again.message) == message);
}

BOOST_AUTO_TEST_CASE(create_and_describe_refuse_cleanly_with_the_reason) {
  const gpuplug_probe_result_t r = probe();
  // Unavailable: ordinal 0 is refused; available: the first ordinal past the last device.
  const std::uint32_t ordinal = r.reason == GPUPLUG_PROBE_AVAILABLE ? r.device_count : 0;
  char error[512] = {};
  gpuplug_instance_t inst = nullptr;
  const gpuplug_status_t s =
      table().create(ordinal, nullptr, 0, nullptr, &inst, error, sizeof error);
  BOOST_TEST(s == GPUPLUG_STATUS_UNAVAILABLE);
  BOOST_TEST(inst == nullptr);
  BOOST_TEST_MESSAGE("create(" << ordinal << "): " << error);
  if (r.reason == GPUPLUG_PROBE_AVAILABLE) {
    BOOST_TEST(contains(error, "no CUDA device " + std::to_string(ordinal)), error);
  } else {
    BOOST_TEST(contains(error, r.message), error);
  }
  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  BOOST_TEST(table().describe_device(ordinal, &info) == GPUPLUG_STATUS_UNAVAILABLE);
}

// ---- a machine with an NVIDIA GPU -----------------------------------------------------------

BOOST_AUTO_TEST_CASE(device_info_is_reported, *needs_device()) {
  gpuplug_device_info_t listed{};
  listed.struct_size = sizeof listed;
  BOOST_TEST_REQUIRE(table().describe_device(0, &listed) == GPUPLUG_STATUS_SUCCESS);
  Instance dev;
  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  dev.ok(dev.t.device_info(dev.inst, &info), "device_info");
  BOOST_TEST_MESSAGE("device 0: " << info.name << ", " << info.arch << ", " << info.uuid << ", "
                                  << info.compute_units << " SMs, " << info.free_memory << " of "
                                  << info.total_memory << " bytes free");
  BOOST_TEST(std::string(info.name) == listed.name);
  BOOST_TEST(std::string(info.uuid) == listed.uuid);
  BOOST_TEST(std::strncmp(info.uuid, "GPU-", 4) == 0);
  BOOST_TEST(std::strlen(info.uuid) == 40u);
  BOOST_TEST(std::strncmp(info.arch, "sm_", 3) == 0);
  BOOST_TEST(info.compute_units > 0u);
  BOOST_TEST(info.total_memory > 0u);
  BOOST_TEST(info.free_memory > 0u);  // the instance holds a context, so free memory is known
  BOOST_TEST(info.free_memory <= info.total_memory);
  std::uint64_t free_bytes = 0, total_bytes = 0;
  dev.ok(dev.t.memory_info(dev.inst, &free_bytes, &total_bytes), "memory_info");
  BOOST_TEST(total_bytes > 0u);
}

BOOST_AUTO_TEST_CASE(axpy_runs_on_the_device, *needs_device()) {
  Instance dev;
  const std::uint32_t n = 100'003;
  const float alpha = 1.5f;
  const auto x = random_floats(n, 3);
  const auto y = random_floats(n, 4);
  const std::uint64_t dx = dev.upload(x), dy = dev.upload(y);
  // The module comes from the default modules_dir, <plugin dir>/../kernels/cuda.
  const std::uint64_t f = dev.function("axpy", "axpy");
  void* params[] = {const_cast<std::uint32_t*>(&n), const_cast<float*>(&alpha),
                    const_cast<std::uint64_t*>(&dx), const_cast<std::uint64_t*>(&dy)};
  dev.ok(dev.t.launch(dev.inst, f, {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, 0, params),
         "launch axpy");
  const auto got = dev.download<float>(dy, n);
  std::size_t bad = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (std::fabs(got[i] - std::fma(alpha, x[i], y[i])) > 1e-6f * (1.0f + std::fabs(y[i]))) ++bad;
  }
  BOOST_TEST(bad == 0u);

  gpuplug_ledger_stats_t stats{};
  stats.struct_size = sizeof stats;
  dev.ok(dev.t.ledger_stats(dev.inst, &stats), "ledger_stats");
  BOOST_TEST(stats.live_count == 2u);
  BOOST_TEST(stats.live_bytes == 2 * std::uint64_t{n} * sizeof(float));
  dev.ok(dev.t.free(dev.inst, dx), "free");
  dev.ok(dev.t.free(dev.inst, dy), "free");
  BOOST_TEST(dev.t.free(dev.inst, dy) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);  // double free: an error, no crash

  // A missing kernel names the module's kernels (when the driver can enumerate them).
  std::uint64_t missing = 0;
  BOOST_TEST(dev.t.get_function(dev.inst, "axpy", "axpy_f16", &missing) ==
             GPUPLUG_STATUS_NOT_FOUND);
  BOOST_TEST_MESSAGE("missing kernel: " << dev.last_error());
  BOOST_TEST(contains(dev.last_error(), "axpy_f16"));
}

BOOST_AUTO_TEST_CASE(gemm_kernels_match_the_cpu, *needs_device()) {
  Instance dev;
  run_gemm(dev, "gemm_f32", false);
  BOOST_TEST(dev.published("gemm", "gemm_a_e4m3_a_e4m3") == 1u);
  run_gemm(dev, "gemm_a_e4m3", true);
}

BOOST_AUTO_TEST_CASE(e4m3_cast_is_bit_identical_to_the_shared_header, *needs_device()) {
  Instance dev;
  std::vector<float> in = random_floats(4096, 5);
  for (float v :
       {0.0f, -0.0f, 448.0f, 464.0f, -1e9f, 1e-3f, 0.0009765625f, 0.00146484375f, NAN, INFINITY})
    in.push_back(v);
  const auto n = static_cast<std::uint32_t>(in.size());
  const std::uint64_t d_in = dev.upload(in), d_out = dev.alloc(n),
                      d_back = dev.alloc(std::size_t{n} * 4);
  const std::uint64_t to8 = dev.function("e4m3", "cast_f32_e4m3"),
                      to32 = dev.function("e4m3", "cast_e4m3_f32");
  void* p1[] = {const_cast<std::uint32_t*>(&n), const_cast<std::uint64_t*>(&d_in),
                const_cast<std::uint64_t*>(&d_out)};
  void* p2[] = {const_cast<std::uint32_t*>(&n), const_cast<std::uint64_t*>(&d_out),
                const_cast<std::uint64_t*>(&d_back)};
  dev.ok(dev.t.launch(dev.inst, to8, {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, 0, p1),
         "cast_f32_e4m3");
  dev.ok(dev.t.launch(dev.inst, to32, {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, 0, p2),
         "cast_e4m3_f32");
  const auto bytes = dev.download<std::uint8_t>(d_out, n);
  const auto back = dev.download<float>(d_back, n);
  std::size_t bad = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint8_t want = gpuplug_f32_to_e4m3(in[i]);
    const float want_back = gpuplug_e4m3_to_f32(want);
    // Bits, not values: NaN must come back as the same NaN.
    // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
    if (bytes[i] != want || std::memcmp(&back[i], &want_back, 4) != 0) ++bad;
  }
  BOOST_TEST(bad == 0u);
  for (std::uint64_t p : {d_in, d_out, d_back}) dev.ok(dev.t.free(dev.inst, p), "free");
}

BOOST_AUTO_TEST_CASE(streams_memset_async_copies_and_managed_memory, *needs_device()) {
  Instance dev;
  std::uint64_t stream = 0;
  dev.ok(dev.t.stream_create(dev.inst, &stream), "stream_create");
  const std::size_t n = 1 << 20;
  const std::uint64_t a = dev.alloc(n), b = dev.alloc(n);
  std::vector<std::uint8_t> host(n, 0);
  dev.ok(dev.t.memset_d8(dev.inst, a, 0x5A, n, stream), "memset_d8");
  dev.ok(dev.t.copy_d2d_async(dev.inst, b, a, n, stream), "copy_d2d_async");
  dev.ok(dev.t.copy_d2h_async(dev.inst, host.data(), b, n, stream), "copy_d2h_async");
  dev.ok(dev.t.stream_synchronize(dev.inst, stream), "stream_synchronize");
  BOOST_TEST(std::count(host.begin(), host.end(), 0x5A) == static_cast<std::ptrdiff_t>(n));
  dev.ok(dev.t.stream_destroy(dev.inst, stream), "stream_destroy");
  BOOST_TEST(dev.t.stream_destroy(dev.inst, stream) == GPUPLUG_STATUS_INVALID_ARGUMENT);

  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  dev.ok(dev.t.device_info(dev.inst, &info), "device_info");
  std::uint64_t managed = 0;
  const gpuplug_status_t s = dev.t.alloc_managed(dev.inst, 4096, "test_cuda_plugin", &managed);
  if (info.managed_memory != 0) {
    dev.ok(s, "alloc_managed");
    dev.ok(dev.t.free(dev.inst, managed), "free managed");
  } else {
    BOOST_TEST(s == GPUPLUG_STATUS_UNSUPPORTED);
  }
  // Left live on purpose: destroy sweeps them (with a warning) instead of leaking.
  (void)a;
  (void)b;
}
