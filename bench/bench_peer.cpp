// SPDX-License-Identifier: Apache-2.0
// copy_peer's bandwidth (docs/interop.md), on host, against baselines of the same run:
//  - `copy_peer/vendor/<bytes>`: copy_peer between two host backends (two instances of the host
//    plugin) through the plugin's own peer copy (ABI 1.2 copy_peer_async: one memcpy);
//  - `copy_peer/staged_pinned/<bytes>`, `copy_peer/staged_pageable/<bytes>`: the same backends,
//    staged (the source's copy_d2h of one chunk overlapping the destination's copy_h2d_async of
//    the one before) through the plugin's pinned memory (host_alloc_pinned), then pageable memory;
//  - `copy_peer_async/vendor/<bytes>`: copy_peer_async on a stream of each, then wait();
//  - `copy_peer/same_backend/<bytes>`: copy_peer on one backend (its copy_d2d);
//  - `memcpy/<bytes>`: std::memcpy between two host buffers: what the machine can do.
// Bytes per second are Google Benchmark's `bytes_per_second` counter. With GPUPLUG_BENCH_PEER
// set to a selector pair "cuda:0,cuda:1" (or "cuda:0,hip:0") the two-backend rows run between
// those backends instead, for the GPU figures (two vendors have no vendor row: it stages).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <gpuplug/gpuplug.hpp>
#include <memory>
#include <string>
#include <vector>

namespace {

using gpuplug::DevicePtr;
using gpuplug::GpuBackend;

struct World {
  gpuplug::PluginRegistry registry;
  std::shared_ptr<GpuBackend> a, b;
};
World* g_world = nullptr;

/// copy_peer from backend `a` to backend `b` of the world (the same one for same_backend), with
/// `options`; `async`: copy_peer_async between a stream of each, then wait().
void copy(benchmark::State& state, bool same_backend, gpuplug::PeerCopyOptions options,
          bool async = false) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  GpuBackend& src = *g_world->a;
  GpuBackend& dst = same_backend ? src : *g_world->b;
  const DevicePtr s = src.alloc(bytes, "bench_peer src");
  const DevicePtr d = dst.alloc(bytes, "bench_peer dst");
  // Touched before the clock starts: the first write of fresh pages (page faults) is no copy.
  src.memset(s, 1, bytes);
  dst.memset(d, 0, bytes);
  src.synchronize();
  dst.synchronize();
  const gpuplug::Stream src_stream = src.create_stream();
  const gpuplug::Stream dst_stream = dst.create_stream();
  for (auto _ : state) {
    if (async) {
      gpuplug::copy_peer_async(dst, d, dst_stream, src, s, src_stream, bytes, options).wait();
    } else {
      gpuplug::copy_peer(dst, d, src, s, bytes, options);
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  src.destroy_stream(src_stream);
  dst.destroy_stream(dst_stream);
  src.free(s);
  dst.free(d);
}

constexpr std::size_t kChunk = std::size_t{4} << 20;
void copy_vendor(benchmark::State& state) { copy(state, false, {kChunk, true, true}); }
void copy_staged_pinned(benchmark::State& state) { copy(state, false, {kChunk, false, true}); }
void copy_staged_pageable(benchmark::State& state) { copy(state, false, {kChunk, false, false}); }
void copy_async_vendor(benchmark::State& state) { copy(state, false, {kChunk, true, true}, true); }
void copy_same_backend(benchmark::State& state) { copy(state, true, {}); }

void raw_memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<char> s(bytes, 1), d(bytes, 0);
  for (auto _ : state) {
    std::memcpy(d.data(), s.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  try {
    ::setenv("GPUPLUG_PLUGIN_PATH", GPUPLUG_BENCH_PLUGIN_DIR, /*overwrite=*/0);
    auto world = std::make_unique<World>();
    g_world = world.get();
    world->registry.discover();
    std::string pair = "host!,host!";
    if (const char* env = std::getenv("GPUPLUG_BENCH_PEER"); env != nullptr && *env != '\0') pair = env;
    const auto comma = pair.find(',');
    if (comma == std::string::npos) {
      std::fprintf(stderr, "bench_peer: GPUPLUG_BENCH_PEER='%s': expected SRC,DST\n", pair.c_str());
      return 2;
    }
    world->a = world->registry.create(pair.substr(0, comma));
    world->b = world->registry.create(pair.substr(comma + 1));
    benchmark::AddCustomContext("gpuplug_peer",
                                std::string(world->a->name()) + " -> " + std::string(world->b->name()));
    for (auto [name, fn] : {std::pair{"copy_peer/vendor", &copy_vendor},
                            std::pair{"copy_peer/staged_pinned", &copy_staged_pinned},
                            std::pair{"copy_peer/staged_pageable", &copy_staged_pageable},
                            std::pair{"copy_peer_async/vendor", &copy_async_vendor},
                            std::pair{"copy_peer/same_backend", &copy_same_backend},
                            std::pair{"memcpy", &raw_memcpy}}) {
      benchmark::RegisterBenchmark(name, fn)->Arg(64 << 10)->Arg(4 << 20)->Arg(64 << 20)->UseRealTime();
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    g_world = nullptr;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_peer: %s\n", e.what());
    return 1;
  }
  return 0;
}
