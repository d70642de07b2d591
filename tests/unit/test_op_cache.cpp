// SPDX-License-Identifier: Apache-2.0
// OpCache against the real host plugin: memo, records, scratch, latch, gates, release, stress.
#define BOOST_TEST_MODULE op_cache
#include <boost/test/unit_test.hpp>

#include <gpuplug/gpuplug.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <latch>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "contains.hpp"
#include "counting_backend.hpp"
#include "host_backend.hpp"
#include "stderr_capture.hpp"
#include "test_print.hpp"

namespace {

using gpuplug::DevicePtr;
using gpuplug::Error;
using gpuplug::GpuBackend;
using gpuplug::KernelHandle;
using gpuplug::OpCache;
using gpuplug::Status;
using gpuplug::test::contains;
using gpuplug::test::CountingBackend;
using gpuplug::test::Host;  // every test uses the real host plugin of this build tree
using gpuplug::test::StderrCapture;

// The value a module publishes in a 4-byte symbol, read around the cache.
std::uint32_t read_symbol(GpuBackend& gpu, std::string_view module, std::string_view symbol) {
  const auto sym = gpu.device_symbol(module, symbol);
  BOOST_TEST_REQUIRE(sym.has_value());
  BOOST_TEST_REQUIRE(sym->bytes == 4u);
  std::uint32_t v = 0;
  gpu.copy_d2h(&v, sym->address, sizeof v);
  return v;
}

std::string printed(const OpCache& c) {
  std::ostringstream os;
  os << c;
  return os.str();
}

// The folder of the test-only kernel modules (bad_n_tile.so), given by gpuplug::host_kernels.
std::filesystem::path test_kernel_dir() { return GPUPLUG_TEST_HOST_KERNEL_DIR; }

// A host backend without managed memory: alloc_managed is Error(unsupported), as on a device
// that has none. Counts alloc and alloc_managed; forwards everything else.
class NoManagedBackend final : public GpuBackend {
 public:
  explicit NoManagedBackend(GpuBackend& inner) : inner_(inner) {}
  ~NoManagedBackend() override {
    try {
      op_cache().release(*this);
    } catch (...) {
    }
  }
  std::size_t alloc_calls = 0;
  std::size_t alloc_managed_calls = 0;

  std::string_view name() const noexcept override { return inner_.name(); }
  std::string_view plugin_name() const noexcept override { return inner_.plugin_name(); }
  std::uint32_t ordinal() const noexcept override { return inner_.ordinal(); }
  DevicePtr alloc(std::size_t bytes, const char* site) override {
    ++alloc_calls;
    return inner_.alloc(bytes, site);
  }
  DevicePtr alloc_managed(std::size_t, const char*) override {
    ++alloc_managed_calls;
    throw Error(Status::unsupported, std::string(name()), "alloc_managed: no managed memory");
  }
  void free(DevicePtr p) override { inner_.free(p); }
  void copy_h2d(DevicePtr d, const void* s, std::size_t n) override { inner_.copy_h2d(d, s, n); }
  void copy_d2h(void* d, DevicePtr s, std::size_t n) override { inner_.copy_d2h(d, s, n); }
  void copy_d2d(DevicePtr d, DevicePtr s, std::size_t n) override { inner_.copy_d2d(d, s, n); }
  void copy_h2d_async(DevicePtr d, const void* s, std::size_t n, gpuplug::Stream st) override {
    inner_.copy_h2d_async(d, s, n, st);
  }
  void copy_d2h_async(void* d, DevicePtr s, std::size_t n, gpuplug::Stream st) override {
    inner_.copy_d2h_async(d, s, n, st);
  }
  void copy_d2d_async(DevicePtr d, DevicePtr s, std::size_t n, gpuplug::Stream st) override {
    inner_.copy_d2d_async(d, s, n, st);
  }
  void memset(DevicePtr d, std::uint8_t v, std::size_t n, gpuplug::Stream st) override {
    inner_.memset(d, v, n, st);
  }
  gpuplug::Stream create_stream() override { return inner_.create_stream(); }
  void destroy_stream(gpuplug::Stream st) override { inner_.destroy_stream(st); }
  void synchronize(gpuplug::Stream st) override { inner_.synchronize(st); }
  void synchronize() override { inner_.synchronize(); }
  void load_module(std::string_view n, std::span<const std::byte> image) override {
    inner_.load_module(n, image);
  }
  void unload_module(std::string_view n) override { inner_.unload_module(n); }
  bool has_module(std::string_view n) override { return inner_.has_module(n); }
  KernelHandle kernel(std::string_view m, std::string_view f) override {
    return inner_.kernel(m, f);
  }
  std::optional<gpuplug::DeviceSymbol> device_symbol(std::string_view m,
                                                     std::string_view sym) override {
    return inner_.device_symbol(m, sym);
  }
  void launch(KernelHandle f, gpuplug::Dim3 g, gpuplug::Dim3 b, std::uint32_t shared,
              gpuplug::Stream st, void** params) override {
    inner_.launch(f, g, b, shared, st, params);
  }
  gpuplug::MemoryInfo memory_info() override { return inner_.memory_info(); }
  gpuplug::DeviceInfo device_info() override { return inner_.device_info(); }
  gpuplug::LedgerStats ledger_stats() override { return inner_.ledger_stats(); }
  std::string alloc_report(std::size_t top_n) override { return inner_.alloc_report(top_n); }
  gpuplug::LedgerStats sweep_unreleased() override { return inner_.sweep_unreleased(); }

