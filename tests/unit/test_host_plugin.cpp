// SPDX-License-Identifier: Apache-2.0
// The host plugin through its C table only: dlopen libgpuplug-host.so, call gpuplug_plugin_entry,
// and exercise every slot (memory, copies, streams, modules, launches, ledger, errors).
#define BOOST_TEST_MODULE host_plugin
#include <dlfcn.h>
#include <gpuplug/abi.h>
#include <sys/utsname.h>

#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "e4m3.h"

namespace fs = std::filesystem;

namespace {

const fs::path kPlugin = fs::path(GPUPLUG_TEST_PLUGIN_DIR) / "libgpuplug-host.so";
const fs::path kKernels = fs::path(GPUPLUG_TEST_KERNEL_DIR) / "host";
#ifdef GPUPLUG_TEST_HOST_KERNEL_DIR
const fs::path kTestKernels = GPUPLUG_TEST_HOST_KERNEL_DIR;
#else  // <build>/lib/gpuplug/plugins -> <build>/tests/kernels/host
const fs::path kTestKernels =
    fs::path(GPUPLUG_TEST_PLUGIN_DIR) / ".." / ".." / ".." / "tests" / "kernels" / "host";
#endif

/// The plugin, loaded once for the whole test module.
struct LoadedPlugin {
  void* handle = nullptr;
  const gpuplug_plugin_v1* table = nullptr;

  LoadedPlugin() {
    handle = dlopen(kPlugin.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) throw std::runtime_error(std::string("dlopen: ") + dlerror());
    auto entry =
        reinterpret_cast<gpuplug_plugin_entry_fn>(dlsym(handle, GPUPLUG_PLUGIN_ENTRY_SYMBOL));
    if (entry == nullptr) throw std::runtime_error("no gpuplug_plugin_entry");
    table = entry(GPUPLUG_ABI_VERSION);
    if (table == nullptr) throw std::runtime_error("gpuplug_plugin_entry returned null");
  }
  ~LoadedPlugin() {
    if (handle != nullptr) dlclose(handle);
  }
  static LoadedPlugin* instance;
};
LoadedPlugin* LoadedPlugin::instance = nullptr;

struct GlobalFixture {
  LoadedPlugin plugin;
  GlobalFixture() { LoadedPlugin::instance = &plugin; }
  ~GlobalFixture() { LoadedPlugin::instance = nullptr; }
};

const gpuplug_plugin_v1& api() { return *LoadedPlugin::instance->table; }

/// Collects what the plugin logs through the host services.
struct LogCapture {
  std::mutex mutex;
  std::vector<std::pair<gpuplug_log_level_t, std::string>> lines;
  gpuplug_host_services_t services{sizeof(gpuplug_host_services_t), this, &LogCapture::log};

  static void log(void* user, gpuplug_log_level_t level, const char* message) {
    auto* self = static_cast<LogCapture*>(user);
    std::lock_guard lock(self->mutex);
    self->lines.emplace_back(level, message);
  }
  std::string all() {
    std::lock_guard lock(mutex);
    std::string out;
    for (const auto& [level, text] : lines) out += std::to_string(level) + ": " + text + "\n";
    return out;
  }
};

using OptionList = std::vector<std::pair<std::string, std::string>>;

/// create() with options; returns the status and fills inst / error.
gpuplug_status_t try_create(const OptionList& options, gpuplug_instance_t* inst, std::string* error,
                            const gpuplug_host_services_t* services = nullptr,
                            std::uint32_t ordinal = 0) {
  std::vector<gpuplug_option_t> raw;
  for (const auto& [k, v] : options) raw.push_back({k.c_str(), v.c_str()});
  char buf[1024] = "unset";
  const gpuplug_status_t s = api().create(
      ordinal, raw.data(), static_cast<std::uint32_t>(raw.size()), services, inst, buf, sizeof buf);
  if (error != nullptr) *error = buf;
  return s;
}

/// One instance for a test, destroyed at the end.
struct Instance {
  gpuplug_instance_t inst = nullptr;

  explicit Instance(const OptionList& options = {},
                    const gpuplug_host_services_t* services = nullptr) {
    std::string error;
    const auto s = try_create(options, &inst, &error, services);
    BOOST_REQUIRE_MESSAGE(s == GPUPLUG_STATUS_SUCCESS, "create failed (" << s << "): " << error);
    BOOST_REQUIRE(inst != nullptr);
  }
  ~Instance() {
    if (inst != nullptr) api().destroy(inst);
  }
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  std::string error() const {
    char buf[2048];
    api().last_error(inst, buf, sizeof buf);
    return buf;
  }
  void ok(gpuplug_status_t s, const char* what) const {
    if (s != GPUPLUG_STATUS_SUCCESS)
      BOOST_FAIL(what << " failed with status " << s << ": " << error());
  }
  /// Expects `status`; returns the message.
  std::string expect(gpuplug_status_t s, gpuplug_status_t status, const char* what) const {
    const std::string message = error();
    BOOST_TEST(s == status,
               what << ": status " << s << ", expected " << status << " (" << message << ")");
    return message;
  }

