// SPDX-License-Identifier: Apache-2.0
// Conformance cases for the OpCache contract through the real plugin: metadata, scratch, latches.
#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

std::uint32_t read_u32_symbol(GpuBackend& gpu, std::string_view module, std::string_view symbol) {
  const auto sym = gpu.device_symbol(module, symbol);
  GPUPLUG_CHECK_MSG(sym.has_value(), module << " does not publish " << symbol);
  GPUPLUG_CHECK_EQ(sym->bytes, 4u);
  std::uint32_t v = 0;
  gpu.copy_d2h(&v, sym->address, sizeof v);
  return v;
}

void opcache_kernel_memoized(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  OpCache& cache = gpu.op_cache();
  const KernelHandle a = cache.kernel(gpu, "gemm", "gemm_f32");
  const KernelHandle b =
      cache.kernel(gpu, std::string("gemm"), std::string("gemm_f32"));  // temporaries
  GPUPLUG_CHECK(a);
  GPUPLUG_CHECK(a == b);
  GPUPLUG_CHECK_EQ(cache.kernel_count(), 1u);
  const KernelHandle c = cache.kernel(gpu, "axpy", "axpy");
  GPUPLUG_CHECK(c && c != a);
  GPUPLUG_CHECK_EQ(cache.kernel_count(), 2u);
  std::ostringstream os;
  os << cache;
  GPUPLUG_CHECK_EQ(os.str(), std::string("OpCache { kernels: 2, scratch: 0 }"));
}

void opcache_published_metadata(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  OpCache& cache = gpu.op_cache();
  const KernelHandle f32 = cache.kernel(gpu, "gemm", "gemm_f32");
  const auto tile = cache.n_tile(f32);
  GPUPLUG_CHECK_MSG(tile.has_value(), "OpCache recorded no n_tile for gemm::gemm_f32");
  GPUPLUG_CHECK_EQ(*tile, read_u32_symbol(gpu, "gemm", "gemm_f32_n_tile"));
  GPUPLUG_CHECK_MSG(!cache.a_e4m3(f32), "gemm_f32 is recorded as casting A to E4M3");

  const KernelHandle e4 = cache.kernel(gpu, "gemm", "gemm_a_e4m3");
  GPUPLUG_CHECK_MSG(cache.a_e4m3(e4), "OpCache did not record a_e4m3 for gemm::gemm_a_e4m3");
  const auto tile_e4 = cache.n_tile(e4);
  GPUPLUG_CHECK_MSG(tile_e4.has_value(), "OpCache recorded no n_tile for gemm::gemm_a_e4m3");
  GPUPLUG_CHECK_EQ(*tile_e4, read_u32_symbol(gpu, "gemm", "gemm_a_e4m3_n_tile"));

  const KernelHandle ax = cache.kernel(gpu, "axpy", "axpy");
  GPUPLUG_CHECK(!cache.n_tile(ax).has_value());
  GPUPLUG_CHECK(!cache.a_e4m3(ax));
}

void opcache_scratch_grow_only(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  OpCache& cache = gpu.op_cache();
  const LedgerStats base = gpu.ledger_stats();
  const DevicePtr p1 = cache.scratch(gpu, "conformance", 1000);
  GPUPLUG_CHECK(p1);
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_count, base.live_count + 1);
  GPUPLUG_CHECK(cache.scratch(gpu, "conformance", 10) == p1);
  GPUPLUG_CHECK(cache.scratch(gpu, std::string("conformance"), 1000) == p1);
  const DevicePtr p2 = cache.scratch(gpu, "conformance", 100000);
  GPUPLUG_CHECK(p2 && p2 != p1);
  // The retired buffer stays allocated and usable until release.
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_count, base.live_count + 2);
  const std::vector<std::uint8_t> bytes(1000, 0x3C);
  gpu.copy_h2d(p1, bytes.data(), bytes.size());
  gpu.copy_h2d(p2 + 99000, bytes.data(), bytes.size());
  GPUPLUG_CHECK(cache.scratch(gpu, "conformance", 50000) == p2);
  const DevicePtr other = cache.scratch(gpu, "conformance_other", 64);
  GPUPLUG_CHECK(other && other != p1 && other != p2);
  GPUPLUG_CHECK_EQ(cache.scratch_count(), 2u);

  cache.release(gpu);
  GPUPLUG_CHECK_EQ(cache.scratch_count(), 0u);
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_count, base.live_count);
  GPUPLUG_CHECK_THROWS(gpu.free(p1),
                       Status::invalid_argument);  // release freed the retired one too
  cache.release(gpu);                              // idempotent
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_count, base.live_count);
}

