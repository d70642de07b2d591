// SPDX-License-Identifier: Apache-2.0
// The GPU section of docs/PERFORMANCE.md: gpuplug on cuda:0 against the CUDA driver called
// directly, in one run, on the same device, primary context and kernel.
//
//  - `cuda_launch/gpuplug` vs `cuda_launch/raw`: launches of the real `axpy` kernel from the
//    build's axpy.fatbin with n = 0 (one block, no memory touched), through GpuBackend::launch
//    and through cuLaunchKernel on a function this program loaded from the same image; each
//    iteration submits kBatch launches and then waits for the stream, so the queue never fills
//    and a rate is launches per second including their completion. Target: ratio >= 0.97.
//  - `cuda_scratch_hit/opcache` vs `cuda_alloc_free/raw`: what an engine pays per op for a
//    scratch buffer with the OpCache (a hit) and without it (cuMemAlloc + cuMemFree), 1 MiB.
//  - `cuda_alloc_free/gpuplug`: GpuBackend::alloc + free of 1 MiB (the ledger's cost on top of
//    the driver's), against `cuda_alloc_free/raw`.
//  - `cuda_graph_nodes/eager` vs `cuda_graph_nodes/replay` (N = 1, 10, 100, 1000): N empty axpy
//    launches on the stream then a synchronize, eagerly and as one launch_graph of a graph that
//    captured them (cuStreamBeginCapture ... cuGraphLaunch, docs/graphs.md); items are nodes, so
//    the table's figure is ns per node, and replay / eager what a graph saves per launch.
// A table of these ratios is printed after the benchmarks. Without a usable cuda:0 (no driver,
// no GPU) the program says why and exits 0, so scripts may run it anywhere.
#include <gpuplug/gpuplug.hpp>

#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "read_file.hpp"

using gpuplug::DevicePtr;
using gpuplug::Dim3;
using gpuplug::GpuBackend;
using gpuplug::KernelHandle;
using gpuplug::OpCache;
using gpuplug::Stream;

namespace {

constexpr int kBatch = 100;                     // launches per synchronisation
constexpr std::size_t kScratchBytes = 1 << 20;  // 1 MiB

/// The CUDA driver API, called directly: the baseline. Only the entry points this program
/// uses, resolved by name from libcuda.so.1 (no cuda.h needed to build it).
class RawCuda {
 public:
  using CUresult = int;
  using CUdevice = int;
  using CUcontext = void*;
  using CUmodule = void*;
  using CUfunction = void*;
  using CUstream = void*;
  using CUdeviceptr = unsigned long long;

  explicit RawCuda(const std::vector<char>& image) {
    lib_ = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr)
      throw std::runtime_error(std::string("dlopen libcuda.so.1: ") + ::dlerror());
    resolve(init_, "cuInit");
    resolve(device_get_, "cuDeviceGet");
    resolve(retain_, "cuDevicePrimaryCtxRetain");
    resolve(release_, "cuDevicePrimaryCtxRelease_v2");
    resolve(set_current_, "cuCtxSetCurrent");
    resolve(load_data_, "cuModuleLoadData");
    resolve(unload_, "cuModuleUnload");
    resolve(get_function_, "cuModuleGetFunction");
    resolve(stream_create_, "cuStreamCreate");
    resolve(stream_destroy_, "cuStreamDestroy_v2");
    resolve(stream_sync_, "cuStreamSynchronize");
    resolve(launch_, "cuLaunchKernel");
    resolve(mem_alloc_, "cuMemAlloc_v2");
    resolve(mem_free_, "cuMemFree_v2");
    check(init_(0), "cuInit");
    check(device_get_(&device_, 0), "cuDeviceGet");
    check(retain_(&context_, device_), "cuDevicePrimaryCtxRetain");
    make_current();
    check(load_data_(&module_, image.data()), "cuModuleLoadData(axpy.fatbin)");
    check(get_function_(&function_, module_, "axpy"), "cuModuleGetFunction(axpy)");
    check(stream_create_(&stream_, 0), "cuStreamCreate");
  }
  ~RawCuda() {
    make_current();
    if (stream_ != nullptr) stream_destroy_(stream_);
    if (module_ != nullptr) unload_(module_);
    if (context_ != nullptr) release_(device_);
  }
  RawCuda(const RawCuda&) = delete;
  RawCuda& operator=(const RawCuda&) = delete;