  std::uint64_t alloc(std::uint64_t bytes, const char* site = "test") const {
    std::uint64_t p = 0;
    ok(api().alloc(inst, bytes, site, &p), "alloc");
    return p;
  }
  std::uint64_t alloc_managed(std::uint64_t bytes, const char* site = "test") const {
    std::uint64_t p = 0;
    ok(api().alloc_managed(inst, bytes, site, &p), "alloc_managed");
    return p;
  }
  void free(std::uint64_t p) const { ok(api().free(inst, p), "free"); }
  std::uint64_t stream() const {
    std::uint64_t s = 0;
    ok(api().stream_create(inst, &s), "stream_create");
    return s;
  }
  std::uint64_t function(const char* module, const char* func) const {
    std::uint64_t f = 0;
    ok(api().get_function(inst, module, func, &f), "get_function");
    return f;
  }
  std::pair<std::uint64_t, std::uint64_t> global(const char* module, const char* symbol) const {
    std::uint64_t address = 0, size = 0;
    ok(api().get_global(inst, module, symbol, &address, &size), "get_global");
    return {address, size};
  }
  gpuplug_ledger_stats_t stats() const {
    gpuplug_ledger_stats_t st{};
    st.struct_size = sizeof st;
    ok(api().ledger_stats(inst, &st), "ledger_stats");
    return st;
  }
  template <class V>
  void upload(std::uint64_t dst, const std::vector<V>& v) const {
    ok(api().copy_h2d(inst, dst, v.data(), v.size() * sizeof(V)), "copy_h2d");
  }
  template <class V>
  std::vector<V> download(std::uint64_t src, std::size_t n) const {
    std::vector<V> v(n);
    ok(api().copy_d2h(inst, v.data(), src, n * sizeof(V)), "copy_d2h");
    return v;
  }
};

std::vector<std::byte> read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(in, "cannot open " << file);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

gpuplug_dim3_t dim(std::uint32_t x, std::uint32_t y = 1, std::uint32_t z = 1) { return {x, y, z}; }

std::uint32_t ceil_div(std::uint64_t a, std::uint64_t b) {
  return static_cast<std::uint32_t>((a + b - 1) / b);
}

std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -2.0f,
                                 float hi = 2.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(gen);
  return v;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

/// Launches axpy on `stream`: y = a*x + y for n elements.
gpuplug_status_t launch_axpy(const Instance& d, std::uint64_t f, std::uint32_t n, float a,
                             std::uint64_t x, std::uint64_t y, std::uint64_t stream) {
  void* params[] = {&n, &a, &x, &y};
  return api().launch(d.inst, f, dim(ceil_div(n, 256)), dim(256), 0, stream, params);
}

/// C = A * B on the device with `func` from module gemm, using the published n_tile.
std::vector<float> device_gemm(const Instance& d, const char* func, std::uint32_t M,
                               std::uint32_t N, std::uint32_t K, const std::vector<float>& A,
                               const std::vector<float>& B) {
  const std::uint64_t f = d.function("gemm", func);
  const std::string tile_symbol = std::string(func) + "_n_tile";
  const auto [tile_address, tile_size] = d.global("gemm", tile_symbol.c_str());
  BOOST_REQUIRE(tile_size == 4u);
  std::uint32_t n_tile = 0;
  d.ok(api().copy_d2h(d.inst, &n_tile, tile_address, 4), "copy_d2h n_tile");
  BOOST_REQUIRE(n_tile > 0u);

  std::uint64_t a = d.alloc(A.size() * 4), b = d.alloc(B.size() * 4),
                c = d.alloc(std::uint64_t{M} * N * 4);
  d.upload(a, A);
  d.upload(b, B);
  d.ok(api().memset_d8(d.inst, c, 0xFF, std::uint64_t{M} * N * 4, 0),
       "memset");  // NaN everywhere first
  void* params[] = {&M, &N, &K, &a, &b, &c};
  d.ok(
      api().launch(d.inst, f, dim(ceil_div(N, n_tile), ceil_div(M, 16)), dim(16, 16), 0, 0, params),
      "launch gemm");
  std::vector<float> C = d.download<float>(c, std::size_t{M} * N);
  d.free(a);
  d.free(b);
  d.free(c);
  return C;
}

std::vector<float> reference_gemm(std::uint32_t M, std::uint32_t N, std::uint32_t K,
                                  std::vector<float> A, const std::vector<float>& B, bool cast_a) {
  if (cast_a)
    for (float& x : A) x = gpuplug_e4m3_to_f32(gpuplug_f32_to_e4m3(x));
  std::vector<float> C(std::size_t{M} * N);
  for (std::uint32_t i = 0; i < M; ++i)
    for (std::uint32_t j = 0; j < N; ++j) {
      double acc = 0;
      for (std::uint32_t k = 0; k < K; ++k)
        acc += double(A[std::size_t{i} * K + k]) * B[std::size_t{k} * N + j];
      C[std::size_t{i} * N + j] = static_cast<float>(acc);
    }
  return C;
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, float tolerance) {
  BOOST_REQUIRE(got.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tolerance * (1.0f + std::fabs(want[i])))) {
      if (++bad <= 5) BOOST_ERROR("element " << i << ": got " << got[i] << ", want " << want[i]);
    }
  }
  BOOST_TEST(bad == 0u);
}

}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(GlobalFixture);

// ---- identity, probe, create -----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(identity_and_negotiated_version) {
  BOOST_TEST(api().struct_size >= GPUPLUG_PLUGIN_V1_MIN_SIZE);
  BOOST_TEST(GPUPLUG_VERSION_MAJOR(api().abi_version) == 1u);
  BOOST_TEST(std::string(api().name) == "host");
  BOOST_TEST(std::string(api().vendor) == "gpuplug");
  BOOST_TEST(std::string(api().version).size() > 0u);
  // Every slot is filled, optional ones included.
  const void* const* slots = reinterpret_cast<const void* const*>(&api().probe);
  const std::size_t count =
      (sizeof(gpuplug_plugin_v1) - offsetof(gpuplug_plugin_v1, probe)) / sizeof(void*);
  for (std::size_t i = 0; i < count; ++i) BOOST_TEST(slots[i] != nullptr, "slot " << i);
}

