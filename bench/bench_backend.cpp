// SPDX-License-Identifier: Apache-2.0
// Dispatch (GpuBackend::launch vs the plugin's launch slot) and ledger (alloc+free vs raw), host.
//
// Dispatch: the same no-op host kernel (bench/noop_kernel.cpp, grid 1x1x1) launched
//  - `launch/gpuplug`: through GpuBackend::launch on a backend made by the registry (virtual call,
//    status check, the plugin table's slot), and
//  - `launch/plugin_table`: by calling the host plugin's `launch` slot directly on an instance
//    this program created itself from the plugin's C table (dlopen, gpuplug_plugin_entry, create).
//  Both reach the same SDK slot and host executor, so the difference is the core's layer.
//  - `launch/counted`: launch_args of `noop_counted`, which publishes `noop_counted_args`: the
//    primitive launch plus the check of the argument count and sizes against the signature.
//  - `launch/layer:<name>`: `launch/gpuplug` on a backend with one layer enabled (see
//    docs/layers.md): `passthrough` is a layer that sets no slot (the core's forwarder alone),
//    the others are the built-in layers with their default options. `launch/gpuplug` itself
//    runs with no layer (GPUPLUG_LAYERS is unset here), the path every application has by default.
// Ledger: alloc+free of the same size
//  - `alloc_free/gpuplug`: GpuBackend::alloc/free (core, ABI, SDK, ledger, aligned_alloc),
//  - `alloc_free/plugin_table`: the plugin's alloc/free slots directly (SDK, ledger, aligned_alloc)
//  - `alloc_free/ledger`: the AllocationLedger alone around the same aligned_alloc/free, as the
//    SDK drives it (allocate with a site, release_kind before the free): the ledger's own cost,
//    without the C ABI edge, the SDK adapter and the core, which the two rows above add,
//  - `alloc_free/raw`: std::aligned_alloc/std::free, rounded to 256 bytes as the host plugin does.
#include <gpuplug/abi.h>
#include <gpuplug/layer.h>
#include <gpuplug/gpuplug.hpp>

#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "ledger.hpp"  // plugins/common: the SDK's AllocationLedger, for `alloc_free/ledger`
#include "read_file.hpp"

#ifndef GPUPLUG_BENCH_HOST_PLUGIN
#error "GPUPLUG_BENCH_HOST_PLUGIN (the host plugin's file) must be defined by the build"
#endif
#ifndef GPUPLUG_BENCH_NOOP_MODULE
#error "GPUPLUG_BENCH_NOOP_MODULE (the no-op kernel module's file) must be defined by the build"
#endif