  /// The primary context must be current on each benchmark thread.
  void make_current() { check(set_current_(context_), "cuCtxSetCurrent"); }
  void launch(void** params) {
    check(launch_(function_, 1, 1, 1, 1, 1, 1, 0, stream_, params, nullptr), "cuLaunchKernel");
  }
  void synchronize() { check(stream_sync_(stream_), "cuStreamSynchronize"); }
  CUdeviceptr alloc(std::size_t bytes) {
    CUdeviceptr p = 0;
    check(mem_alloc_(&p, bytes), "cuMemAlloc");
    return p;
  }
  void free(CUdeviceptr p) { check(mem_free_(p), "cuMemFree"); }

 private:
  template <class Fn>
  void resolve(Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(::dlsym(lib_, name));
    if (fn == nullptr) throw std::runtime_error(std::string("libcuda.so.1 has no ") + name);
  }
  static void check(CUresult r, const char* what) {
    if (r != 0)
      throw std::runtime_error(std::string(what) + " failed: CUresult " + std::to_string(r));
  }

  void* lib_ = nullptr;  // stays loaded: the CUDA plugin holds the same library
  CUresult (*init_)(unsigned) = nullptr;
  CUresult (*device_get_)(CUdevice*, int) = nullptr;
  CUresult (*retain_)(CUcontext*, CUdevice) = nullptr;
  CUresult (*release_)(CUdevice) = nullptr;
  CUresult (*set_current_)(CUcontext) = nullptr;
  CUresult (*load_data_)(CUmodule*, const void*) = nullptr;
  CUresult (*unload_)(CUmodule) = nullptr;
  CUresult (*get_function_)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*stream_create_)(CUstream*, unsigned) = nullptr;
  CUresult (*stream_destroy_)(CUstream) = nullptr;
  CUresult (*stream_sync_)(CUstream) = nullptr;
  CUresult (*launch_)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                      unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*mem_alloc_)(CUdeviceptr*, std::size_t) = nullptr;
  CUresult (*mem_free_)(CUdeviceptr) = nullptr;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  CUstream stream_ = nullptr;
};

struct World {
  gpuplug::PluginRegistry registry;
  std::shared_ptr<GpuBackend> gpu;
  KernelHandle axpy;
  Stream stream;
  std::unique_ptr<RawCuda> raw;
};
World* g_world = nullptr;