BOOST_AUTO_TEST_CASE(probe_and_describe) {
  gpuplug_probe_result_t probe{};
  probe.struct_size = sizeof probe;
  BOOST_REQUIRE(api().probe(&probe) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(probe.reason == GPUPLUG_PROBE_AVAILABLE);
  BOOST_TEST(probe.device_count == 1u);

  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  BOOST_REQUIRE(api().describe_device(0, &info) == GPUPLUG_STATUS_SUCCESS);
  utsname u{};
  uname(&u);
  BOOST_TEST(std::string(info.arch) == u.machine);
  BOOST_TEST(std::strlen(info.name) > 0u);
  BOOST_TEST(std::string(info.uuid).empty());
  BOOST_TEST(info.total_memory > 0u);
  BOOST_TEST(info.free_memory <= info.total_memory);
  BOOST_TEST(info.compute_units >= 1u);
  BOOST_TEST(info.managed_memory == 1u);
  BOOST_TEST(api().describe_device(1, &info) == GPUPLUG_STATUS_UNAVAILABLE);

  gpuplug_instance_t inst = nullptr;
  std::string error;
  BOOST_TEST(try_create({}, &inst, &error, nullptr, 1) == GPUPLUG_STATUS_UNAVAILABLE);
  BOOST_TEST(inst == nullptr);
  BOOST_TEST(error == "no device 1: host has 1 device");
}

BOOST_AUTO_TEST_CASE(instance_device_and_memory_info) {
  Instance d(OptionList{{"threads", "3"}});
  gpuplug_device_info_t info{};
  info.struct_size = sizeof info;
  d.ok(api().device_info(d.inst, &info), "device_info");
  BOOST_TEST(info.compute_units == 3u);
  BOOST_TEST(info.ordinal == 0u);
  std::uint64_t free_bytes = 0, total = 0;
  d.ok(api().memory_info(d.inst, &free_bytes, &total), "memory_info");
  BOOST_TEST(total > 0u);
  BOOST_TEST(free_bytes <= total);
  info.struct_size = 4;  // too small for v1
  d.expect(api().device_info(d.inst, &info), GPUPLUG_STATUS_INVALID_ARGUMENT, "device_info small");
}

BOOST_AUTO_TEST_CASE(unknown_and_malformed_options_are_rejected) {
  gpuplug_instance_t inst = nullptr;
  std::string error;
  BOOST_TEST(try_create({{"frobnicate", "1"}}, &inst, &error) == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(inst == nullptr);
  BOOST_TEST(
      error ==
      "unknown option 'frobnicate' (known options: device_memory_limit, modules_dir, threads)");

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

BOOST_AUTO_TEST_CASE(alloc_free_and_ledger) {
  Instance d;
  const std::uint64_t a = d.alloc(1000, "weights");
  const std::uint64_t m = d.alloc_managed(24, "kv");
  BOOST_TEST(a % 256 == 0u);
  BOOST_TEST(m % 256 == 0u);
  auto st = d.stats();
  BOOST_TEST(st.live_bytes == 1024u);
  BOOST_TEST(st.live_count == 2u);
  BOOST_TEST(st.live_managed_bytes == 24u);
  BOOST_TEST(st.total_allocs == 2u);

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
  d.ok(api().free(d.inst, 0), "free(0)");
  st = d.stats();
  BOOST_TEST(st.live_count == 0u);
  BOOST_TEST(st.total_frees == 2u);
  BOOST_TEST(st.peak_bytes == 1024u);
}

BOOST_AUTO_TEST_CASE(free_of_unknown_pointer_and_double_free) {
  Instance d;
  std::uint64_t local = 0;
  const std::string unknown = d.expect(api().free(d.inst, reinterpret_cast<std::uintptr_t>(&local)),
                                       GPUPLUG_STATUS_INVALID_ARGUMENT, "free unknown");
  BOOST_TEST(contains(unknown, "not allocated by host:0 (or already freed)"), unknown);
  const std::uint64_t a = d.alloc(64);
  d.expect(api().free(d.inst, a + 16), GPUPLUG_STATUS_INVALID_ARGUMENT, "free interior");
  d.free(a);
  const std::string twice =
      d.expect(api().free(d.inst, a), GPUPLUG_STATUS_INVALID_ARGUMENT, "double free");
  BOOST_TEST(contains(twice, "(or already freed)"), twice);
  BOOST_TEST(d.stats().total_frees == 1u);
}

BOOST_AUTO_TEST_CASE(zero_byte_allocations) {
  Instance d;
  const std::uint64_t a = d.alloc(0);
  const std::uint64_t b = d.alloc(0);
  const std::uint64_t m = d.alloc_managed(0);
  BOOST_TEST(a != 0u);
  BOOST_TEST(b != 0u);
  BOOST_TEST(a != b);
  BOOST_TEST(m != a);
  auto st = d.stats();
  BOOST_TEST(st.live_count == 3u);
  BOOST_TEST(st.live_bytes == 0u);
  const char byte = 1;
  d.ok(api().copy_h2d(d.inst, a, &byte, 0), "zero-byte copy");
  d.expect(api().copy_h2d(d.inst, a, &byte, 1), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "copy into a zero-byte allocation");
  d.free(a);
  d.free(b);
  d.free(m);
  d.expect(api().free(d.inst, a), GPUPLUG_STATUS_INVALID_ARGUMENT, "double free of zero-byte");
}

BOOST_AUTO_TEST_CASE(device_memory_limit_fails_device_but_not_managed) {
  Instance d(OptionList{{"device_memory_limit", "1M"}});
  const std::uint64_t a = d.alloc(600 * 1024);
  std::uint64_t b = 0;
  const std::string msg = d.expect(api().alloc(d.inst, 600 * 1024, "second", &b),
                                   GPUPLUG_STATUS_OUT_OF_MEMORY, "alloc past limit");
  BOOST_TEST(b == 0u);
  BOOST_TEST(contains(msg, "device_memory_limit of 1048576 bytes (1.0 MiB) reached"), msg);
  BOOST_TEST(contains(msg, "614400 bytes (600.0 KiB) live"), msg);
  BOOST_TEST(contains(msg, "614400 bytes (600.0 KiB) requested"), msg);
  const std::uint64_t m = d.alloc_managed(600 * 1024);  // managed memory is not limited
  const std::uint64_t m2 = d.alloc_managed(2 * 1024 * 1024);
  std::uint64_t free_bytes = 0, total = 0;
  d.ok(api().memory_info(d.inst, &free_bytes, &total), "memory_info");
  BOOST_TEST(total <= 1048576u);
  BOOST_TEST(free_bytes <= 1048576u - 600 * 1024);
  d.free(a);
  const std::uint64_t c = d.alloc(1024 * 1024);  // the whole limit, once the first is gone
  d.free(c);
  d.free(m);
  d.free(m2);
}

// ---- copies, memset, streams -----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(sync_copies_round_trip_and_check_ranges) {
  Instance d;
  const std::vector<float> host = random_floats(1000, 1);
  const std::uint64_t a = d.alloc(4000), b = d.alloc(4000);
  d.upload(a, host);
  d.ok(api().copy_d2d(d.inst, b, a, 4000), "copy_d2d");
  BOOST_TEST(d.download<float>(b, 1000) == host);
  // Interior pointers are fine while they stay inside their allocation.
  d.ok(api().copy_d2d(d.inst, b + 400, a, 3600), "copy_d2d interior");
  BOOST_TEST(d.download<float>(b + 400, 900) ==
             std::vector<float>(host.begin(), host.begin() + 900));

  std::vector<char> big(4001);
  const std::string over = d.expect(api().copy_h2d(d.inst, a, big.data(), 4001),
                                    GPUPLUG_STATUS_INVALID_ARGUMENT, "copy_h2d past the end");
  BOOST_TEST(contains(over, "copy_h2d"), over);
  BOOST_TEST(contains(over, "allocation of 4000 bytes"), over);
  char hexptr[32];
  std::snprintf(hexptr, sizeof hexptr, "0x%llx", static_cast<unsigned long long>(a));
  BOOST_TEST(contains(over, hexptr), over);
  d.expect(api().copy_d2h(d.inst, big.data(), b + 8, 3993), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "copy_d2h past the end");
  d.expect(api().copy_d2d(d.inst, a, b + 1, 4000), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "copy_d2d source past the end");
  const std::string ms = d.expect(api().memset_d8(d.inst, a + 3999, 0, 2, 0),
                                  GPUPLUG_STATUS_INVALID_ARGUMENT, "memset past the end");
  BOOST_TEST(contains(ms, "memset_d8"), ms);
  d.expect(api().copy_h2d(d.inst, 0, big.data(), 4), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "null destination");
  d.expect(api().copy_h2d(d.inst, a, nullptr, 4), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "null host source");
  d.free(a);
  d.free(b);
}

BOOST_AUTO_TEST_CASE(pointers_that_are_not_device_memory_are_refused) {
  Instance d;
  std::vector<char> host(64);
  const std::uint64_t unknown = 0x1000;
  const std::string msg = d.expect(api().copy_h2d(d.inst, unknown, host.data(), 16),
                                   GPUPLUG_STATUS_INVALID_ARGUMENT, "copy_h2d to 0x1000");
  BOOST_TEST(contains(msg, "copy_h2d: 0x1000 + 16 bytes is not memory of this device"), msg);
  d.expect(api().copy_d2h(d.inst, host.data(), unknown, 16), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "copy_d2h from 0x1000");
  d.expect(api().memset_d8(d.inst, unknown, 0, 16, 0), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "memset 0x1000");
  const std::uint64_t s = d.stream();
  d.expect(api().copy_d2h_async(d.inst, host.data(), unknown, 16, s),
           GPUPLUG_STATUS_INVALID_ARGUMENT, "copy_d2h_async from 0x1000");
  const std::uint64_t stale = d.alloc(64);
  d.free(stale);
  d.expect(api().copy_h2d(d.inst, stale, host.data(), 16), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "copy to a freed pointer");
  // Module globals are device memory: readable, but the read-only ones cannot be written.
  const auto [tile, size] = d.global("gemm", "gemm_f32_n_tile");
  std::uint32_t value = 0;
  d.ok(api().copy_d2h(d.inst, &value, tile, size), "read n_tile");
  d.expect(api().copy_d2h(d.inst, &value, tile, 1 << 20), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "read past the module's segment");
  const std::string ro = d.expect(api().copy_h2d(d.inst, tile, &value, 4),
                                  GPUPLUG_STATUS_INVALID_ARGUMENT, "write a const global");
  BOOST_TEST(contains(ro, "read-only module memory"), ro);
  d.ok(api().stream_destroy(d.inst, s), "stream_destroy");
}

BOOST_AUTO_TEST_CASE(memset_on_default_and_other_streams) {
  Instance d;
  const std::uint64_t a = d.alloc(1024);
  d.ok(api().memset_d8(d.inst, a, 0xAB, 1024, 0), "memset");
  d.ok(api().synchronize(d.inst), "synchronize");
  auto bytes = d.download<std::uint8_t>(a, 1024);
  BOOST_TEST(std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t v) { return v == 0xAB; }));
  const std::uint64_t s = d.stream();
  d.ok(api().memset_d8(d.inst, a + 100, 0x01, 10, s), "memset on stream");
  d.ok(api().stream_synchronize(d.inst, s), "stream_synchronize");
  bytes = d.download<std::uint8_t>(a, 1024);
  BOOST_TEST(bytes[99] == 0xABu);
  BOOST_TEST(bytes[100] == 0x01u);
  BOOST_TEST(bytes[109] == 0x01u);
  BOOST_TEST(bytes[110] == 0xABu);
  d.ok(api().stream_destroy(d.inst, s), "stream_destroy");
  d.free(a);
}

