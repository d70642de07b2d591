// SPDX-License-Identifier: Apache-2.0
// libgpuplug-hip.so through its C table: loads anywhere, says why HIP is unusable, and (on a GPU)
// works.

// Runs on every kind of machine. Without libamdhip64 it checks the "driver missing" report; with
// the runtime but no AMD GPU (the build machine: Debian's HIP 5.2, no /dev/kfd) the "no AMD GPU
// (hipErrorNoDevice)" report; in both cases clean refusals from create and describe_device. With
// an AMD GPU the device cases also run real work (allocation, copies, streams, the four kernel
// modules) against CPU references; elsewhere Boost.Test reports them skipped with the reason.

#define BOOST_TEST_MODULE test_hip_plugin
#include <dlfcn.h>
#include <gpuplug/abi.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "../../kernels/common/e4m3.h"

namespace {

const char* const kPluginFile = GPUPLUG_TEST_PLUGIN_DIR "/libgpuplug-hip.so";
const char* const kRuntimeNames[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};

// The plugin, loaded once for the whole run (and kept until exit).
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

// Whether the HIP runtime is in the process already (RTLD_NOLOAD loads nothing).
bool runtime_loaded() {
  for (const char* name : kRuntimeNames) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {
      dlclose(h);  // balances the reference NOLOAD took
      return true;
    }
  }
  return false;
}

// Whether this machine has a HIP runtime at all, judged independently of the plugin.
bool runtime_present() {
  static const bool present = [] {
    for (const char* name : kRuntimeNames)
      if (dlopen(name, RTLD_LAZY | RTLD_LOCAL) != nullptr) return true;
    return false;
  }();
  return present;
}

// Without the amdgpu kernel driver's /dev/kfd no AMD GPU can be used, whatever the runtime says.
bool kfd_present() { return std::filesystem::exists("/dev/kfd"); }

gpuplug_probe_result_t probe() {
  gpuplug_probe_result_t r{};
  r.struct_size = sizeof r;
  BOOST_TEST_REQUIRE(table().probe(&r) == GPUPLUG_STATUS_SUCCESS);
  return r;
}

// Precondition of the GPU cases: a device is available; otherwise the case is reported as
// skipped, with the probe's reason.
boost::unit_test::precondition needs_device() {
  return boost::unit_test::precondition([](boost::unit_test::test_unit_id) {
    gpuplug_probe_result_t r{};
    r.struct_size = sizeof r;
    const bool probed = table().probe(&r) == GPUPLUG_STATUS_SUCCESS;
    boost::test_tools::assertion_result ready(probed && r.reason == GPUPLUG_PROBE_AVAILABLE);
    ready.message() << (probed ? r.message : "probe failed");
    return ready;
  });
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- a created instance, for the GPU cases --------------------------------------------------

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
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  std::string last_error() const {
    char buf[1024] = {};
    t.last_error(inst, buf, sizeof buf);
    return buf;
  }
  void ok(gpuplug_status_t s, const std::string& what) const {
    BOOST_TEST_REQUIRE(s == GPUPLUG_STATUS_SUCCESS,
                       what << ": status " << s << ": " << last_error());
  }
  std::uint64_t alloc(std::uint64_t bytes) {
    std::uint64_t p = 0;
    ok(t.alloc(inst, bytes, "test_hip_plugin", &p), "alloc");
    BOOST_TEST_REQUIRE(p != 0u);
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
    ok(t.get_function(inst, module, func, &f), std::string(module) + "::" + func);
    BOOST_TEST_REQUIRE(f != 0u);
    return f;
  }
  // A published 4-byte symbol, read back from the device.
  std::uint32_t published(const char* module, const std::string& symbol) {
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    ok(t.get_global(inst, module, symbol.c_str(), &address, &size), symbol);
    BOOST_TEST_REQUIRE(size == 4u);
    std::uint32_t value = 0;
    ok(t.copy_d2h(inst, &value, address, sizeof value), symbol);
    return value;
  }
  void launch(std::uint64_t f, gpuplug_dim3_t grid, gpuplug_dim3_t block, void** params,
              const char* what) {
    ok(t.launch(inst, f, grid, block, 0, 0, params), what);
  }
};

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

std::uint32_t blocks_of(std::uint64_t n, std::uint32_t per_block) {
  return static_cast<std::uint32_t>((n + per_block - 1) / per_block);
}