 private:
  GpuBackend& inner_;
};

std::size_t occurrences(std::string_view text, std::string_view part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string_view::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(op_cache)

BOOST_AUTO_TEST_CASE(default_construction_label_and_printing) {
  static_assert(std::is_base_of_v<gpuplug::ModelResource<GpuBackend>, OpCache>);
  OpCache c;
  BOOST_TEST(printed(c) == "OpCache { kernels: 0, scratch: 0 }");
  BOOST_TEST(c.label() == "op scratch");
  BOOST_TEST(c.kernel_count() == 0u);
  BOOST_TEST(c.scratch_count() == 0u);
  BOOST_TEST(!c.alloc_fell_back());

  Host host;
  c.kernel(*host.gpu, "axpy", "axpy");
  c.kernel(*host.gpu, "gemm", "gemm_f32");
  c.scratch(*host.gpu, "tmp", 64);
  BOOST_TEST(printed(c) == "OpCache { kernels: 2, scratch: 1 }");
  c.release(*host.gpu);
  BOOST_TEST(printed(c) == "OpCache { kernels: 0, scratch: 0 }");
}

BOOST_AUTO_TEST_CASE(every_backend_owns_exactly_one_cache) {
  Host host;
  auto other = host.another();
  BOOST_TEST(&host.gpu->op_cache() == &host.gpu->op_cache());
  BOOST_TEST(&host.gpu->op_cache() != &other->op_cache());
}

BOOST_AUTO_TEST_CASE(records_n_tile_and_a_e4m3) {
  OpCache c;
  const KernelHandle h{42};
  const KernelHandle other{43};
  BOOST_TEST(!c.n_tile(h).has_value());
  BOOST_TEST(!c.a_e4m3(h));
  c.record_n_tile(h, 64);
  BOOST_TEST(c.n_tile(h).value() == 64u);
  c.record_n_tile(h, 128);  // a later value replaces
  BOOST_TEST(c.n_tile(h).value() == 128u);
  c.record_n_tile(h, 0);  // zero is a value, not "none"
  BOOST_TEST(c.n_tile(h).value() == 0u);
  BOOST_TEST(!c.a_e4m3(h));
  c.record_a_e4m3(h);
  BOOST_TEST(c.a_e4m3(h));
  c.record_a_e4m3(h);
  BOOST_TEST(c.a_e4m3(h));
  BOOST_TEST(!c.n_tile(other).has_value());
  BOOST_TEST(!c.a_e4m3(other));
  c.record_a_e4m3(other);
  BOOST_TEST(!c.n_tile(other).has_value());  // a_e4m3 alone records no tile
  // Many handles: the record table grows while staying exact.
  for (std::uint64_t i = 1000; i < 3000; ++i)
    c.record_n_tile(KernelHandle{i}, static_cast<std::uint32_t>(i));
  for (std::uint64_t i = 1000; i < 3000; ++i)
    BOOST_TEST_REQUIRE(c.n_tile(KernelHandle{i}).value() == i);
  BOOST_TEST(c.n_tile(h).value() == 0u);
  BOOST_TEST(c.kernel_count() == 0u);  // records are not kernels
}

BOOST_AUTO_TEST_CASE(kernel_is_resolved_once_and_reused) {
  Host host;
  CountingBackend gpu(*host.gpu);
  OpCache& c = gpu.op_cache();  // a cache serves the backend it is called with (binding)

  // Keys built in buffers that are overwritten afterwards: the cache must have copied them.
  std::string module = "gemm";
  std::string func = "gemm_f32";
  const KernelHandle h = c.kernel(gpu, module, func);
  module.assign("xxxx");
  func.assign("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");  // also forces a reallocation
  BOOST_TEST(static_cast<bool>(h));
  BOOST_TEST(gpu.kernel_calls == 1u);
  BOOST_TEST(gpu.device_symbol_calls == 2u);  // gemm_f32_n_tile and gemm_f32_a_e4m3

  for (int i = 0; i < 100; ++i) {
    BOOST_TEST_REQUIRE(c.kernel(gpu, std::string("gemm"), std::string("gemm_f32")) == h);
  }
  BOOST_TEST(gpu.kernel_calls == 1u);
  BOOST_TEST(gpu.device_symbol_calls == 2u);
  BOOST_TEST(c.kernel_count() == 1u);

  // The symbols' values were recorded at resolution.
  const std::uint32_t tile = read_symbol(*host.gpu, "gemm", "gemm_f32_n_tile");
  BOOST_TEST(tile > 0u);
  BOOST_TEST(c.n_tile(h).value() == tile);
  BOOST_TEST(!c.a_e4m3(h));  // gemm_f32 publishes no _a_e4m3

  const KernelHandle e4 = c.kernel(gpu, "gemm", "gemm_a_e4m3");
  BOOST_TEST(e4 != h);
  BOOST_TEST(c.a_e4m3(e4));
  BOOST_TEST(c.n_tile(e4).value() == read_symbol(*host.gpu, "gemm", "gemm_a_e4m3_n_tile"));

  // An absent symbol records nothing.
  const KernelHandle axpy = c.kernel(gpu, "axpy", "axpy");
  BOOST_TEST(!c.n_tile(axpy).has_value());
  BOOST_TEST(!c.a_e4m3(axpy));
  BOOST_TEST(gpu.kernel_calls == 3u);
  BOOST_TEST(c.kernel_count() == 3u);

  // Each key reached the backend once.
  BOOST_TEST(gpu.kernel_calls_for("gemm", "gemm_f32") == 1u);
  BOOST_TEST(gpu.kernel_calls_for("axpy", "axpy") == 1u);

  // The memoized handle launches: y = 2x + y on the host backend.
  constexpr std::uint32_t n = 300;
  std::vector<float> x(n), y(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  const DevicePtr dx = host.gpu->alloc(n * sizeof(float));
  const DevicePtr dy = host.gpu->alloc(n * sizeof(float));
  host.gpu->copy_h2d(dx, x.data(), n * sizeof(float));
  host.gpu->copy_h2d(dy, y.data(), n * sizeof(float));
  const float a = 2.0f;
  const std::uint64_t px = dx.value, py = dy.value;
  host.gpu->launch_args(c.kernel(gpu, "axpy", "axpy"), {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, {},
                        n, a, px, py);
  host.gpu->synchronize();
  host.gpu->copy_d2h(y.data(), dy, n * sizeof(float));
  for (std::uint32_t i = 0; i < n; ++i)
    BOOST_TEST_REQUIRE(y[i] == 2.0f * static_cast<float>(i) + 1.0f);
  host.gpu->free(dx);
  host.gpu->free(dy);
  BOOST_TEST(gpu.kernel_calls == 3u);
}

BOOST_AUTO_TEST_CASE(a_failed_resolution_memoizes_nothing) {
  Host host;
  CountingBackend gpu(*host.gpu);
  OpCache c;
  BOOST_CHECK_THROW(c.kernel(gpu, "gemm", "no_such_kernel"), Error);
  BOOST_CHECK_THROW(c.kernel(gpu, "gemm", "no_such_kernel"), Error);
  BOOST_TEST(gpu.kernel_calls == 2u);  // asked again: the failure was not cached
  BOOST_CHECK_THROW(c.kernel(gpu, "no_such_module", "f"), Error);
  BOOST_TEST(c.kernel_count() == 0u);
  // The key is the pair, not the concatenation: gemm::gemm_f32 is no answer for gemmg::emm_f32.
  c.kernel(gpu, "gemm", "gemm_f32");
  BOOST_CHECK_THROW(c.kernel(gpu, "gemmg", "emm_f32"), Error);
  BOOST_CHECK_THROW(c.kernel(gpu, "gem", "mgemm_f32"), Error);
  BOOST_TEST(c.kernel_count() == 1u);
  c.release(gpu);
}

BOOST_AUTO_TEST_CASE(a_symbol_that_cannot_be_read_is_an_error_naming_module_and_symbol) {
  Host host;
  CountingBackend gpu(*host.gpu);
  OpCache c;
  gpu.fail_copy_d2h = true;
  try {
    c.kernel(gpu, "gemm", "gemm_f32");
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    BOOST_TEST_INFO(e.what());
    BOOST_TEST(contains(e.message(), "module gemm"));
    BOOST_TEST(contains(e.message(), "gemm_f32_n_tile"));
    BOOST_TEST(contains(e.message(), "injected copy_d2h failure"));
    BOOST_TEST(e.backend() == std::string(host.gpu->name()));
  }
  BOOST_TEST(c.kernel_count() == 0u);
  gpu.fail_copy_d2h = false;
  const KernelHandle h = c.kernel(gpu, "gemm", "gemm_f32");  // nothing half-cached: resolves again
  BOOST_TEST(gpu.kernel_calls == 2u);
  BOOST_TEST(c.n_tile(h).has_value());
}

BOOST_AUTO_TEST_CASE(a_two_byte_n_tile_is_an_error) {
  Host host;
  const auto file = test_kernel_dir() / "bad_n_tile.so";
  BOOST_TEST_INFO("module file " << file);
  BOOST_TEST_REQUIRE(std::filesystem::exists(file));
  host.gpu->load_module_file("bad", file);
  OpCache c;
  try {
    c.kernel(*host.gpu, "bad", "gemm_f32");
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    BOOST_TEST_INFO(e.what());
    BOOST_TEST(e.status() == Status::invalid_argument);
    BOOST_TEST(e.message() == "module bad symbol gemm_f32_n_tile is 2 bytes, expected 4");
  }
  BOOST_TEST(c.kernel_count() == 0u);
  c.release(*host.gpu);
}

BOOST_AUTO_TEST_CASE(scratch_is_grow_only_and_retires_outgrown_buffers) {
  Host host;
  CountingBackend gpu(*host.gpu);
  OpCache c;
  const std::uint64_t live0 = host.gpu->live_alloc_count();

  std::string tag = "attn";
  const DevicePtr p1 = c.scratch(gpu, tag, 1024);
  tag.assign("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz");  // the cache copied the key
  BOOST_TEST(static_cast<bool>(p1));
  BOOST_TEST(c.scratch(gpu, "attn", 512) == p1);
  BOOST_TEST(c.scratch(gpu, "attn", 1024) == p1);
  BOOST_TEST(c.scratch(gpu, "attn", 0) == p1);
  BOOST_TEST(gpu.alloc_calls == 1u);
  BOOST_TEST(contains(host.gpu->alloc_report(), "op scratch: attn"));

  const DevicePtr p2 = c.scratch(gpu, "attn", 4096);
  BOOST_TEST(p2 != p1);
  BOOST_TEST(gpu.alloc_calls == 2u);
  BOOST_TEST(c.scratch(gpu, "attn", 1024) == p2);  // grow-only: smaller requests keep the big one
  BOOST_TEST(c.scratch(gpu, "attn", 4096) == p2);
  // The retired buffer is still allocated and usable by whoever holds it.
  BOOST_TEST(host.gpu->live_alloc_count() == live0 + 2);
  std::vector<std::uint8_t> bytes(1024, 0xab);
  host.gpu->copy_h2d(p1, bytes.data(), bytes.size());
  host.gpu->copy_h2d(p2, bytes.data(), bytes.size());

  const DevicePtr q = c.scratch(gpu, "ffn", 16);
  BOOST_TEST(q != p2);
  BOOST_TEST(c.scratch_count() == 2u);
  BOOST_TEST(host.gpu->live_alloc_count() == live0 + 3);

  // release frees live and retired buffers through the backend, not the sweep.
  c.release(gpu);
  BOOST_TEST(gpu.free_calls == 3u);
  BOOST_TEST(!gpu.handed_out(p1));
  BOOST_TEST(!gpu.handed_out(p2));
  BOOST_TEST(!gpu.handed_out(q));
  BOOST_TEST(host.gpu->live_alloc_count() == live0);
  BOOST_TEST(c.scratch_count() == 0u);
  c.release(gpu);  // idempotent
  BOOST_TEST(gpu.free_calls == 3u);

  // After release a tag allocates afresh.
  const DevicePtr again = c.scratch(gpu, "attn", 8);
  BOOST_TEST(gpu.alloc_calls == 4u);
  BOOST_TEST(gpu.handed_out(again));
  c.release(gpu);
  BOOST_TEST(host.gpu->live_alloc_count() == live0);
}

// Tags of up to 16 bytes and longer ones take different hit paths (the long ones out of line,
// docs/PERFORMANCE.md); both must hit, grow and refuse another backend alike. Lengths 0..40
// cover every branch of the hash and of the key comparison on both sides of the split.
BOOST_AUTO_TEST_CASE(scratch_hits_for_tags_of_every_length_and_refuses_another_backend) {
  Host host;
  Host other;
  CountingBackend gpu(*host.gpu);
  OpCache c;
  std::vector<std::pair<std::string, DevicePtr>> made;
  for (std::size_t len = 0; len <= 40; ++len) {
    // Tags that differ only in their last byte, so a wrong comparison shows as a false hit.
    std::string tag(len, 'k');
    if (len > 0) tag.back() = static_cast<char>('a' + len % 26);
    made.emplace_back(tag, c.scratch(gpu, tag, 64 + len));
  }
  BOOST_TEST(gpu.alloc_calls == made.size());
  for (const auto& [tag, p] : made) {
    BOOST_TEST_INFO("tag of " << tag.size() << " bytes");
    BOOST_TEST(c.scratch(gpu, tag, 64) == p);                 // hit
    BOOST_TEST(c.scratch(gpu, std::string(tag), 64 + tag.size()) == p);  // hit, another copy of the key
    BOOST_CHECK_THROW(c.scratch(*other.gpu, tag, 8), gpuplug::Error);  // bound to gpu
  }
  BOOST_TEST(gpu.alloc_calls == made.size());
  // A grow through each path.
  const DevicePtr short_grown = c.scratch(gpu, made[16].first, 4096);
  const DevicePtr long_grown = c.scratch(gpu, made[17].first, 4096);
  BOOST_TEST(short_grown != made[16].second);
  BOOST_TEST(long_grown != made[17].second);
  BOOST_TEST(c.scratch(gpu, made[16].first, 100) == short_grown);
  BOOST_TEST(c.scratch(gpu, made[17].first, 100) == long_grown);
  BOOST_TEST(gpu.alloc_calls == made.size() + 2);
  c.release(gpu);
}

BOOST_AUTO_TEST_CASE(a_failed_scratch_grow_changes_nothing) {
  Host host;
  auto small = host.another({{"device_memory_limit", "1M"}});
  OpCache c;
  const DevicePtr p = c.scratch(*small, "kv", 1024);
  try {
    c.scratch(*small, "kv", 4u << 20);
    BOOST_FAIL("expected out of memory");
  } catch (const Error& e) {
    BOOST_TEST(e.status() == Status::out_of_memory);
  }
  BOOST_TEST(c.scratch(*small, "kv", 1024) == p);
  BOOST_CHECK_THROW(c.scratch(*small, "new", 4u << 20), Error);
  BOOST_TEST(c.scratch_count() == 1u);
  c.release(*small);
  BOOST_TEST(small->live_alloc_count() == 0u);
}

BOOST_AUTO_TEST_CASE(alloc_with_fallback_latches_per_backend_and_warns_once) {
  Host host;
  auto small = host.another({{"device_memory_limit", "1M"}});
  auto other = host.another({{"device_memory_limit", "1M"}});
  CountingBackend gpu(*small);
  OpCache& c = small->op_cache();

  BOOST_TEST(!c.alloc_fell_back());
  const DevicePtr fits = c.alloc_with_fallback(gpu, 512u << 10);
  BOOST_TEST(gpu.alloc_calls == 1u);
  BOOST_TEST(gpu.alloc_managed_calls == 0u);
  BOOST_TEST(!c.alloc_fell_back());

  std::string log;
  DevicePtr big, after, other_big;
  {
    StderrCapture capture;
    big = c.alloc_with_fallback(gpu, 2u << 20);  // past the limit: falls back, warns
    BOOST_TEST(c.alloc_fell_back());
    after = c.alloc_with_fallback(gpu, 16);            // latched: straight to managed, no warning
    BOOST_TEST(!other->op_cache().alloc_fell_back());  // the latch is per backend
    other_big = other->op_cache().alloc_with_fallback(*other, 2u << 20);  // warns for itself
    log = capture.text();
  }
  BOOST_TEST(gpu.alloc_calls == 2u);  // the latched request never tried device memory
  BOOST_TEST(gpu.alloc_managed_calls == 2u);
  BOOST_TEST(small->ledger_stats().live_managed_bytes >= (2u << 20) + 16);
  BOOST_TEST(other->ledger_stats().live_managed_bytes >= (2u << 20));
  BOOST_TEST(other->op_cache().alloc_fell_back());
  BOOST_TEST_INFO("log: " << log);
  BOOST_TEST(occurrences(log, "[gpuplug warning]") == 2u);  // one per backend that fell back
  BOOST_TEST(contains(log, std::string(small->name())));
  BOOST_TEST(contains(log, "managed"));
  other->free(other_big);

  // A fresh backend starts unlatched and allocates device memory.
  auto third = host.another({{"device_memory_limit", "1M"}});
  BOOST_TEST(!third->op_cache().alloc_fell_back());
  CountingBackend third_gpu(*third);
  const DevicePtr t = third_gpu.op_cache().alloc_with_fallback(third_gpu, 16);
  BOOST_TEST(third_gpu.alloc_calls == 1u);
  BOOST_TEST(third_gpu.alloc_managed_calls == 0u);
  third->free(t);

  // note_alloc_fallback latches by hand; release keeps the latch.
  OpCache manual;
  manual.note_alloc_fallback();
  BOOST_TEST(manual.alloc_fell_back());
  c.release(gpu);
  BOOST_TEST(c.alloc_fell_back());

  small->free(fits);
  small->free(big);
  small->free(after);
  BOOST_TEST(small->live_alloc_count() == 0u);
}

BOOST_AUTO_TEST_CASE(first_n_is_true_exactly_n_times_and_saturates) {
  OpCache c;
  for (int i = 0; i < 3; ++i) BOOST_TEST(c.first_n(std::string("route"), 3));
  BOOST_TEST(!c.first_n("route", 3));
  // Saturation: after n trues the counter is never written again, so no number of calls can
  // wrap it (docs/opcache.md proves it; 2^32 calls would take too long in a unit test, and
  // the argument does not depend on the number). Many calls stay false.
  const std::uint64_t calls = std::uint64_t{1} << 22;
  std::uint64_t trues = 0;
  for (std::uint64_t i = 0; i < calls; ++i) trues += c.first_n("route", 3) ? 1 : 0;
  BOOST_TEST(trues == 0u);

  BOOST_TEST(!c.first_n("zero", 0));  // n = 0: never true
  BOOST_TEST(!c.first_n("zero", 0));
  BOOST_TEST(c.first_n("zero", 1));  // and counted apart from other n's
  BOOST_TEST(!c.first_n("zero", 1));

  // Keys are independent and copied.
  for (int k = 0; k < 500; ++k) {
    const std::string key = "key-" + std::to_string(k);
    BOOST_TEST_REQUIRE(c.first_n(key, 2));
    BOOST_TEST_REQUIRE(c.first_n(key, 2));
    BOOST_TEST_REQUIRE(!c.first_n(key, 2));
  }
  // The largest n: counts up without trouble.
  for (int i = 0; i < 1000; ++i)
    BOOST_TEST_REQUIRE(c.first_n("max", std::numeric_limits<std::uint64_t>::max()));
  // first_n does not share the once/first_shape set.
  BOOST_TEST(c.once("route"));
}

BOOST_AUTO_TEST_CASE(once_and_first_shape_share_one_set) {
  OpCache c;
  BOOST_TEST(c.once(std::string("gemm route")));
  BOOST_TEST(!c.once("gemm route"));
  BOOST_TEST(!c.first_shape("gemm route", 0, 0, 0));  // once(key) is (key, 0, 0, 0)
  BOOST_TEST(c.first_shape("gemm", 1, 2, 3));
  BOOST_TEST(!c.first_shape("gemm", 1, 2, 3));
  BOOST_TEST(c.first_shape("gemm", 1, 2, 4));
  BOOST_TEST(c.first_shape("gemm", 2, 1, 3));
  BOOST_TEST(c.first_shape("gemm2", 1, 2, 3));
  BOOST_TEST(c.once("gemm2"));                 // (gemm2, 0, 0, 0) is another tuple
  BOOST_TEST(c.first_shape("gemm", 0, 0, 0));  // "gemm" was never once'd
  BOOST_TEST(!c.once("gemm"));
  for (std::uint64_t m = 0; m < 300; ++m)
    BOOST_TEST_REQUIRE(c.first_shape("grow", m, m + 1, m + 2));
  for (std::uint64_t m = 0; m < 300; ++m)
    BOOST_TEST_REQUIRE(!c.first_shape("grow", m, m + 1, m + 2));
}

BOOST_AUTO_TEST_CASE(release_forgets_kernels_and_records_keeps_gates_and_latch) {
  Host host;
  CountingBackend gpu(*host.gpu);
  OpCache c;
  const KernelHandle h = c.kernel(gpu, "gemm", "gemm_a_e4m3");
  const KernelHandle mine{777};
  c.record_n_tile(mine, 5);
  BOOST_TEST(c.a_e4m3(h));
  BOOST_TEST(c.once("route"));
  BOOST_TEST(c.first_n("n", 1));
  c.note_alloc_fallback();
  c.scratch(gpu, "s", 64);

  c.release(gpu);
  BOOST_TEST(c.kernel_count() == 0u);
  BOOST_TEST(c.scratch_count() == 0u);
  BOOST_TEST(!c.n_tile(h).has_value());
  BOOST_TEST(!c.a_e4m3(h));
  BOOST_TEST(!c.n_tile(mine).has_value());
  BOOST_TEST(!c.once("route"));  // gates are kept
  BOOST_TEST(!c.first_n("n", 1));
  BOOST_TEST(c.alloc_fell_back());  // so is the latch
  BOOST_TEST(printed(c) == "OpCache { kernels: 0, scratch: 0 }");

  // Re-resolved after release, with its records.
  const KernelHandle again = c.kernel(gpu, "gemm", "gemm_a_e4m3");
  BOOST_TEST(gpu.kernel_calls == 2u);
  BOOST_TEST(c.a_e4m3(again));
  BOOST_TEST(c.n_tile(again).has_value());

  c.release(gpu);
  c.release(gpu);  // harmless
  BOOST_TEST(c.kernel_count() == 0u);
  // Handles into an unloaded module are not handed out: unload, and the cache asks again.
  c.kernel(gpu, "axpy", "axpy");
  c.release(gpu);
  host.gpu->unload_module("axpy");
  c.kernel(gpu, "axpy", "axpy");  // the backend reloads it from modules_dir
  BOOST_TEST(gpu.kernel_calls_for("axpy", "axpy") == 2u);
  c.release(gpu);
}

BOOST_AUTO_TEST_CASE(release_frees_the_rest_past_failed_frees_and_names_them) {
  Host host;
  CountingBackend gpu(*host.gpu);
  OpCache c;
  const std::uint64_t live0 = host.gpu->live_alloc_count();
  const DevicePtr a_old = c.scratch(gpu, "a", 64);
  const DevicePtr a_new = c.scratch(gpu, "a", 128);
  const DevicePtr b = c.scratch(gpu, "b", 64);
  const DevicePtr d = c.scratch(gpu, "d", 64);
  gpu.fail_free(a_old);
  gpu.fail_free(b);
  try {
    c.release(gpu);
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    BOOST_TEST_INFO(e.what());
    BOOST_TEST(e.status() == Status::device_error);
    BOOST_TEST(contains(e.message(), "2 of 4 scratch buffers failed to free"));
    BOOST_TEST(contains(e.message(), "scratch 'a' (retired) 64 bytes"));
    BOOST_TEST(contains(e.message(), "scratch 'b' 64 bytes"));
    BOOST_TEST(contains(e.message(), "injected failure"));
  }
  BOOST_TEST(!gpu.handed_out(a_new));  // the rest were freed
  BOOST_TEST(!gpu.handed_out(d));
  BOOST_TEST(c.scratch_count() == 0u);
  BOOST_TEST(host.gpu->live_alloc_count() == live0 + 2);
  c.release(gpu);  // everything was forgotten: nothing is freed twice
  BOOST_TEST(gpu.free_calls == 4u);
  host.gpu->free(a_old);
  host.gpu->free(b);
  BOOST_TEST(host.gpu->live_alloc_count() == live0);
}

BOOST_AUTO_TEST_CASE(two_backends_from_one_plugin_share_nothing) {
  Host host;
  auto second = host.another();
  CountingBackend ga(*host.gpu);
  CountingBackend gb(*second);
  OpCache& a = host.gpu->op_cache();
  OpCache& b = second->op_cache();

  const KernelHandle ha = a.kernel(ga, "gemm", "gemm_f32");
  BOOST_TEST(b.kernel_count() == 0u);
  BOOST_TEST(!b.n_tile(ha).has_value());
  const KernelHandle hb = b.kernel(gb, "gemm", "gemm_f32");  // b asks its own backend
  BOOST_TEST(ga.kernel_calls == 1u);
  BOOST_TEST(gb.kernel_calls == 1u);
  a.release(ga);
  BOOST_TEST(b.kernel_count() == 1u);  // releasing one cache leaves the other alone
  BOOST_TEST(b.kernel(gb, "gemm", "gemm_f32") == hb);
  BOOST_TEST(gb.kernel_calls == 1u);

  const DevicePtr sa = a.scratch(ga, "x", 64);
  BOOST_TEST(b.scratch_count() == 0u);
  const DevicePtr sb = b.scratch(gb, "x", 64);
  BOOST_TEST(sa != sb);
  BOOST_TEST(ga.handed_out(sa));
  BOOST_TEST(gb.handed_out(sb));

  a.note_alloc_fallback();
  BOOST_TEST(!b.alloc_fell_back());
  BOOST_TEST(a.once("k"));
  BOOST_TEST(b.once("k"));
  BOOST_TEST(a.first_shape("g", 1, 2, 3));
  BOOST_TEST(b.first_shape("g", 1, 2, 3));
  BOOST_TEST(a.first_n("n", 1));
  BOOST_TEST(b.first_n("n", 1));
  BOOST_TEST(!a.first_n("n", 1));
  BOOST_TEST(!b.first_n("n", 1));
  a.record_n_tile(KernelHandle{5}, 7);
  BOOST_TEST(!b.n_tile(KernelHandle{5}).has_value());

  a.release(ga);
  b.release(gb);
  BOOST_TEST(!ga.handed_out(sa));
  BOOST_TEST(!gb.handed_out(sb));
}

// 8+ threads, 100k+ calls each, every member but release, all at once.
BOOST_AUTO_TEST_CASE(concurrent_stress_is_exact) {
  Host host;
  CountingBackend gpu(*host.gpu);
  OpCache c;
  const std::uint64_t live0 = host.gpu->live_alloc_count();

  struct Key {
    const char* module;
    const char* func;
  };
  const std::array<Key, 6> kernels{{{"gemm", "gemm_f32"},
                                    {"gemm", "gemm_a_e4m3"},
                                    {"axpy", "axpy"},
                                    {"e4m3", "cast_f32_e4m3"},
                                    {"e4m3", "cast_e4m3_f32"},
                                    {"activation", "bias_relu"}}};
  const std::uint32_t gemm_tile = read_symbol(*host.gpu, "gemm", "gemm_f32_n_tile");
  const std::array<const char*, 4> tags{"s0", "s1", "s2", "s3"};
  constexpr std::uint64_t kFirstN = 1000;
  constexpr std::uint64_t kShapes = 4096;
  constexpr std::uint64_t kPerThreadN = 10;
  constexpr std::size_t kCalls = 100'000;
  const unsigned threads = std::max(8u, std::thread::hardware_concurrency());

  struct Result {
    std::uint64_t first_n = 0, once = 0, shapes = 0, own_n = 0, errors = 0;
    std::array<KernelHandle, 6> handles{};
    std::vector<std::pair<DevicePtr, std::size_t>> scratch;  // (pointer, bytes asked) when new
  };
  std::vector<Result> results(threads);
  std::latch start(threads);

  const auto work = [&](unsigned t) {
    Result& r = results[t];
    const std::string own_key = "thread-" + std::to_string(t);
    const KernelHandle own_handle{1'000'000 + t};
    std::array<DevicePtr, 4> last{};
    std::vector<std::uint8_t> sink(64 * 64);
    start.arrive_and_wait();
    for (std::size_t i = 0; i < kCalls; ++i) {
      const std::size_t j = i / 8 + t;
      switch (i % 8) {
        case 0: {
          const std::size_t k = j % kernels.size();
          const KernelHandle h = c.kernel(gpu, kernels[k].module, kernels[k].func);
          if (!r.handles[k]) r.handles[k] = h;
          if (h != r.handles[k] || !h) ++r.errors;
          break;
        }
        case 1:
          r.first_n += c.first_n("shared first n", kFirstN) ? 1 : 0;
          break;
        case 2:
          r.once += c.once("shared once") ? 1 : 0;
          break;
        case 3:
          r.shapes += c.first_shape("gemm", j % kShapes, 2 * (j % kShapes), 7) ? 1 : 0;
          break;
        case 4: {
          const std::size_t s = j % tags.size();
          const std::size_t bytes = 64 * (1 + (i / 32) % 64);
          const DevicePtr p = c.scratch(gpu, tags[s], bytes);
          if (!p) ++r.errors;
          if (p != last[s]) {
            last[s] = p;
            r.scratch.emplace_back(p, bytes);
            // Reading is race-free (nobody writes scratch here) and range-checked against the
            // backend's ledger: the pointer is live and at least `bytes` long.
            gpu.copy_d2h(sink.data(), p, bytes);
          }
          break;
        }
        case 5: {
          const KernelHandle h = c.kernel(gpu, "gemm", "gemm_f32");
          if (c.n_tile(h) != gemm_tile || c.a_e4m3(h)) ++r.errors;
          break;
        }
        case 6:
          r.own_n += c.first_n(own_key, kPerThreadN) ? 1 : 0;
          break;
        case 7: {
          c.record_n_tile(own_handle, static_cast<std::uint32_t>(i));
          if (c.n_tile(own_handle) != static_cast<std::uint32_t>(i)) ++r.errors;
          if (c.alloc_fell_back()) ++r.errors;
          break;
        }
      }
    }
  };
  {
    std::vector<std::jthread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work, t);
  }

  Result total;
  std::size_t scratch_seen = 0;
  for (unsigned t = 0; t < threads; ++t) {
    const Result& r = results[t];
    total.first_n += r.first_n;
    total.once += r.once;
    total.shapes += r.shapes;
    total.errors += r.errors;
    BOOST_TEST(r.own_n == kPerThreadN);
    for (std::size_t k = 0; k < kernels.size(); ++k) {
      BOOST_TEST(r.handles[k] == results[0].handles[k]);  // one handle per key for everyone
    }
    for (const auto& [p, bytes] : r.scratch) {
      ++scratch_seen;
      BOOST_TEST_REQUIRE(gpu.handed_out(p));  // allocated by the backend and never freed
    }
  }
  BOOST_TEST(total.errors == 0u);
  BOOST_TEST(total.first_n == kFirstN);
  BOOST_TEST(total.once == 1u);
  BOOST_TEST(total.shapes == kShapes);
  for (const Key& k : kernels) {
    BOOST_TEST_INFO(k.module << "::" << k.func);
    BOOST_TEST(gpu.kernel_calls_for(k.module, k.func) == 1u);
  }
  BOOST_TEST(gpu.kernel_calls == kernels.size());
  BOOST_TEST(c.kernel_count() == kernels.size());
  BOOST_TEST(c.scratch_count() == tags.size());
  BOOST_TEST(scratch_seen > 0u);
  // Every buffer the cache allocated is still on the ledger (retired ones included) ...
  BOOST_TEST(host.gpu->live_alloc_count() == live0 + gpu.handed_out_count());
  BOOST_TEST(gpu.handed_out_count() == gpu.alloc_calls);
  // ... until release hands them all back.
  c.release(gpu);
  BOOST_TEST(gpu.handed_out_count() == 0u);
  BOOST_TEST(host.gpu->live_alloc_count() == live0);
}

// unload_module forgets that module's handles and records, and only those.
BOOST_AUTO_TEST_CASE(unload_module_forgets_that_modules_handles_and_records_only) {
  Host host;
  CountingBackend gpu(*host.gpu);
  OpCache& c = host.gpu->op_cache();  // the cache unload_module clears: the plugin backend's own
  const KernelHandle old_axpy = c.kernel(gpu, "axpy", "axpy");
  const KernelHandle gemm = c.kernel(gpu, "gemm", "gemm_a_e4m3");
  c.record_n_tile(old_axpy, 9);
  const KernelHandle mine{777};  // recorded by hand, of no module
  c.record_n_tile(mine, 5);
  BOOST_TEST(c.kernel_count() == 2u);

  gpu.unload_module("axpy");  // forwards to host.gpu, whose cache is c
  BOOST_TEST(c.kernel_count() == 1u);
  BOOST_TEST(!c.n_tile(old_axpy).has_value());  // the module's records went with it
  BOOST_TEST(c.a_e4m3(gemm));                   // other modules' records stay
  BOOST_TEST(c.n_tile(gemm).has_value());
  BOOST_TEST(c.n_tile(mine).value() == 5u);

  // The next lookup asks the backend again (which reloads axpy from modules_dir) ...
  const KernelHandle new_axpy = c.kernel(gpu, "axpy", "axpy");
  BOOST_TEST_REQUIRE(gpu.kernel_calls_for("axpy", "axpy") == 2u);  // before: the stale handle
  BOOST_TEST(c.kernel(gpu, "gemm", "gemm_a_e4m3") == gemm);      // gemm was not forgotten
  BOOST_TEST(gpu.kernel_calls_for("gemm", "gemm_a_e4m3") == 1u);
  BOOST_TEST(c.kernel(gpu, "axpy", "axpy") == new_axpy);  // and memoizes the new handle
  BOOST_TEST(gpu.kernel_calls_for("axpy", "axpy") == 2u);
  BOOST_TEST(c.kernel_count() == 2u);

  // ... which launches: y = 2x + y.
  constexpr std::uint32_t n = 64;
  std::vector<float> x(n, 3.0f), y(n, 1.0f);
  const DevicePtr dx = host.gpu->alloc(n * sizeof(float));
  const DevicePtr dy = host.gpu->alloc(n * sizeof(float));
  host.gpu->copy_h2d(dx, x.data(), n * sizeof(float));
  host.gpu->copy_h2d(dy, y.data(), n * sizeof(float));
  const float a = 2.0f;
  const std::uint64_t px = dx.value, py = dy.value;
  host.gpu->launch_args(new_axpy, {1, 1, 1}, {64, 1, 1}, 0, {}, n, a, px, py);
  host.gpu->synchronize();
  host.gpu->copy_d2h(y.data(), dy, n * sizeof(float));
  BOOST_TEST(y[0] == 7.0f);
  BOOST_TEST(y[n - 1] == 7.0f);
  host.gpu->free(dx);
  host.gpu->free(dy);

  // Unload and reload many times: forgotten entries never come back, the table stays exact.
  for (int i = 0; i < 40; ++i) {
    gpu.unload_module("axpy");
    c.kernel(gpu, "axpy", "axpy");
  }
  BOOST_TEST(gpu.kernel_calls_for("axpy", "axpy") == 42u);
  BOOST_TEST(c.kernel_count() == 2u);
  BOOST_TEST(c.kernel(gpu, "gemm", "gemm_a_e4m3") == gemm);
  c.release(gpu);
  BOOST_TEST(c.kernel_count() == 0u);
}

// Without managed memory, out-of-memory neither latches nor hides the cause.
BOOST_AUTO_TEST_CASE(alloc_with_fallback_without_managed_memory_throws_oom_and_never_latches) {
  Host host;
  auto small = host.another({{"device_memory_limit", "1M"}});
  NoManagedBackend gpu(*small);
  OpCache& c = gpu.op_cache();
  std::string log;
  {
    StderrCapture capture;
    try {
      c.alloc_with_fallback(gpu, 2u << 20);
      BOOST_ERROR("a 2 MiB request past a 1 MiB limit succeeded");
    } catch (const Error& e) {
      BOOST_TEST(e.status() == Status::out_of_memory);  // the cause, not "unsupported"
    }
    log = capture.text();
  }
  BOOST_TEST(!c.alloc_fell_back());
  BOOST_TEST_INFO("log: " << log);
  BOOST_TEST(!contains(log, "now allocates model memory as managed memory"));
  // Later calls try device memory again, and a small one succeeds there.
  const DevicePtr p = c.alloc_with_fallback(gpu, 4096);
  BOOST_TEST(static_cast<bool>(p));
  BOOST_TEST(gpu.alloc_calls == 2u);
  BOOST_TEST(!c.alloc_fell_back());
  BOOST_TEST(small->ledger_stats().live_managed_bytes == 0u);
  small->free(p);
  c.release(gpu);
}

// A cache serves one backend; another backend is refused, hit or miss.
BOOST_AUTO_TEST_CASE(a_cache_is_bound_to_the_backend_it_serves) {
  Host host;
  auto second = host.another();
  CountingBackend a(*host.gpu);
  CountingBackend b(*second);
  OpCache c;
  const KernelHandle ha = c.kernel(a, "axpy", "axpy");
  const auto refused = [](const auto& call) {
    try {
      call();
    } catch (const Error& e) {
      return e.status() == Status::invalid_argument;
    }
    return false;
  };
  BOOST_TEST(refused([&] { c.kernel(b, "axpy", "axpy"); }));  // a hit for a
  BOOST_TEST(refused([&] { c.kernel(b, "gemm", "gemm_f32"); }));  // a miss
  BOOST_TEST(b.kernel_calls == 0u);  // b was never asked, nor handed a's handle
  const DevicePtr s = c.scratch(a, "t", 64);
  BOOST_TEST(refused([&] { c.scratch(b, "t", 64); }));  // would be a hit for a
  BOOST_TEST(refused([&] { c.scratch(b, "u", 64); }));
  BOOST_TEST(refused([&] { c.alloc_with_fallback(b, 64); }));
  BOOST_TEST(b.alloc_calls == 0u);
  BOOST_TEST(refused([&] { c.release(b); }));  // scratch is freed by its own backend only
  BOOST_TEST(c.scratch_count() == 1u);
  BOOST_TEST(a.handed_out(s));
  BOOST_TEST(c.kernel(a, "axpy", "axpy") == ha);  // a still served, from the memo
  BOOST_TEST(a.kernel_calls == 1u);
  // release unbinds: the emptied cache may serve another backend.
  c.release(a);
  BOOST_TEST(!a.handed_out(s));
  c.kernel(b, "axpy", "axpy");
  BOOST_TEST(b.kernel_calls == 1u);
  BOOST_TEST(refused([&] { c.kernel(a, "axpy", "axpy"); }));
  c.release(b);
}

BOOST_AUTO_TEST_SUITE_END()