BOOST_AUTO_TEST_CASE(async_operations_keep_stream_order) {
  Instance d;
  const std::uint64_t s = d.stream();
  const std::uint64_t buf = d.alloc(4096), other = d.alloc(4096);
  // 200 ops on one stream, each of which only gives the right answer if the ones before it ran
  // first: fill with i, then read back into slot i.
  constexpr int kSteps = 100;
  std::vector<std::uint8_t> seen(kSteps * 4096, 0xEE);
  for (int i = 0; i < kSteps; ++i) {
    d.ok(api().memset_d8(d.inst, buf, static_cast<std::uint8_t>(i), 4096, s), "memset async");
    d.ok(api().copy_d2d_async(d.inst, other, buf, 4096, s), "copy_d2d_async");
    d.ok(api().copy_d2h_async(d.inst, seen.data() + i * 4096, other, 4096, s), "copy_d2h_async");
  }
  d.ok(api().stream_synchronize(d.inst, s), "stream_synchronize");
  for (int i = 0; i < kSteps; ++i)
    BOOST_TEST(std::count(seen.begin() + i * 4096, seen.begin() + (i + 1) * 4096,
                          static_cast<std::uint8_t>(i)) == 4096);

  // h2d_async then a legacy-default-stream copy: stream 0 waits for every stream.
  const std::vector<float> host = random_floats(1024, 7);
  d.ok(api().copy_h2d_async(d.inst, buf, host.data(), 4096, s), "copy_h2d_async");
  BOOST_TEST(d.download<float>(buf, 1024) == host);  // copy_d2h on stream 0 is ordered after s
  d.ok(api().stream_destroy(d.inst, s), "stream_destroy");
  d.free(buf);
  d.free(other);
}