// C = A * B in double, A optionally rounded through E4M3 first.
std::vector<float> gemm_reference(std::uint32_t M, std::uint32_t N, std::uint32_t K,
                                  const std::vector<float>& A, const std::vector<float>& B,
                                  bool round_a) {
  std::vector<float> C(std::size_t{M} * N);
  for (std::uint32_t i = 0; i < M; ++i)
    for (std::uint32_t j = 0; j < N; ++j) {
      double sum = 0;
      for (std::uint32_t k = 0; k < K; ++k) {
        float a = A[std::size_t{i} * K + k];
        if (round_a) a = gpuplug_e4m3_to_f32(gpuplug_f32_to_e4m3(a));
        sum += double{a} * B[std::size_t{k} * N + j];
      }
      C[std::size_t{i} * N + j] = static_cast<float>(sum);
    }
  return C;
}

}  // namespace

// ---- every machine --------------------------------------------------------------------------

// First case on purpose: nothing has touched the runtime yet, so "not loaded" proves the plugin
// has no DT_NEEDED on libamdhip64.
BOOST_AUTO_TEST_CASE(plugin_loads_anywhere_and_names_itself) {
  const gpuplug_plugin_v1& t = table();
  BOOST_TEST(t.struct_size >= GPUPLUG_PLUGIN_V1_MIN_SIZE);
  BOOST_TEST(GPUPLUG_VERSION_MAJOR(t.abi_version) == GPUPLUG_ABI_VERSION_MAJOR);
  BOOST_TEST(std::string(t.name) == "hip");
  BOOST_TEST(std::string(t.vendor) == "AMD");
  BOOST_TEST(!runtime_loaded(), "loading the plugin pulled in libamdhip64: it must be dlopen'ed");
}

BOOST_AUTO_TEST_CASE(probe_reports_why_hip_is_or_is_not_usable) {
  const gpuplug_probe_result_t r = probe();
  const std::string message = r.message;
  BOOST_TEST_MESSAGE("probe: reason " << r.reason << ", " << r.device_count
                                      << " devices: " << message);
  BOOST_TEST(!message.empty());
  if (!runtime_present()) {
    BOOST_TEST(r.reason == GPUPLUG_PROBE_DRIVER_MISSING);
    BOOST_TEST(contains(message, "driver missing: libamdhip64.so not found"), message);
    BOOST_TEST(r.device_count == 0u);
  } else if (!kfd_present()) {
    // This build machine: the runtime is installed, the GPU is not.
    BOOST_TEST(r.reason == GPUPLUG_PROBE_NO_DEVICE);
    BOOST_TEST(contains(message, "no AMD GPU (hipErrorNoDevice)"), message);
    BOOST_TEST(r.device_count == 0u);
  } else if (r.reason == GPUPLUG_PROBE_AVAILABLE) {
    BOOST_TEST(r.device_count > 0u);
    BOOST_TEST(contains(message, "HIP runtime"), message);
  } else {
    BOOST_TEST(r.reason != GPUPLUG_PROBE_DRIVER_MISSING);
    BOOST_TEST(r.device_count == 0u);
    if (r.reason == GPUPLUG_PROBE_NO_DEVICE) BOOST_TEST(contains(message, "hipErrorNoDevice"));
    if (r.reason == GPUPLUG_PROBE_DRIVER_TOO_OLD) BOOST_TEST(contains(message, "driver too old"));
  }
  // The runtime is opened once per process: a second probe says the same.
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
  BOOST_TEST_MESSAGE("create(" << ordinal << "): " << error);
  BOOST_TEST(s == GPUPLUG_STATUS_UNAVAILABLE);
  BOOST_TEST(inst == nullptr);
  if (r.reason == GPUPLUG_PROBE_AVAILABLE)
    BOOST_TEST(contains(error, "no device hip:" + std::to_string(ordinal)), error);
  else
    BOOST_TEST(contains(error, r.message), error);

  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  BOOST_TEST(table().describe_device(ordinal, &info) == GPUPLUG_STATUS_UNAVAILABLE);
}

// ---- a machine with an AMD GPU --------------------------------------------------------------

BOOST_AUTO_TEST_CASE(device_info_is_reported, *needs_device()) {
  gpuplug_device_info_t listed{};
  listed.struct_size = sizeof listed;
  BOOST_TEST_REQUIRE(table().describe_device(0, &listed) == GPUPLUG_STATUS_SUCCESS);
  Instance dev;
  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  dev.ok(dev.t.device_info(dev.inst, &info), "device_info");
  BOOST_TEST_MESSAGE("device 0: " << info.name << ", " << info.arch << ", uuid '" << info.uuid
                                  << "', " << info.compute_units << " CUs, " << info.free_memory
                                  << " of " << info.total_memory << " bytes free, managed "
                                  << info.managed_memory);
  BOOST_TEST(std::string(info.name) == listed.name);
  BOOST_TEST(std::string(info.uuid) == listed.uuid);
  BOOST_TEST(std::string(info.arch) == listed.arch);
  BOOST_TEST(std::strncmp(info.arch, "gfx", 3) == 0, info.arch);
  BOOST_TEST(info.compute_units > 0u);
  BOOST_TEST(info.total_memory > 0u);
  BOOST_TEST(info.free_memory <= info.total_memory);
  std::uint64_t free_bytes = 0, total_bytes = 0;
  dev.ok(dev.t.memory_info(dev.inst, &free_bytes, &total_bytes), "memory_info");
  BOOST_TEST(total_bytes > 0u);
  BOOST_TEST(free_bytes <= total_bytes);
}