namespace {

using gpuplug::DevicePtr;
using gpuplug::Dim3;
using gpuplug::GpuBackend;
using gpuplug::KernelHandle;

constexpr std::size_t kHostAlignment = 256;  // the host plugin's allocation alignment
constexpr const char* kSite = "bench_backend alloc_free";

void quiet_log(void*, gpuplug_log_level_t, const char*) {}

/// One instance of the host plugin made straight from its C table, as the core would, but
/// without the core: the reference for the dispatch and ledger costs.
class DirectInstance {
 public:
  DirectInstance() {
    library_ = ::dlopen(GPUPLUG_BENCH_HOST_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (library_ == nullptr) throw std::runtime_error(std::string("dlopen: ") + ::dlerror());
    auto entry =
        reinterpret_cast<gpuplug_plugin_entry_fn>(::dlsym(library_, GPUPLUG_PLUGIN_ENTRY_SYMBOL));
    if (entry == nullptr) throw std::runtime_error("the host plugin has no entry symbol");
    table_ = entry(GPUPLUG_ABI_VERSION);
    if (table_ == nullptr || table_->struct_size < GPUPLUG_PLUGIN_V1_MIN_SIZE)
      throw std::runtime_error("the host plugin returned no usable v1 table");
    char error[512] = {};
    if (table_->create(0, nullptr, 0, &services_, &instance_, error, sizeof error) !=
        GPUPLUG_STATUS_SUCCESS)
      throw std::runtime_error(std::string("create: ") + error);
    const std::vector<char> image = gpuplug::bench::read_file(GPUPLUG_BENCH_NOOP_MODULE);
    check(table_->load_module(instance_, "bench_noop", image.data(), image.size()), "load_module");
    check(table_->get_function(instance_, "bench_noop", "noop", &noop_), "get_function");
  }
  ~DirectInstance() {
    if (instance_ != nullptr) table_->destroy(instance_);
    // The library stays loaded: the registry's backend may share it, and unloading at exit buys
    // nothing.
  }
  DirectInstance(const DirectInstance&) = delete;
  DirectInstance& operator=(const DirectInstance&) = delete;

  const gpuplug_plugin_v1& table() const noexcept { return *table_; }
  gpuplug_instance_t instance() const noexcept { return instance_; }
  std::uint64_t noop() const noexcept { return noop_; }

  void check(gpuplug_status_t status, const char* what) const {
    if (status == GPUPLUG_STATUS_SUCCESS) return;
    char message[512] = {};
    table_->last_error(instance_, message, sizeof message);
    throw std::runtime_error(std::string(what) + ": " + message);
  }

 private:
  void* library_ = nullptr;
  const gpuplug_plugin_v1* table_ = nullptr;
  gpuplug_host_services_t services_{sizeof(gpuplug_host_services_t), nullptr, &quiet_log};
  gpuplug_instance_t instance_ = nullptr;
  std::uint64_t noop_ = 0;
};

/// A layer that intercepts nothing: what one level of the stack costs by itself.
void passthrough_destroy(gpuplug_instance_t inst) { delete reinterpret_cast<gpuplug_layer_next_t*>(inst); }
gpuplug_status_t passthrough_create(const gpuplug_layer_next_t* next, const char*, std::uint32_t,
                                    const gpuplug_option_t*, std::uint32_t,
                                    const gpuplug_layer_services_t*, gpuplug_instance_t* out, char*,
                                    std::size_t) {
  *out = reinterpret_cast<gpuplug_instance_t>(new gpuplug_layer_next_t(*next));
  return GPUPLUG_STATUS_SUCCESS;
}
const gpuplug_plugin_v1 passthrough_slots = [] {
  gpuplug_plugin_v1 t{};
  t.struct_size = sizeof t;
  t.abi_version = GPUPLUG_ABI_VERSION;
  t.destroy = &passthrough_destroy;
  return t;
}();
const gpuplug_layer_v1 passthrough_layer{sizeof(gpuplug_layer_v1), GPUPLUG_LAYER_VERSION,
                                         "passthrough", "sets no slot", nullptr,
                                         &passthrough_create, &passthrough_slots};

/// A backend with one layer enabled, and the no-op kernel resolved on it.
struct Layered {
  std::string layer;
  std::shared_ptr<GpuBackend> gpu;
  KernelHandle noop;
};

struct World {
  gpuplug::PluginRegistry registry;
  std::shared_ptr<GpuBackend> gpu;
  KernelHandle noop;
  KernelHandle noop_counted;  // publishes noop_counted_args: launch_args checks against it
  std::vector<Layered> layered;
  DirectInstance direct;
  // A ledger of its own, as a plugin instance holds one (no limit, no log sink).
  std::unique_ptr<gpuplug::sdk::AllocationLedger> ledger =
      std::make_unique<gpuplug::sdk::AllocationLedger>("bench:ledger");
};
World* g_world = nullptr;

// ---- dispatch -------------------------------------------------------------------------------

void launch_gpuplug(benchmark::State& state) {
  GpuBackend& gpu = *g_world->gpu;
  const KernelHandle f = g_world->noop;
  void* params[1] = {nullptr};
  for (auto _ : state) gpu.launch(f, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, gpuplug::Stream{}, params);
  state.SetItemsProcessed(state.iterations());
}

void launch_counted(benchmark::State& state) {
  GpuBackend& gpu = *g_world->gpu;
  const KernelHandle f = g_world->noop_counted;
  const std::uint32_t n = 0;
  for (auto _ : state) gpu.launch_args(f, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, gpuplug::Stream{}, n);
  state.SetItemsProcessed(state.iterations());
}

void launch_layered(benchmark::State& state, const Layered* l) {
  GpuBackend& gpu = *l->gpu;
  const KernelHandle f = l->noop;
  void* params[1] = {nullptr};
  for (auto _ : state) gpu.launch(f, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, gpuplug::Stream{}, params);
  state.SetItemsProcessed(state.iterations());
}

void launch_plugin_table(benchmark::State& state) {
  const DirectInstance& d = g_world->direct;
  const gpuplug_plugin_v1& t = d.table();
  const gpuplug_instance_t inst = d.instance();
  const std::uint64_t f = d.noop();
  void* params[1] = {nullptr};
  for (auto _ : state) {
    const gpuplug_status_t st = t.launch(inst, f, {1, 1, 1}, {1, 1, 1}, 0, 0, params);
    if (st != GPUPLUG_STATUS_SUCCESS) [[unlikely]] {
      state.SkipWithError("launch failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

// ---- ledger -----------------------------------------------------------------------------------

void alloc_free_gpuplug(benchmark::State& state) {
  GpuBackend& gpu = *g_world->gpu;
  const auto bytes = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    const DevicePtr p = gpu.alloc(bytes, kSite);
    benchmark::DoNotOptimize(p);
    gpu.free(p);
  }
  state.SetItemsProcessed(state.iterations());
}

void alloc_free_plugin_table(benchmark::State& state) {
  const DirectInstance& d = g_world->direct;
  const gpuplug_plugin_v1& t = d.table();
  const gpuplug_instance_t inst = d.instance();
  const auto bytes = static_cast<std::uint64_t>(state.range(0));
  for (auto _ : state) {
    std::uint64_t p = 0;
    if (t.alloc(inst, bytes, kSite, &p) != GPUPLUG_STATUS_SUCCESS ||
        t.free(inst, p) != GPUPLUG_STATUS_SUCCESS) [[unlikely]] {
      state.SkipWithError("alloc/free failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void alloc_free_ledger(benchmark::State& state) {
  gpuplug::sdk::AllocationLedger& ledger = *g_world->ledger;
  const auto bytes = static_cast<std::uint64_t>(state.range(0));
  const std::size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  for (auto _ : state) {
    const std::uint64_t p = ledger.allocate(
        bytes, GPUPLUG_ALLOC_DEVICE, kSite,
        [&] {
          void* q = std::aligned_alloc(kHostAlignment, rounded);
          if (q == nullptr) throw std::bad_alloc();
          return reinterpret_cast<std::uintptr_t>(q);
        },
        [](std::uint64_t q) { std::free(reinterpret_cast<void*>(q)); });
    benchmark::DoNotOptimize(p);
    ledger.release_kind(p);
    std::free(reinterpret_cast<void*>(p));
  }
  state.SetItemsProcessed(state.iterations());
}

void alloc_free_raw(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const std::size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  for (auto _ : state) {
    void* p = std::aligned_alloc(kHostAlignment, rounded);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
  state.SetItemsProcessed(state.iterations());
}

void register_all() {
  for (auto [name, fn] : {std::pair{"launch/gpuplug", &launch_gpuplug},
                          std::pair{"launch/counted", &launch_counted},
                          std::pair{"launch/plugin_table", &launch_plugin_table}}) {
    benchmark::RegisterBenchmark(name, fn)->Threads(1)->Threads(2)->UseRealTime();
  }
  for (const Layered& l : g_world->layered) {
    benchmark::RegisterBenchmark(("launch/layer:" + l.layer).c_str(), &launch_layered, &l)
        ->Threads(1)
        ->Threads(2)
        ->UseRealTime();
  }
  for (auto [name, fn] : {std::pair{"alloc_free/gpuplug", &alloc_free_gpuplug},
                          std::pair{"alloc_free/plugin_table", &alloc_free_plugin_table},
                          std::pair{"alloc_free/ledger", &alloc_free_ledger},
                          std::pair{"alloc_free/raw", &alloc_free_raw}}) {
    benchmark::RegisterBenchmark(name, fn)
        ->Arg(256)
        ->Arg(64 << 10)
        ->Threads(1)
        ->Threads(2)
        ->UseRealTime();
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
    ::unsetenv("GPUPLUG_LAYERS");  // launch/gpuplug measures the default path: no layer
    gpuplug::set_log_level(gpuplug::LogLevel::warning);  // the trace layer's summary is info
    auto world = std::make_unique<World>();
    g_world = world.get();
    world->registry.discover();
    world->gpu = world->registry.create("host!");
    world->gpu->load_module_file("bench_noop", GPUPLUG_BENCH_NOOP_MODULE);
    world->noop = world->gpu->kernel("bench_noop", "noop");
    world->noop_counted = world->gpu->kernel("bench_noop", "noop_counted");
    world->registry.add_layer(passthrough_layer);
    const std::string trace_file = "/tmp/gpuplug-bench-trace-" + std::to_string(::getpid()) + ".json";
    for (const gpuplug::LayerInfo& info : world->registry.layers()) {
      gpuplug::Options options{{"layers", info.name}};
      if (info.name == "trace") options["trace_file"] = trace_file;
      Layered l{info.name, world->registry.create("host!", options), {}};
      l.gpu->load_module_file("bench_noop", GPUPLUG_BENCH_NOOP_MODULE);
      l.noop = l.gpu->kernel("bench_noop", "noop");
      world->layered.push_back(std::move(l));
    }
    benchmark::AddCustomContext("gpuplug_backend", std::string(world->gpu->name()));
    register_all();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    world->gpu->synchronize();
    world->layered.clear();  // the trace layer writes its file here
    std::remove(trace_file.c_str());
    g_world = nullptr;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_backend: %s\n", e.what());
    return 1;
  }
  return 0;
}