void opcache_release_forgets_kernels(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  OpCache& cache = gpu.op_cache();
  const KernelHandle h = cache.kernel(gpu, "gemm", "gemm_f32");
  GPUPLUG_CHECK(cache.n_tile(h).has_value());
  cache.release(gpu);
  GPUPLUG_CHECK_EQ(cache.kernel_count(), 0u);
  GPUPLUG_CHECK_MSG(!cache.n_tile(h).has_value(), "n_tile survived OpCache::release");
  const KernelHandle again = cache.kernel(gpu, "gemm", "gemm_f32");
  GPUPLUG_CHECK(again);
  GPUPLUG_CHECK(cache.n_tile(again).has_value());
  // The re-resolved kernel runs.
  const std::uint32_t m = 5, n = 7, k = 3;
  const std::vector<float> a(m * k, 1.0f), b(k * n, 2.0f);
  const auto c = run_gemm(gpu, "gemm_f32", m, n, k, a, b);
  GPUPLUG_CHECK(std::all_of(c.begin(), c.end(), [](float v) { return v == 6.0f; }));
}

void alloc_with_fallback_latch(Context& ctx) {
  if (!ctx.backend().device_info().managed_memory)
    skip("the device has no managed memory, so nothing to fall back to");
  auto a = ctx.make_backend({{"device_memory_limit", "1M"}});
  auto b = ctx.make_backend({{"device_memory_limit", "1M"}});
  OpCache& ca = a->op_cache();
  GPUPLUG_CHECK(!ca.alloc_fell_back());

  // Fits: device memory, no latch.
  DeviceBuffer first = DeviceBuffer::adopt(*a, ca.alloc_with_fallback(*a, 512 * 1024), 512 * 1024);
  GPUPLUG_CHECK(!ca.alloc_fell_back());
  GPUPLUG_CHECK_EQ(a->ledger_stats().live_managed_bytes, 0u);

  // Past the limit: latches and uses managed memory, which works like any other.
  {
    ScopedLogLevel quiet(LogLevel::error);  // the first fallback warns by design
    DeviceBuffer big =
        DeviceBuffer::adopt(*a, ca.alloc_with_fallback(*a, 2 * 1024 * 1024), 2 * 1024 * 1024);
    GPUPLUG_CHECK(big.ptr());
    GPUPLUG_CHECK(ca.alloc_fell_back());
    GPUPLUG_CHECK(a->ledger_stats().live_managed_bytes >= 2u * 1024 * 1024);
    const std::vector<std::uint8_t> bytes(4096, 0x42);
    std::vector<std::uint8_t> back(4096);
    a->copy_h2d(big.ptr() + 1024 * 1024, bytes.data(), bytes.size());
    a->copy_d2h(back.data(), big.ptr() + 1024 * 1024, back.size());
    GPUPLUG_CHECK(back == bytes);
  }
  // Once latched, straight to managed even though device memory would fit.
  const std::uint64_t managed_before = a->ledger_stats().live_managed_bytes;
  DeviceBuffer small = DeviceBuffer::adopt(*a, ca.alloc_with_fallback(*a, 4096), 4096);
  GPUPLUG_CHECK_MSG(a->ledger_stats().live_managed_bytes >= managed_before + 4096,
                    "a latched backend allocated device memory instead of managed");

  // The latch is per backend: the twin and the backend under test never saw it.
  GPUPLUG_CHECK(!b->op_cache().alloc_fell_back());
  GPUPLUG_CHECK(!ctx.backend().op_cache().alloc_fell_back());
  DeviceBuffer on_b = DeviceBuffer::adopt(*b, b->op_cache().alloc_with_fallback(*b, 4096), 4096);
  GPUPLUG_CHECK_EQ(b->ledger_stats().live_managed_bytes, 0u);
  GPUPLUG_CHECK(!b->op_cache().alloc_fell_back());
}