/// Runs a benchmark body; a driver or backend error ends that benchmark with the message
/// instead of terminating the program (Google Benchmark does not catch).
template <class Body>
void guarded(benchmark::State& state, Body&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// axpy(n = 0, a, x = null, y = null): one block whose threads all return at once.
struct AxpyArgs {
  std::uint32_t n = 0;
  float a = 1.0f;
  std::uint64_t x = 0, y = 0;
  void* params[4] = {&n, &a, &x, &y};
};

void launch_gpuplug(benchmark::State& state) {
  guarded(state, [&] {
    World& w = *g_world;
    AxpyArgs args;
    for (auto _ : state) {
      for (int i = 0; i < kBatch; ++i)
        w.gpu->launch(w.axpy, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, w.stream, args.params);
      w.gpu->synchronize(w.stream);
    }
    state.SetItemsProcessed(state.iterations() * kBatch);
  });
}

void launch_raw(benchmark::State& state) {
  guarded(state, [&] {
    RawCuda& raw = *g_world->raw;
    raw.make_current();
    AxpyArgs args;
    for (auto _ : state) {
      for (int i = 0; i < kBatch; ++i) raw.launch(args.params);
      raw.synchronize();
    }
    state.SetItemsProcessed(state.iterations() * kBatch);
  });
}

void scratch_hit(benchmark::State& state) {
  guarded(state, [&] {
    World& w = *g_world;
    OpCache& cache = w.gpu->op_cache();  // the backend's own, as an engine uses it
    for (auto _ : state)
      benchmark::DoNotOptimize(cache.scratch(*w.gpu, "bench.scratch", kScratchBytes));
    state.SetItemsProcessed(state.iterations());
  });
}

void alloc_free_gpuplug(benchmark::State& state) {
  guarded(state, [&] {
    GpuBackend& gpu = *g_world->gpu;
    for (auto _ : state) {
      const DevicePtr p = gpu.alloc(kScratchBytes, "bench_gpu");
      benchmark::DoNotOptimize(p);
      gpu.free(p);
    }
    state.SetItemsProcessed(state.iterations());
  });
}

void alloc_free_raw(benchmark::State& state) {
  guarded(state, [&] {
    RawCuda& raw = *g_world->raw;
    raw.make_current();
    for (auto _ : state) {
      const auto p = raw.alloc(kScratchBytes);
      benchmark::DoNotOptimize(p);
      raw.free(p);
    }
    state.SetItemsProcessed(state.iterations());
  });
}

constexpr int kGraphNodes[] = {1, 10, 100, 1000};

void graph_nodes_eager(benchmark::State& state) {
  guarded(state, [&] {
    World& w = *g_world;
    AxpyArgs args;
    const auto nodes = static_cast<int>(state.range(0));
    for (auto _ : state) {
      for (int i = 0; i < nodes; ++i)
        w.gpu->launch(w.axpy, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, w.stream, args.params);
      w.gpu->synchronize(w.stream);
    }
    state.SetItemsProcessed(state.iterations() * nodes);
  });
}

void graph_nodes_replay(benchmark::State& state) {
  guarded(state, [&] {
    World& w = *g_world;
    AxpyArgs args;
    const auto nodes = static_cast<int>(state.range(0));
    w.gpu->begin_capture(w.stream);
    try {
      for (int i = 0; i < nodes; ++i)
        w.gpu->launch(w.axpy, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, w.stream, args.params);
    } catch (...) {
      w.gpu->abort_capture_if_active(w.stream);
      throw;
    }
    const gpuplug::Graph graph = w.gpu->end_capture(w.stream);
    for (auto _ : state) {
      w.gpu->launch_graph(graph, w.stream);
      w.gpu->synchronize(w.stream);
    }
    w.gpu->destroy_graph(graph);
    state.SetItemsProcessed(state.iterations() * nodes);
  });
}

/// Prints the runs as the console reporter does and keeps each one's items per second (the
/// median when there are repetitions), for the ratio table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      const bool aggregate = run.run_type == Run::RT_Aggregate;
      if (aggregate && run.aggregate_name != "median") continue;
      const auto it = run.counters.find("items_per_second");
      if (it == run.counters.end()) continue;
      std::string name = run.run_name.function_name;
      if (!run.run_name.args.empty()) name += "/" + run.run_name.args;
      rates[name] = it->second;
    }
  }
  std::map<std::string, double> rates;  // function name[/args] -> items per second
};