BOOST_AUTO_TEST_CASE(axpy_runs_on_the_device, *needs_device()) {
  Instance dev;
  const std::uint32_t n = 100'003;
  const float alpha = 1.5f;
  const auto x = random_floats(n, 3);
  const auto y = random_floats(n, 4);
  std::uint64_t dx = dev.upload(x), dy = dev.upload(y);
  // The module comes from the default modules_dir, <plugin dir>/../kernels/hip.
  const std::uint64_t f = dev.function("axpy", "axpy");
  void* params[] = {const_cast<std::uint32_t*>(&n), const_cast<float*>(&alpha), &dx, &dy};
  dev.launch(f, {blocks_of(n, 256), 1, 1}, {256, 1, 1}, params, "axpy");
  const auto got = dev.download<float>(dy, n);
  std::size_t bad = 0;
  for (std::uint32_t i = 0; i < n; ++i)
    if (std::fabs(got[i] - (alpha * x[i] + y[i])) > 1e-5f * (1.0f + std::fabs(y[i]))) ++bad;
  BOOST_TEST(bad == 0u);

  gpuplug_ledger_stats_t stats{};
  stats.struct_size = sizeof stats;
  dev.ok(dev.t.ledger_stats(dev.inst, &stats), "ledger_stats");
  BOOST_TEST(stats.live_count == 2u);
  BOOST_TEST(stats.live_bytes == 2u * n * sizeof(float));
  dev.ok(dev.t.free(dev.inst, dx), "free");
  dev.ok(dev.t.free(dev.inst, dy), "free");
  BOOST_TEST(dev.t.free(dev.inst, dy) == GPUPLUG_STATUS_INVALID_ARGUMENT);  // an error, no crash

  // A missing kernel names the module's kernels (read from the code object's symbols).
  std::uint64_t missing = 0;
  BOOST_TEST(dev.t.get_function(dev.inst, "axpy", "axpy_f16", &missing) ==
             GPUPLUG_STATUS_NOT_FOUND);
  const std::string why = dev.last_error();
  BOOST_TEST_MESSAGE("missing kernel: " << why);
  BOOST_TEST(contains(why, "axpy_f16"), why);
  BOOST_TEST(contains(why, "axpy"), why);
}

BOOST_AUTO_TEST_CASE(gemm_kernels_match_the_cpu, *needs_device()) {
  Instance dev;
  BOOST_TEST(dev.published("gemm", "gemm_a_e4m3_a_e4m3") == 1u);
  for (const char* func : {"gemm_f32", "gemm_a_e4m3"}) {
    const bool round_a = std::string(func) == "gemm_a_e4m3";
    const std::uint32_t M = 67, N = 131, K = 45;  // no dimension a multiple of a tile
    const auto A = random_floats(std::size_t{M} * K, 1);
    const auto B = random_floats(std::size_t{K} * N, 2);
    std::uint64_t a = dev.upload(A), b = dev.upload(B), c = dev.alloc(std::size_t{M} * N * 4);
    const std::uint32_t n_tile = dev.published("gemm", std::string(func) + "_n_tile");
    BOOST_TEST_REQUIRE(n_tile == 64u);
    const std::uint64_t f = dev.function("gemm", func);
    void* params[] = {const_cast<std::uint32_t*>(&M),
                      const_cast<std::uint32_t*>(&N),
                      const_cast<std::uint32_t*>(&K),
                      &a,
                      &b,
                      &c};
    dev.launch(f, {blocks_of(N, n_tile), blocks_of(M, 16), 1}, {16, 16, 1}, params, func);
    dev.ok(dev.t.synchronize(dev.inst), "synchronize");
    const auto got = dev.download<float>(c, std::size_t{M} * N);
    const auto want = gemm_reference(M, N, K, A, B, round_a);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (std::fabs(got[i] - want[i]) > 1e-4f * (1.0f + std::fabs(want[i]))) ++bad;
    BOOST_TEST(bad == 0u, func << ": " << bad << " of " << got.size() << " differ from the CPU");
    for (std::uint64_t p : {a, b, c}) dev.ok(dev.t.free(dev.inst, p), "free");
  }
}