void opcache_backends_share_nothing(Context& ctx) {
  auto a = ctx.make_backend();
  auto b = ctx.make_backend();
  OpCache& ca = a->op_cache();
  OpCache& cb = b->op_cache();
  GPUPLUG_CHECK(&ca != &cb);
  ca.kernel(*a, "gemm", "gemm_f32");
  GPUPLUG_CHECK_EQ(ca.kernel_count(), 1u);
  GPUPLUG_CHECK_EQ(cb.kernel_count(), 0u);
  GPUPLUG_CHECK(ca.once("conformance_once"));
  GPUPLUG_CHECK(!ca.once("conformance_once"));
  GPUPLUG_CHECK(cb.once("conformance_once"));
  GPUPLUG_CHECK(ca.first_n("conformance_n", 1));
  GPUPLUG_CHECK(cb.first_n("conformance_n", 1));
  GPUPLUG_CHECK(ca.first_shape("gemm", 1, 2, 3));
  GPUPLUG_CHECK(cb.first_shape("gemm", 1, 2, 3));
  {
    ScopedLogLevel quiet(LogLevel::error);  // a first fallback may warn
    ca.note_alloc_fallback();
  }
  GPUPLUG_CHECK(!cb.alloc_fell_back());
  const DevicePtr sa = ca.scratch(*a, "conformance", 4096);
  GPUPLUG_CHECK_EQ(a->ledger_stats().live_count, 1u);
  GPUPLUG_CHECK_EQ(b->ledger_stats().live_count, 0u);
  GPUPLUG_CHECK_THROWS(b->free(sa),
                       Status::invalid_argument);  // b's ledger does not know a's memory
  // Module names are per backend too.
  const auto image = ctx.module_image("axpy");
  a->load_module("conformance_same_name", image);
  b->load_module("conformance_same_name", image);
  cb.release(*b);
  GPUPLUG_CHECK_EQ(ca.scratch_count(), 1u);
  GPUPLUG_CHECK_EQ(a->ledger_stats().live_count, 1u);
  ca.release(*a);
  GPUPLUG_CHECK_EQ(a->ledger_stats().live_count, 0u);
}

// unload_module makes the backend's OpCache forget that module's handles (a stale
// one would run unloaded code), and only those.
void opcache_unload_forgets_module(Context& ctx) {
  auto gpu = ctx.make_backend();
  OpCache& cache = gpu->op_cache();
  gpu->load_module("conformance_unload", ctx.module_image("axpy"));
  cache.kernel(*gpu, "conformance_unload", "axpy");
  const KernelHandle gemm = cache.kernel(*gpu, "gemm", "gemm_f32");
  GPUPLUG_CHECK_EQ(cache.kernel_count(), 2u);
  try {
    gpu->unload_module("conformance_unload");
  } catch (const Error& e) {
    if (e.status() != Status::unsupported) throw;
    skip("unload_module is unsupported (optional slot)");
  }
  GPUPLUG_CHECK_EQ(cache.kernel_count(), 1u);
  // Loaded from bytes, so not reloadable: the lookup must reach the backend and fail.
  GPUPLUG_CHECK_THROWS(cache.kernel(*gpu, "conformance_unload", "axpy"), Status::not_found);
  GPUPLUG_CHECK(cache.kernel(*gpu, "gemm", "gemm_f32") == gemm);
  GPUPLUG_CHECK(cache.n_tile(gemm).has_value());
  // Loaded again under the same name, it resolves and is memoized anew.
  gpu->load_module("conformance_unload", ctx.module_image("axpy"));
  GPUPLUG_CHECK(cache.kernel(*gpu, "conformance_unload", "axpy"));
  GPUPLUG_CHECK_EQ(cache.kernel_count(), 2u);
  cache.release(*gpu);
}

void teardown_release_all(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  OpCache& cache = gpu.op_cache();
  cache.scratch(gpu, "conformance_a", 1000);
  cache.scratch(gpu, "conformance_b", 2000);
  cache.kernel(gpu, "axpy", "axpy");
  Teardown teardown;
  teardown.add(cache);
  GPUPLUG_CHECK_EQ(cache.label(), std::string_view("op scratch"));
  teardown.release_all(gpu);
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_count, 0u);
  GPUPLUG_CHECK_EQ(cache.kernel_count(), 0u);
  teardown.release_all(gpu);  // idempotent
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_count, 0u);
}

const Case cases[] = {
    {"opcache_kernel_memoized", "OpCache::kernel memoizes per (module, func), temporaries included",
     opcache_kernel_memoized},
    {"opcache_published_metadata", "n_tile and a_e4m3 are read from the module's published symbols",
     opcache_published_metadata},
    {"opcache_scratch_grow_only",
     "scratch grows only; retired buffers stay live until release frees all",
     opcache_scratch_grow_only},
    {"opcache_release_forgets_kernels",
     "release forgets handles and records; kernels re-resolve and run",
     opcache_release_forgets_kernels},
    {"alloc_with_fallback_latch",
     "device_memory_limit makes alloc_with_fallback latch to managed, per backend",
     alloc_with_fallback_latch},
    {"opcache_backends_share_nothing",
     "two backends of one device share no cache, gate, latch, memory or module name",
     opcache_backends_share_nothing},
    {"opcache_unload_forgets_module",
     "unload_module makes the OpCache forget that module's handles, and only those",
     opcache_unload_forgets_module},
    {"teardown_release_all", "Teardown releases the OpCache through the plugin, idempotently",
     teardown_release_all},
};

}  // namespace

std::span<const Case> opcache_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