void print_ratios(const std::map<std::string, double>& rates) {
  const auto rate = [&](const char* name) {
    const auto it = rates.find(name);
    return it == rates.end() ? 0.0 : it->second;
  };
  const auto ns = [&](const char* name) { return rate(name) > 0 ? 1e9 / rate(name) : 0.0; };
  std::printf("\n### GPU: cuda:0 against the CUDA driver called directly (one run)\n\n");
  std::printf(
      "| measurement | gpuplug | raw driver | ratio | target |\n|---|---:|---:|---:|---|\n");
  const double lg = rate("cuda_launch/gpuplug"), lr = rate("cuda_launch/raw");
  std::printf("| launches/s, empty axpy, %d per sync | %.0f | %.0f | %.3f | >= 0.97: %s |\n",
              kBatch, lg, lr, lr > 0 ? lg / lr : 0.0,
              lr > 0 && lg / lr >= 0.97 ? "met" : "**missed**");
  std::printf(
      "| scratch, 1 MiB: OpCache hit vs cuMemAlloc+cuMemFree (ns) | %.1f | %.1f | %.0fx faster | "
      "report |\n",
      ns("cuda_scratch_hit/opcache"), ns("cuda_alloc_free/raw"),
      ns("cuda_scratch_hit/opcache") > 0
          ? ns("cuda_alloc_free/raw") / ns("cuda_scratch_hit/opcache")
          : 0.0);
  std::printf(
      "| alloc+free, 1 MiB: GpuBackend vs cuMemAlloc+cuMemFree (ns) | %.1f | %.1f | %.3f | report "
      "|\n",
      ns("cuda_alloc_free/gpuplug"), ns("cuda_alloc_free/raw"),
      ns("cuda_alloc_free/raw") > 0 ? ns("cuda_alloc_free/gpuplug") / ns("cuda_alloc_free/raw")
                                    : 0.0);
  std::printf("\n| nodes | eager, ns per node | replay, ns per node | replay / eager |\n"
              "|---:|---:|---:|---:|\n");
  for (const int n : kGraphNodes) {
    const std::string eager = "cuda_graph_nodes/eager/" + std::to_string(n);
    const std::string replay = "cuda_graph_nodes/replay/" + std::to_string(n);
    const double e = ns(eager.c_str()), r = ns(replay.c_str());
    std::printf("| %d | %.1f | %.1f | %.2f |\n", n, e, r, e > 0 ? r / e : 0.0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // This build's plugins, unless the caller chose others.
  ::setenv("GPUPLUG_PLUGIN_PATH", GPUPLUG_BENCH_PLUGIN_DIR, /*overwrite=*/0);
  auto world = std::make_unique<World>();
  try {
    world->registry.discover();
    world->gpu = world->registry.create("cuda:0!");
  } catch (const std::exception& e) {
    std::printf("bench_gpu: no usable cuda:0 here, nothing measured: %s\n", e.what());
    return 0;
  }
  try {
    g_world = world.get();
    const std::vector<char> image = gpuplug::bench::read_file(GPUPLUG_BENCH_CUDA_AXPY);
    world->gpu->load_module("bench_axpy", std::as_bytes(std::span(image)));
    world->axpy = world->gpu->kernel("bench_axpy", "axpy");
    world->stream = world->gpu->create_stream();
    world->raw = std::make_unique<RawCuda>(image);
    benchmark::AddCustomContext("gpuplug_backend", std::string(world->gpu->name()));
    benchmark::RegisterBenchmark("cuda_launch/gpuplug", launch_gpuplug)->UseRealTime();
    benchmark::RegisterBenchmark("cuda_launch/raw", launch_raw)->UseRealTime();
    benchmark::RegisterBenchmark("cuda_scratch_hit/opcache", scratch_hit)->UseRealTime();
    benchmark::RegisterBenchmark("cuda_alloc_free/gpuplug", alloc_free_gpuplug)->UseRealTime();
    benchmark::RegisterBenchmark("cuda_alloc_free/raw", alloc_free_raw)->UseRealTime();
    for (const int n : kGraphNodes) {
      benchmark::RegisterBenchmark("cuda_graph_nodes/eager", graph_nodes_eager)
          ->Arg(n)
          ->UseRealTime();
      benchmark::RegisterBenchmark("cuda_graph_nodes/replay", graph_nodes_replay)
          ->Arg(n)
          ->UseRealTime();
    }
    RatioReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    print_ratios(reporter.rates);
    world->gpu->destroy_stream(world->stream);
    world->raw.reset();
    g_world = nullptr;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