BOOST_AUTO_TEST_CASE(streams_run_independently_and_synchronize_waits_for_all) {
  Instance d;
  constexpr int kStreams = 4;
  constexpr std::size_t kBytes = 1 << 20;
  std::vector<std::uint64_t> streams, bufs;
  std::vector<std::vector<std::uint8_t>> out(kStreams, std::vector<std::uint8_t>(kBytes));
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(d.stream());
    bufs.push_back(d.alloc(kBytes));
  }
  for (int round = 0; round < 20; ++round)
    for (int i = 0; i < kStreams; ++i)
      d.ok(api().memset_d8(d.inst, bufs[i], static_cast<std::uint8_t>(i * 10 + round), kBytes,
                           streams[i]),
           "memset");
  for (int i = 0; i < kStreams; ++i)
    d.ok(api().copy_d2h_async(d.inst, out[i].data(), bufs[i], kBytes, streams[i]),
         "copy_d2h_async");
  d.ok(api().synchronize(d.inst), "synchronize");
  for (int i = 0; i < kStreams; ++i)
    BOOST_TEST(std::count(out[i].begin(), out[i].end(), static_cast<std::uint8_t>(i * 10 + 19)) ==
               static_cast<long>(kBytes));
  for (int i = 0; i < kStreams; ++i) {
    d.ok(api().stream_destroy(d.inst, streams[i]), "stream_destroy");
    d.free(bufs[i]);
  }
}

BOOST_AUTO_TEST_CASE(stream_errors) {
  Instance d;
  const std::string zero = d.expect(api().stream_destroy(d.inst, 0),
                                    GPUPLUG_STATUS_INVALID_ARGUMENT, "destroy the default stream");
  BOOST_TEST(contains(zero, "default stream"), zero);
  const std::string unknown = d.expect(api().stream_synchronize(d.inst, 4242),
                                       GPUPLUG_STATUS_INVALID_ARGUMENT, "unknown stream");
  BOOST_TEST(contains(unknown, "unknown stream 4242"), unknown);
  const std::uint64_t s = d.stream();
  d.ok(api().stream_destroy(d.inst, s), "stream_destroy");
  d.expect(api().stream_destroy(d.inst, s), GPUPLUG_STATUS_INVALID_ARGUMENT, "destroy twice");
  const std::uint64_t a = d.alloc(16);
  d.expect(api().memset_d8(d.inst, a, 0, 16, s), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "memset on a destroyed stream");
  d.ok(api().stream_synchronize(d.inst, 0), "synchronize the default stream");
  d.free(a);
}

// ---- modules and launches ---------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(axpy_on_default_stream_and_on_a_stream) {
  Instance d;
  const std::uint64_t f = d.function("axpy", "axpy");
  for (std::uint32_t n : {1u, 255u, 256u, 257u, 100003u}) {
    BOOST_TEST_CONTEXT("n = " << n) {
      const std::vector<float> x = random_floats(n, n), y = random_floats(n, n + 1);
      // One extra element after y: a kernel without bounds checks would overwrite it.
      const std::uint64_t dx = d.alloc(n * 4), dy = d.alloc((n + 1) * 4);
      d.upload(dx, x);
      std::vector<float> y_guard = y;
      y_guard.push_back(12345.0f);
      d.upload(dy, y_guard);
      BOOST_REQUIRE(launch_axpy(d, f, n, 2.5f, dx, dy, 0) == GPUPLUG_STATUS_SUCCESS);
      const std::vector<float> got = d.download<float>(dy, n + 1);
      std::vector<float> want(n);
      for (std::uint32_t i = 0; i < n; ++i) want[i] = 2.5f * x[i] + y[i];
      check_close(std::vector<float>(got.begin(), got.begin() + n), want, 1e-6f);
      BOOST_TEST(got[n] == 12345.0f);
      d.free(dx);
      d.free(dy);
    }
  }

  // On a stream: upload, launch and download queued in order, then one synchronize.
  const std::uint32_t n = 50000;
  const std::vector<float> x = random_floats(n, 3), y = random_floats(n, 4);
  std::vector<float> out(n);
  const std::uint64_t s = d.stream();
  const std::uint64_t dx = d.alloc(n * 4), dy = d.alloc(n * 4);
  d.ok(api().memset_d8(d.inst, dy, 0, n * 4, s), "memset");
  d.ok(api().copy_h2d_async(d.inst, dx, x.data(), n * 4, s), "copy_h2d_async");
  d.ok(api().copy_h2d_async(d.inst, dy, y.data(), n * 4, s), "copy_h2d_async");
  BOOST_REQUIRE(launch_axpy(d, f, n, -1.0f, dx, dy, s) == GPUPLUG_STATUS_SUCCESS);
  BOOST_REQUIRE(launch_axpy(d, f, n, 3.0f, dx, dy, s) == GPUPLUG_STATUS_SUCCESS);
  d.ok(api().copy_d2h_async(d.inst, out.data(), dy, n * 4, s), "copy_d2h_async");
  d.ok(api().stream_synchronize(d.inst, s), "stream_synchronize");
  std::vector<float> want(n);
  for (std::uint32_t i = 0; i < n; ++i) want[i] = 3.0f * x[i] + (-1.0f * x[i] + y[i]);
  check_close(out, want, 1e-5f);
  d.ok(api().stream_destroy(d.inst, s), "stream_destroy");
  d.free(dx);
  d.free(dy);
}

