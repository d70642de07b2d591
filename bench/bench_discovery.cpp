// SPDX-License-Identifier: Apache-2.0
// Discovery time, isolated (a gpuplug-probe child per plugin, all at once) against in-process
// probing, over the plugins of this build (host, and cuda where built: run it with the fake
// driver, LD_LIBRARY_PATH=<build>/tests/unit/fake-cuda GPUPLUG_FAKE_CUDA=no_device, to time a
// CUDA probe that gets as far as cuInit). Results: docs/PERFORMANCE.md, "Discovery: isolated vs
// in-process".
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <gpuplug/gpuplug.hpp>

namespace {

void discover(benchmark::State& state, gpuplug::ProbeMode mode) {
  gpuplug::DiscoveryOptions options;
  options.probe_mode = mode;
  std::size_t plugins = 0;
  for (auto _ : state) {
    gpuplug::PluginRegistry registry;
    registry.discover(options);
    plugins = registry.plugins().size();
    benchmark::DoNotOptimize(plugins);
  }
  state.counters["plugins"] = static_cast<double>(plugins);
}

void BM_DiscoverIsolated(benchmark::State& state) { discover(state, gpuplug::ProbeMode::isolated); }
void BM_DiscoverInProcess(benchmark::State& state) {
  discover(state, gpuplug::ProbeMode::in_process);
}

BENCHMARK(BM_DiscoverIsolated)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DiscoverInProcess)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  // This build's plugins, unless the caller chose others.
  ::setenv("GPUPLUG_PLUGIN_PATH", GPUPLUG_BENCH_PLUGIN_DIR, 0);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
