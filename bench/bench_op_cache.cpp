// SPDX-License-Identifier: Apache-2.0
// OpCache hits against the seed's locked string maps and an unsynchronized lower bound.
//
// Every benchmark is a hit: the keys are inserted before timing starts. Names are
// `<hit>/<implementation>/real_time/threads:<t>`; items_per_second is the aggregate rate of all
// threads (real time), so 2-thread scaling is items_per_second(threads:2) / (threads:1).
// scripts/bench runs this and prints the ratios; docs/PERFORMANCE.md has the method.
#include <gpuplug/gpuplug.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "baseline_caches.hpp"

namespace {

using gpuplug::GpuBackend;
using gpuplug::KernelHandle;
using gpuplug::OpCache;
using namespace gpuplug::bench;

// The keys, as an inference engine uses them (the gemm module is the real host kernel module, so
// OpCache's miss also reads its published gemm_f32_n_tile). They live in globals so that the
// compiler sees nothing constant about them in the timed loops.
std::string g_module = "gemm";
std::string g_func = "gemm_f32";
std::string g_scratch_tag = "scratch.h";
constexpr std::size_t kScratchBytes = 1 << 20;
std::string g_shape_name = "route:gemm_f32";
constexpr std::uint64_t kM = 256, kN = 256, kK = 1024;
std::string g_once_key = "once:e4m3_route";
std::string g_first_n_key = "log:step";
constexpr std::uint64_t kFirstN = 3;

struct World {
  gpuplug::PluginRegistry registry;
  std::shared_ptr<GpuBackend> gpu;
  KernelHandle handle;
  SeedSharedMutexCache seed;
  PlainMutexCache mutex;
  UnsyncFlatCache flat;