BOOST_AUTO_TEST_CASE(gemm_f32_and_gemm_a_e4m3_match_the_reference) {
  Instance d;
  const struct {
    std::uint32_t M, N, K;
  } shapes[] = {{1, 1, 1}, {37, 133, 53}, {64, 128, 64}, {16, 65, 7}, {3, 200, 300}};
  for (const auto& s : shapes) {
    BOOST_TEST_CONTEXT("M=" << s.M << " N=" << s.N << " K=" << s.K) {
      const std::vector<float> A = random_floats(std::size_t{s.M} * s.K, s.M * 7 + s.K);
      const std::vector<float> B = random_floats(std::size_t{s.K} * s.N, s.N * 11 + s.K);
      const auto f32 = device_gemm(d, "gemm_f32", s.M, s.N, s.K, A, B);
      check_close(f32, reference_gemm(s.M, s.N, s.K, A, B, false), 1e-4f);
      const auto e4m3 = device_gemm(d, "gemm_a_e4m3", s.M, s.N, s.K, A, B);
      check_close(e4m3, reference_gemm(s.M, s.N, s.K, A, B, true), 1e-4f);
      if (s.K > 1) BOOST_TEST(e4m3 != f32);  // the cast of A really happened
    }
  }
}

BOOST_AUTO_TEST_CASE(e4m3_cast_kernels_match_the_shared_header) {
  Instance d;
  // Every code's value, the midpoints between neighbours, and specials.
  std::vector<float> in;
  for (unsigned code = 0; code < 256; ++code)
    in.push_back(gpuplug_e4m3_to_f32(static_cast<std::uint8_t>(code)));
  for (unsigned code = 0; code < 0x7E; ++code) {
    const float lo = gpuplug_e4m3_to_f32(static_cast<std::uint8_t>(code));
    const float hi = gpuplug_e4m3_to_f32(static_cast<std::uint8_t>(code + 1));
    in.push_back((lo + hi) / 2);
    in.push_back(-(lo + hi) / 2);
  }
  for (float f : {1e9f, -1e9f, 464.0f, INFINITY, -INFINITY, NAN, 1e-40f, -0.0f}) in.push_back(f);
  const auto n = static_cast<std::uint32_t>(in.size());
  std::uint64_t din = d.alloc(n * 4), dout = d.alloc(n), dback = d.alloc(n * 4);
  d.upload(din, in);
  std::uint32_t nn = n;
  void* params[] = {&nn, &din, &dout};
  d.ok(api().launch(d.inst, d.function("e4m3", "cast_f32_e4m3"), dim(ceil_div(n, 256)), dim(256), 0,
                    0, params),
       "launch cast_f32_e4m3");
  const auto codes = d.download<std::uint8_t>(dout, n);
  for (std::uint32_t i = 0; i < n; ++i)
    BOOST_TEST(static_cast<unsigned>(codes[i]) == static_cast<unsigned>(gpuplug_f32_to_e4m3(in[i])),
               "input " << in[i]);

  void* back_params[] = {&nn, &dout, &dback};
  d.ok(api().launch(d.inst, d.function("e4m3", "cast_e4m3_f32"), dim(ceil_div(n, 256)), dim(256), 0,
                    0, back_params),
       "launch cast_e4m3_f32");
  const auto back = d.download<float>(dback, n);
  for (std::uint32_t i = 0; i < n; ++i) {
    const float want = gpuplug_e4m3_to_f32(codes[i]);
    if (std::isnan(want))
      BOOST_TEST(std::isnan(back[i]));
    else
      BOOST_TEST(std::memcmp(&back[i], &want, 4) == 0, "code " << unsigned(codes[i]));
  }
  d.free(din);
  d.free(dout);
  d.free(dback);
}

BOOST_AUTO_TEST_CASE(bias_relu_matches_the_reference) {
  Instance d;
  const std::uint32_t rows = 33, cols = 77;
  const std::vector<float> x = random_floats(std::size_t{rows} * cols, 5),
                           bias = random_floats(cols, 6);
  const std::uint64_t dx = d.alloc(x.size() * 4), db = d.alloc(bias.size() * 4);
  d.upload(dx, x);
  d.upload(db, bias);
  std::uint32_t r = rows, c = cols;
  std::uint64_t pb = db, px = dx;
  void* params[] = {&r, &c, &pb, &px};
  d.ok(api().launch(d.inst, d.function("activation", "bias_relu"),
                    dim(ceil_div(std::uint64_t{rows} * cols, 256)), dim(256), 0, 0, params),
       "launch bias_relu");
  const auto got = d.download<float>(dx, x.size());
  std::vector<float> want(x.size());
  for (std::uint32_t i = 0; i < rows; ++i)
    for (std::uint32_t j = 0; j < cols; ++j)
      want[std::size_t{i} * cols + j] = std::max(x[std::size_t{i} * cols + j] + bias[j], 0.0f);
  BOOST_TEST(got == want);
  d.free(dx);
  d.free(db);
}