BOOST_AUTO_TEST_CASE(e4m3_cast_is_bit_identical_to_the_shared_header, *needs_device()) {
  Instance dev;
  std::vector<float> in = random_floats(4096, 5);
  for (float v : {0.0f, -0.0f, 448.0f, 464.0f, -1e9f, 1e-3f, 0.0009765625f, 0.00146484375f, NAN,
                  INFINITY, -INFINITY})
    in.push_back(v);
  const auto n = static_cast<std::uint32_t>(in.size());
  std::uint64_t d_in = dev.upload(in), d_out = dev.alloc(n), d_back = dev.alloc(std::size_t{n} * 4);
  const std::uint64_t to8 = dev.function("e4m3", "cast_f32_e4m3");
  const std::uint64_t to32 = dev.function("e4m3", "cast_e4m3_f32");
  void* p1[] = {const_cast<std::uint32_t*>(&n), &d_in, &d_out};
  void* p2[] = {const_cast<std::uint32_t*>(&n), &d_out, &d_back};
  dev.launch(to8, {blocks_of(n, 256), 1, 1}, {256, 1, 1}, p1, "cast_f32_e4m3");
  dev.launch(to32, {blocks_of(n, 256), 1, 1}, {256, 1, 1}, p2, "cast_e4m3_f32");
  const auto bytes = dev.download<std::uint8_t>(d_out, n);
  const auto back = dev.download<float>(d_back, n);
  std::size_t bad = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint8_t want = gpuplug_f32_to_e4m3(in[i]);
    const float want_back = gpuplug_e4m3_to_f32(want);
    if (bytes[i] != want || std::memcmp(&back[i], &want_back, 4) != 0) ++bad;
  }
  BOOST_TEST(bad == 0u);
  for (std::uint64_t p : {d_in, d_out, d_back}) dev.ok(dev.t.free(dev.inst, p), "free");
}

BOOST_AUTO_TEST_CASE(bias_relu_matches_the_cpu, *needs_device()) {
  Instance dev;
  const std::uint32_t rows = 37, cols = 301;
  const auto x = random_floats(std::size_t{rows} * cols, 6);
  const auto bias = random_floats(cols, 7);
  std::uint64_t d_x = dev.upload(x), d_bias = dev.upload(bias);
  const std::uint64_t f = dev.function("activation", "bias_relu");
  void* params[] = {const_cast<std::uint32_t*>(&rows), const_cast<std::uint32_t*>(&cols), &d_bias,
                    &d_x};
  dev.launch(f, {blocks_of(std::uint64_t{rows} * cols, 256), 1, 1}, {256, 1, 1}, params,
             "bias_relu");
  const auto got = dev.download<float>(d_x, x.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (got[i] != std::max(x[i] + bias[i % cols], 0.0f)) ++bad;
  BOOST_TEST(bad == 0u);
  for (std::uint64_t p : {d_x, d_bias}) dev.ok(dev.t.free(dev.inst, p), "free");
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
  BOOST_TEST(dev.t.stream_synchronize(dev.inst, stream) == GPUPLUG_STATUS_INVALID_ARGUMENT);

  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  dev.ok(dev.t.device_info(dev.inst, &info), "device_info");
  std::uint64_t managed = 0;
  const gpuplug_status_t s = dev.t.alloc_managed(dev.inst, 4096, "test_hip_plugin", &managed);
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

BOOST_AUTO_TEST_CASE(modules_load_from_bytes_and_bad_images_are_refused, *needs_device()) {
  Instance dev;
  std::ifstream file(std::string(GPUPLUG_TEST_KERNEL_DIR) + "/hip/axpy.hsaco", std::ios::binary);
  const std::vector<char> image((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  BOOST_TEST_REQUIRE(!image.empty());
  dev.ok(dev.t.load_module(dev.inst, "axpy_bytes", image.data(), image.size()), "load_module");
  BOOST_TEST(dev.function("axpy_bytes", "axpy") != 0u);
  BOOST_TEST(dev.t.load_module(dev.inst, "axpy_bytes", image.data(), image.size()) ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);  // the name is taken

  const std::string junk = "definitely not a code object";
  BOOST_TEST(dev.t.load_module(dev.inst, "junk", junk.data(), junk.size()) ==
             GPUPLUG_STATUS_INVALID_IMAGE);
  BOOST_TEST(contains(dev.last_error(), "junk"), dev.last_error());
  // A bundle cut short: its entries lie outside the bytes given, so it never reaches HIP.
  BOOST_TEST(dev.t.load_module(dev.inst, "cut", image.data(), 64) == GPUPLUG_STATUS_INVALID_IMAGE);
}