  ~World() {
    seed.release(*gpu);
    mutex.release(*gpu);
    flat.release(*gpu);
  }
};
World* g_world = nullptr;

// The cache each benchmark runs against, by type.
template <class Cache>
Cache& cache();
template <>
OpCache& cache<OpCache>() {
  return g_world->gpu->op_cache();
}
template <>
SeedSharedMutexCache& cache<SeedSharedMutexCache>() {
  return g_world->seed;
}
template <>
PlainMutexCache& cache<PlainMutexCache>() {
  return g_world->mutex;
}
template <>
UnsyncFlatCache& cache<UnsyncFlatCache>() {
  return g_world->flat;
}

// Inserts every key (misses), then checks each cache answers as a hit should.
template <class Cache>
void warm(Cache& c, GpuBackend& gpu) {
  const KernelHandle h = c.kernel(gpu, g_module, g_func);
  if (h != g_world->handle) throw std::runtime_error("warm-up: kernel handles differ");
  if constexpr (!std::is_same_v<Cache, OpCache>) {
    // OpCache recorded the module's n_tile on its miss; the baselines are told the same value.
    c.record_n_tile(h, *gpu.op_cache().n_tile(h));
  }
  c.scratch(gpu, g_scratch_tag, kScratchBytes);
  c.first_shape(g_shape_name, kM, kN, kK);
  c.once(g_once_key);
  for (std::uint64_t i = 0; i < kFirstN; ++i) c.first_n(g_first_n_key, kFirstN);
  const bool ok = c.kernel(gpu, g_module, g_func) == h &&
                  c.scratch(gpu, g_scratch_tag, kScratchBytes / 2) ==
                      c.scratch(gpu, g_scratch_tag, kScratchBytes) &&
                  !c.first_shape(g_shape_name, kM, kN, kK) && !c.once(g_once_key) &&
                  !c.first_n(g_first_n_key, kFirstN) && c.n_tile(h).has_value();
  if (!ok) throw std::runtime_error("warm-up: a cache did not answer a hit as expected");
}

// ---- the hits -----------------------------------------------------------------------------

template <class Cache>
void kernel_hit(benchmark::State& state) {
  Cache& c = cache<Cache>();
  GpuBackend& gpu = *g_world->gpu;
  for (auto _ : state) benchmark::DoNotOptimize(c.kernel(gpu, g_module, g_func));
  state.SetItemsProcessed(state.iterations());
}

template <class Cache>
void scratch_fits(benchmark::State& state) {
  Cache& c = cache<Cache>();
  GpuBackend& gpu = *g_world->gpu;
  for (auto _ : state) benchmark::DoNotOptimize(c.scratch(gpu, g_scratch_tag, kScratchBytes / 2));
  state.SetItemsProcessed(state.iterations());
}

template <class Cache>
void first_shape_seen(benchmark::State& state) {
  Cache& c = cache<Cache>();
  for (auto _ : state) benchmark::DoNotOptimize(c.first_shape(g_shape_name, kM, kN, kK));
  state.SetItemsProcessed(state.iterations());
}

template <class Cache>
void once_seen(benchmark::State& state) {
  Cache& c = cache<Cache>();
  for (auto _ : state) benchmark::DoNotOptimize(c.once(g_once_key));
  state.SetItemsProcessed(state.iterations());
}

template <class Cache>
void first_n_past(benchmark::State& state) {
  Cache& c = cache<Cache>();
  for (auto _ : state) benchmark::DoNotOptimize(c.first_n(g_first_n_key, kFirstN));
  state.SetItemsProcessed(state.iterations());
}

template <class Cache>
void n_tile_known(benchmark::State& state) {
  Cache& c = cache<Cache>();
  const KernelHandle h = g_world->handle;
  for (auto _ : state) benchmark::DoNotOptimize(c.n_tile(h));
  state.SetItemsProcessed(state.iterations());
}

using BenchFn = void (*)(benchmark::State&);

constexpr const char* kHits[] = {"kernel_hit", "scratch_fits", "first_shape_seen",
                                 "once_seen",  "first_n_past", "n_tile"};

template <class Cache>
BenchFn hit_fn(std::size_t i) {
  constexpr BenchFn fns[] = {&kernel_hit<Cache>, &scratch_fits<Cache>, &first_shape_seen<Cache>,
                             &once_seen<Cache>,  &first_n_past<Cache>, &n_tile_known<Cache>};
  return fns[i];
}

void register_one(std::size_t hit, const char* impl, BenchFn fn) {
  benchmark::RegisterBenchmark((std::string(kHits[hit]) + "/" + impl).c_str(), fn)
      ->Threads(1)
      ->Threads(2)
      ->UseRealTime();
}

// Per hit, the four implementations side by side: OpCache, then (a), (b), (c).
void register_all() {
  for (std::size_t i = 0; i < std::size(kHits); ++i) {
    register_one(i, "opcache", hit_fn<OpCache>(i));
    register_one(i, "seed_shared_mutex", hit_fn<SeedSharedMutexCache>(i));
    register_one(i, "std_mutex", hit_fn<PlainMutexCache>(i));
    register_one(i, "unsync_flat", hit_fn<UnsyncFlatCache>(i));
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  try {
    // This build's plugins, unless the caller chose others (an installed gpuplug is searched
    // after GPUPLUG_PLUGIN_PATH, and must not be what gets measured).
    ::setenv("GPUPLUG_PLUGIN_PATH", GPUPLUG_BENCH_PLUGIN_DIR, /*overwrite=*/0);
    auto world = std::make_unique<World>();
    g_world = world.get();
    world->registry.discover();
    world->gpu = world->registry.create("host!");
    GpuBackend& gpu = *world->gpu;
    world->handle = gpu.op_cache().kernel(gpu, g_module, g_func);
    warm(gpu.op_cache(), gpu);
    warm(world->seed, gpu);
    warm(world->mutex, gpu);
    warm(world->flat, gpu);
    benchmark::AddCustomContext("gpuplug_backend", std::string(gpu.name()));
    benchmark::AddCustomContext("gpuplug_keys", g_module + "::" + g_func + ", scratch '" +
                                                    g_scratch_tag + "', '" + g_shape_name +
                                                    "', '" + g_once_key + "', '" + g_first_n_key +
                                                    "'");

    register_all();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    g_world = nullptr;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_op_cache: %s\n", e.what());
    return 1;
  }
  return 0;
}