BOOST_AUTO_TEST_CASE(published_symbols) {
  Instance d;
  const auto [tile, tile_size] = d.global("gemm", "gemm_f32_n_tile");
  BOOST_TEST(tile_size == 4u);
  std::uint32_t value = 0;
  d.ok(api().copy_d2h(d.inst, &value, tile, 4), "read n_tile");
  BOOST_TEST(value > 0u);
  const auto [flag, flag_size] = d.global("gemm", "gemm_a_e4m3_a_e4m3");
  BOOST_TEST(flag_size == 4u);
  d.ok(api().copy_d2h(d.inst, &value, flag, 4), "read a_e4m3");
  BOOST_TEST(value == 1u);
  BOOST_TEST(d.global("gemm", "gemm_a_e4m3_n_tile").second == 4u);

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
  const auto bad = read_bytes(kTestKernels / "bad_n_tile.so");
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

  std::int32_t has = -1;
  d.ok(api().has_module(d.inst, "axpy", &has), "has_module");
  BOOST_TEST(has == 1);  // in modules_dir, not loaded yet
  d.ok(api().has_module(d.inst, "nosuch", &has), "has_module");
  BOOST_TEST(has == 0);
  d.expect(api().get_function(d.inst, "../host/gemm", "gemm_f32", &f),
           GPUPLUG_STATUS_INVALID_ARGUMENT, "a path is not a module name");
}

BOOST_AUTO_TEST_CASE(modules_from_bytes_load_unload_and_reject_duplicates) {
  Instance d;
  const auto image = read_bytes(kKernels / "axpy.so");
  d.ok(api().load_module(d.inst, "mine", image.data(), image.size()), "load_module");
  d.ok(api().load_module(d.inst, "mine2", image.data(), image.size()), "load the same bytes again");
  const std::string dup = d.expect(api().load_module(d.inst, "mine", image.data(), image.size()),
                                   GPUPLUG_STATUS_INVALID_ARGUMENT, "duplicate name");
  BOOST_TEST(dup == "module mine is already loaded");
  const std::uint64_t f1 = d.function("mine", "axpy"), f2 = d.function("mine2", "axpy");
  BOOST_TEST(f1 != f2);  // two loads, two copies of the code

  const std::uint32_t n = 1000;
  const std::uint64_t x = d.alloc(n * 4), y = d.alloc(n * 4);
  d.upload(x, std::vector<float>(n, 1.0f));
  d.upload(y, std::vector<float>(n, 1.0f));
  BOOST_REQUIRE(launch_axpy(d, f1, n, 2.0f, x, y, 0) == GPUPLUG_STATUS_SUCCESS);
  BOOST_REQUIRE(launch_axpy(d, f2, n, 2.0f, x, y, 0) == GPUPLUG_STATUS_SUCCESS);
  BOOST_TEST(d.download<float>(y, n) == std::vector<float>(n, 5.0f));

  std::int32_t has = 0;
  d.ok(api().has_module(d.inst, "mine", &has), "has_module");
  BOOST_TEST(has == 1);
  d.ok(api().unload_module(d.inst, "mine"), "unload_module");
  d.ok(api().has_module(d.inst, "mine", &has), "has_module");
  BOOST_TEST(has == 0);
  std::uint64_t f = 0;
  d.expect(api().get_function(d.inst, "mine", "axpy", &f), GPUPLUG_STATUS_NOT_FOUND,
           "unloaded module");
  d.expect(api().unload_module(d.inst, "mine"), GPUPLUG_STATUS_NOT_FOUND, "unload twice");
  // Reload under the old name: a fresh module (the memfd path is reused safely).
  for (int i = 0; i < 20; ++i) {
    d.ok(api().load_module(d.inst, "mine", image.data(), image.size()), "reload");
    BOOST_TEST(d.function("mine", "axpy") != 0u);
    d.ok(api().unload_module(d.inst, "mine"), "unload again");
  }
  d.free(x);
  d.free(y);
}

BOOST_AUTO_TEST_CASE(corrupt_module_images_are_invalid_image) {
  Instance d;
  std::vector<std::byte> junk(4096);
  std::mt19937 gen(42);
  for (auto& b : junk) b = static_cast<std::byte>(gen());
  const std::string random = d.expect(api().load_module(d.inst, "junk", junk.data(), junk.size()),
                                      GPUPLUG_STATUS_INVALID_IMAGE, "random bytes");
  BOOST_TEST(contains(random, "module junk"), random);
  BOOST_TEST(contains(random, "invalid ELF header"), random);  // dlerror's words

  const auto image = read_bytes(kKernels / "axpy.so");
  const std::vector<std::byte> truncated(image.begin(),
                                         image.begin() + static_cast<long>(image.size() / 2));
  const std::string cut =
      d.expect(api().load_module(d.inst, "cut", truncated.data(), truncated.size()),
               GPUPLUG_STATUS_INVALID_IMAGE, "truncated image");
  BOOST_TEST(contains(cut, "module cut"), cut);

  const std::vector<std::byte> header_only(image.begin(), image.begin() + 64);
  d.expect(api().load_module(d.inst, "hdr", header_only.data(), header_only.size()),
           GPUPLUG_STATUS_INVALID_IMAGE, "header only");
  d.expect(api().load_module(d.inst, "empty", image.data(), 0), GPUPLUG_STATUS_INVALID_IMAGE,
           "empty image");

  // A failed load registers nothing: the name is free for a good image.
  d.ok(api().load_module(d.inst, "junk", image.data(), image.size()), "load after failure");
  BOOST_TEST(d.function("junk", "axpy") != 0u);
}

