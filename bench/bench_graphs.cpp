// SPDX-License-Identifier: Apache-2.0
// Graph replay against eager launches on host (ABI 1.3, docs/graphs.md): N launches of the
// bench-only no-op kernel `noop_counted` (bench/noop_kernel.cpp; it publishes
// `noop_counted_args`, which a capture needs) on a created stream, then a synchronize:
//  - `eager`:  N launch_args calls, each through the core, the SDK's checks and the executor;
//  - `replay`: one launch_graph of a graph that captured those N launches.
// Each is timed on the same backend in the same run, alternating, and reported per node (the
// median of the repetitions) with the ratio replay / eager. A plain timed program (no Google
// Benchmark statistics to compare across runs): the ratio is what docs/PERFORMANCE.md quotes.
#include <gpuplug/gpuplug.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  try {
    ::setenv("GPUPLUG_PLUGIN_PATH", GPUPLUG_BENCH_PLUGIN_DIR, /*overwrite=*/0);
    ::unsetenv("GPUPLUG_LAYERS");
    gpuplug::set_log_level(gpuplug::LogLevel::warning);
    gpuplug::PluginRegistry registry;
    registry.discover();
    auto gpu = registry.create("host!");
    gpu->load_module_file("bench_noop", GPUPLUG_BENCH_NOOP_MODULE);
    const gpuplug::KernelHandle f = gpu->kernel("bench_noop", "noop_counted");
    const gpuplug::Stream s = gpu->create_stream();
    const std::uint32_t arg = 7;
    std::printf("backend %s: per node, median of 31 repetitions\n",
                std::string(gpu->name()).c_str());
    std::printf("%8s %14s %14s %8s\n", "nodes", "eager ns", "replay ns", "ratio");
    for (const int n : {1, 10, 100, 1000}) {
      gpu->begin_capture(s);
      for (int i = 0; i < n; ++i)
        gpu->launch_args(f, gpuplug::Dim3{1, 1, 1}, gpuplug::Dim3{1, 1, 1}, 0, s, arg);
      const gpuplug::Graph g = gpu->end_capture(s);
      const int reps = std::max(1, 20000 / n);
      std::vector<double> eager, replay;
      for (int rep = 0; rep < 31; ++rep) {
        auto t0 = Clock::now();
        for (int r = 0; r < reps; ++r)
          for (int i = 0; i < n; ++i)
            gpu->launch_args(f, gpuplug::Dim3{1, 1, 1}, gpuplug::Dim3{1, 1, 1}, 0, s, arg);
        gpu->synchronize(s);
        auto t1 = Clock::now();
        for (int r = 0; r < reps; ++r) gpu->launch_graph(g, s);
        gpu->synchronize(s);
        auto t2 = Clock::now();
        const double nodes = static_cast<double>(reps) * n;
        eager.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / nodes);
        replay.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count() / nodes);
      }
      const double e = median(eager), r = median(replay);
      std::printf("%8d %14.1f %14.1f %8.2f\n", n, e, r, r / e);
      gpu->destroy_graph(g);
    }
    gpu->destroy_stream(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_graphs: %s\n", e.what());
    return 1;
  }
  return 0;
}