BOOST_AUTO_TEST_CASE(modules_dir_option_and_default) {
  Instance d(OptionList{{"modules_dir", kTestKernels.string()}});
  std::int32_t has = 0;
  d.ok(api().has_module(d.inst, "bad_n_tile", &has), "has_module");
  BOOST_TEST(has == 1);
  d.ok(api().has_module(d.inst, "gemm", &has), "has_module");
  BOOST_TEST(has == 0);  // not in this modules_dir
  BOOST_TEST(d.global("bad_n_tile", "gemm_f32_n_tile").second == 2u);
}

BOOST_AUTO_TEST_CASE(every_block_runs_once_with_its_own_shared_memory) {
  Instance d(OptionList{{"threads", "4"}});
  const auto image = read_bytes(kTestKernels / "test_probe.so");
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
  d.expect(api().launch(d.inst, 0, dim(1), dim(1), 0, 0, params), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "null function");
  const std::uint64_t f = d.function("axpy", "axpy");
  d.expect(api().launch(d.inst, f, dim(0), dim(256), 0, 0, params), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "empty grid");
  d.expect(api().launch(d.inst, f, dim(1), dim(1, 0), 0, 0, params),
           GPUPLUG_STATUS_INVALID_ARGUMENT, "empty block");
  d.expect(api().launch(d.inst, f, dim(1), dim(1), 0, 999, params), GPUPLUG_STATUS_INVALID_ARGUMENT,
           "unknown stream");
}

// ---- errors, sweep, threads -------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(last_error_is_per_thread_and_can_be_reread) {
  Instance d;
  d.expect(api().free(d.inst, 0x1234), GPUPLUG_STATUS_INVALID_ARGUMENT, "free unknown");
  char small[8];
  const std::size_t length = api().last_error(d.inst, small, sizeof small);
  BOOST_TEST(length > sizeof small);
  BOOST_TEST(std::strlen(small) == 7u);
  char full[256];
  BOOST_TEST(api().last_error(d.inst, full, sizeof full) == length);  // still there
  BOOST_TEST(contains(full, "free of 0x1234"), full);

  std::string other_thread = "unset";
  std::thread([&] {
    char buf[256];
    api().last_error(d.inst, buf, sizeof buf);
    other_thread = buf;
  }).join();
  BOOST_TEST(other_thread.empty());
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
  LogCapture log;
  Instance d({}, &log.services);
  d.alloc(100, "a");
  d.alloc_managed(50, "b");
  gpuplug_ledger_stats_t swept{};
  swept.struct_size = sizeof swept;
  d.ok(api().sweep_unreleased(d.inst, &swept), "sweep_unreleased");
  BOOST_TEST(swept.live_count == 2u);
  BOOST_TEST(swept.live_bytes == 150u);
  BOOST_TEST(swept.live_managed_bytes == 50u);
  BOOST_TEST(swept.total_frees == 2u);
  const auto st = d.stats();
  BOOST_TEST(st.live_count == 0u);
  BOOST_TEST(st.total_frees == 2u);
  BOOST_TEST(contains(log.all(), "swept 2 unreleased allocations"), log.all());
  d.ok(api().sweep_unreleased(d.inst, nullptr), "empty sweep");
}

BOOST_AUTO_TEST_CASE(many_threads_with_their_own_streams) {
  Instance d(OptionList{{"threads", "8"}});  // more workers than cores: more interleavings
  const std::uint64_t f = d.function("axpy", "axpy");
  constexpr int kThreads = 6;
  constexpr int kRounds = 15;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Boost.Test assertions are not thread-safe: count failures, check after join.
      const std::uint32_t n = 4096 + 97 * t;
      std::vector<float> x(n, static_cast<float>(t + 1)), out(n);
      std::uint64_t s = 0, dx = 0, dy = 0;
      if (api().stream_create(d.inst, &s) != 0 || api().alloc(d.inst, n * 4, "thread", &dx) != 0 ||
          api().alloc(d.inst, n * 4, "thread", &dy) != 0) {
        ++failures;
        return;
      }
      for (int r = 0; r < kRounds; ++r) {
        bool ok = api().copy_h2d_async(d.inst, dx, x.data(), n * 4, s) == 0 &&
                  api().memset_d8(d.inst, dy, 0, n * 4, s) == 0 &&
                  launch_axpy(d, f, n, 2.0f, dx, dy, s) == 0 &&
                  launch_axpy(d, f, n, 1.0f, dx, dy, r % 3 == 0 ? 0 : s) == 0 &&
                  api().copy_d2h_async(d.inst, out.data(), dy, n * 4, s) == 0 &&
                  api().stream_synchronize(d.inst, s) == 0;
        if (!ok ||
            std::any_of(out.begin(), out.end(), [&](float v) { return v != 3.0f * (t + 1); }))
          ++failures;
      }
      if (api().free(d.inst, dx) != 0 || api().free(d.inst, dy) != 0 ||
          api().stream_destroy(d.inst, s) != 0)
        ++failures;
    });
  }
  for (auto& th : threads) th.join();
  BOOST_TEST(failures.load() == 0);
  BOOST_TEST(d.stats().live_count == 0u);
}

BOOST_AUTO_TEST_CASE(two_instances_keep_their_own_state) {
  Instance a, b(OptionList{{"device_memory_limit", "4K"}});
  const std::uint64_t p = a.alloc(8192);
  b.expect(api().free(b.inst, p), GPUPLUG_STATUS_INVALID_ARGUMENT, "free on the other instance");
  const auto image = read_bytes(kKernels / "axpy.so");
  a.ok(api().load_module(a.inst, "x", image.data(), image.size()), "load on a");
  b.ok(api().load_module(b.inst, "x", image.data(), image.size()), "same name on b");
  std::uint64_t q = 0;
  b.expect(api().alloc(b.inst, 8192, "big", &q), GPUPLUG_STATUS_OUT_OF_MEMORY, "b's limit");
  a.free(p);
}
