// SPDX-License-Identifier: Apache-2.0
// The built-in validate layer (docs/layers.md, "validate") on the host plugin, or on the
// backend GPUPLUG_TEST_LAYER_BACKEND names (layer_backend.hpp: CTest runs it again on the fake
// CUDA driver): each misuse it refuses, with the message that names the operation, the object
// and where it was made.
#define BOOST_TEST_MODULE validate
#include <gpuplug/layer.h>

#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <condition_variable>
#include <cstdint>
#include <gpuplug/gpuplug.hpp>
#include <gpuplug/support/text.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "contains.hpp"
#include "error_of.hpp"
#include "layer_backend.hpp"
#include "loader_env.hpp"
#include "log_records.hpp"
#include "scoped_env.hpp"
#include "test_print.hpp"

using gpuplug::DevicePtr;
using gpuplug::Dim3;
using gpuplug::Error;
using gpuplug::Event;
using gpuplug::KernelHandle;
using gpuplug::Options;
using gpuplug::Status;
using gpuplug::Stream;
using gpuplug::support::hex;
using namespace gpuplug::test;

BOOST_TEST_GLOBAL_FIXTURE(LoaderEnvironment);

namespace {

/// Backends (host, or layer_selector()'s) with the validate layer on.
struct Validated {
  gpuplug::PluginRegistry registry;
  std::shared_ptr<gpuplug::GpuBackend> gpu;
  Validated() {
    registry.discover();
    gpu = validated();
  }
  std::shared_ptr<gpuplug::GpuBackend> validated() {
    return registry.create(layer_selector(), {{"layers", "validate"}});
  }
};

// ---- the gate layer: holds one alloc or free of the level below until the test lets it go, so
// that a test can keep a thread inside an OpCache call (or inside release) deterministically.

struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  bool armed = false;   // the next alloc or free stops
  bool inside = false;  // one has stopped
  bool open = false;    // and may go on
  void arm() {
    std::lock_guard lock(mutex);
    armed = true;
    inside = open = false;
  }
  void pass() {
    std::unique_lock lock(mutex);
    if (!armed) return;
    armed = false;
    inside = true;
    changed.notify_all();
    changed.wait(lock, [&] { return open; });
  }
  void wait_inside() {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return inside; });
  }
  void let_go() {
    std::lock_guard lock(mutex);
    open = true;
    changed.notify_all();
  }
};
Gate gate;  // test state: one gated backend at a time

struct GateInstance {
  gpuplug_layer_next_t next;  // first, as layer.h asks
};
GateInstance& gated(gpuplug_instance_t inst) { return *reinterpret_cast<GateInstance*>(inst); }

gpuplug_status_t gate_alloc(gpuplug_instance_t inst, std::uint64_t bytes, const char* site,
                            std::uint64_t* out) {
  gate.pass();
  return gated(inst).next.table->alloc(gated(inst).next.instance, bytes, site, out);
}
gpuplug_status_t gate_free(gpuplug_instance_t inst, std::uint64_t ptr) {
  gate.pass();
  return gated(inst).next.table->free(gated(inst).next.instance, ptr);
}
void gate_destroy(gpuplug_instance_t inst) { delete &gated(inst); }
gpuplug_status_t gate_create(const gpuplug_layer_next_t* next, const char*, std::uint32_t,
                             const gpuplug_option_t*, std::uint32_t,
                             const gpuplug_layer_services_t*, gpuplug_instance_t* out, char*,
                             std::size_t) {
  *out = reinterpret_cast<gpuplug_instance_t>(new GateInstance{*next});
  return GPUPLUG_STATUS_SUCCESS;
}
const gpuplug_plugin_v1 gate_slots{.struct_size = sizeof(gpuplug_plugin_v1),
                                   .abi_version = GPUPLUG_ABI_VERSION,
                                   .destroy = &gate_destroy,
                                   .alloc = &gate_alloc,
                                   .free = &gate_free};
const gpuplug_layer_v1 gate_layer{sizeof(gpuplug_layer_v1),
                                  GPUPLUG_LAYER_VERSION,
                                  "gate",
                                  "holds an alloc or free",
                                  nullptr,
                                  &gate_create,
                                  &gate_slots};

/// A backend with validate over the gate layer.
std::shared_ptr<gpuplug::GpuBackend> gated_backend(gpuplug::PluginRegistry& registry) {
  registry.add_layer(gate_layer);
  return registry.create(layer_selector(), {{"layers", "validate,gate"}});
}

/// The Error `f` throws: invalid_argument, from `operation`, with `needle` in its message.
template <class F>
Error refused(F&& f, const std::string& operation, const std::string& needle) {
  const Error e = error_of(std::forward<F>(f), Status::invalid_argument);
  BOOST_TEST(e.operation() == operation, e.what());
  BOOST_TEST(contains(e.message(), needle), e.what() << "\n  expected: " << needle);
  return e;
}

/// axpy's arguments (kernels/host/axpy.cpp): n, a, x, y.
struct AxpyArgs {
  std::uint32_t n;
  float a = 2.0f;
  std::uint64_t x, y;
  void* params[4] = {&n, &a, &x, &y};
  AxpyArgs(std::uint32_t count, DevicePtr px, DevicePtr py) : n(count), x(px.value), y(py.value) {}
};

}  // namespace

BOOST_AUTO_TEST_SUITE(memory)

BOOST_AUTO_TEST_CASE(use_after_free_names_the_allocation_and_its_site) {
  Validated v;
  const DevicePtr p = v.gpu->alloc(4096, "load_weights");
  // Made before the free, so that the allocator cannot hand p's memory out again for it (the
  // guard bands make the two sizes close enough for a heap to split the freed block).
  const DevicePtr scratch = v.gpu->alloc(16, "scratch");
  v.gpu->free(p);
  std::vector<std::uint8_t> host(16);
  refused([&] { v.gpu->copy_d2h(host.data(), p, 16); }, "copy_d2h",
          hex(p.value) + " was freed (allocated by load_weights, 4096 bytes)");
  refused([&] { v.gpu->memset(p + 8, 0, 8); }, "memset",
          hex(p.value + 8) + " is inside " + hex(p.value) +
              " (offset 8), which was freed (allocated by load_weights, 4096 bytes)");
  refused([&] { v.gpu->copy_d2d(scratch, p, 16); }, "copy_d2d",
          "source " + hex(p.value) + " was freed");
  v.gpu->free(scratch);
}

BOOST_AUTO_TEST_CASE(double_free_names_the_first_allocation) {
  Validated v;
  const DevicePtr p = v.gpu->alloc(64, "make_table");
  v.gpu->free(p);
  const auto frees = v.gpu->ledger_stats().total_frees;
  refused([&] { v.gpu->free(p); }, "free",
          "double free: " + hex(p.value) + " was freed (allocated by make_table, 64 bytes)");
  BOOST_TEST(v.gpu->ledger_stats().total_frees == frees);  // the plugin never saw it
}

BOOST_AUTO_TEST_CASE(free_of_an_interior_pointer_names_its_allocation) {
  Validated v;
  const DevicePtr p = v.gpu->alloc(256, "buffers");
  refused([&] { v.gpu->free(p + 16); }, "free",
          hex(p.value + 16) + " is inside the allocation at " + hex(p.value) +
              " (offset 16) (allocated by buffers, 256 bytes): free takes the pointer alloc "
              "returned");
  v.gpu->free(p);  // still live, and freed once
  BOOST_TEST(v.gpu->live_alloc_count() == 0u);
}

BOOST_AUTO_TEST_CASE(copies_inside_an_allocation_pass_and_past_its_end_are_refused) {
  Validated v;
  const DevicePtr p = v.gpu->alloc(256, "activations");
  std::vector<std::uint8_t> in(256, 7), out(256, 0);
  // Interior pointers: a copy may start anywhere inside and end at the very end.
  v.gpu->copy_h2d(p + 100, in.data(), 156);
  v.gpu->copy_d2h(out.data(), p + 255, 1);
  BOOST_TEST(out[0] == 7);
  refused([&] { v.gpu->copy_h2d(p + 200, in.data(), 100); }, "copy_h2d",
          hex(p.value + 200) +
              " + 100 bytes runs past the end of its allocation: offset 200, "
              "length 100, 256 bytes at " +
              hex(p.value) + " allocated by activations");
  refused([&] { v.gpu->memset(p, 0, 257); }, "memset", "offset 0, length 257, 256 bytes at");
  const DevicePtr small = v.gpu->alloc(128, "small");
  refused([&] { v.gpu->copy_d2d(small, p, 256); }, "copy_d2d",
          "destination " + hex(small.value) + " + 256 bytes runs past the end of its allocation");
  refused([&] { v.gpu->copy_d2d(p, small, 256); }, "copy_d2d",
          "source " + hex(small.value) + " + 256 bytes runs past the end");
  // A size that wraps around 2^64 is past the end too.
  refused([&] { v.gpu->copy_h2d(p + 8, in.data(), SIZE_MAX - 4); }, "copy_h2d",
          "runs past the end of its allocation");
  v.gpu->free(small);
  v.gpu->free(p);
}

BOOST_AUTO_TEST_CASE(pitched_copies_check_each_device_sides_span) {
  Validated v;
  const DevicePtr p = v.gpu->alloc(1000, "tiles");
  std::vector<std::uint8_t> host(1000, 3);
  // 10 rows of 60 bytes, 100 apart: the span is 960 bytes, inside from p, past the end from p + 100.
  v.gpu->copy_h2d_2d_async(p, 100, host.data(), 100, 60, 10, {});
  refused([&] { v.gpu->copy_h2d_2d_async(p + 100, 100, host.data(), 100, 60, 10, {}); },
          "copy_h2d_2d_async",
          hex(p.value + 100) + " + 960 bytes runs past the end of its allocation");
  const DevicePtr q = v.gpu->alloc(64, "freed_tiles");
  v.gpu->free(q);
  refused([&] { v.gpu->copy_d2d_2d_async(p, 100, q, 8, 8, 4, {}); }, "copy_d2d_2d_async",
          "source " + hex(q.value) + " was freed (allocated by freed_tiles");
  refused([&] { v.gpu->copy_d2d_2d_async(q, 8, p, 100, 8, 4, {}); }, "copy_d2d_2d_async",
          "destination " + hex(q.value) + " was freed");
  refused([&] { v.gpu->copy_d2h_2d_async(host.data(), 100, q, 8, 8, 4, {}); },
          "copy_d2h_2d_async", hex(q.value) + " was freed");
  v.gpu->synchronize();
  v.gpu->free(p);
}

BOOST_AUTO_TEST_CASE(a_zero_byte_allocation_holds_zero_bytes) {
  Validated v;
  const DevicePtr p = v.gpu->alloc(0, "empty");
  std::uint8_t byte = 1;
  v.gpu->copy_h2d(p, &byte, 0);
  refused([&] { v.gpu->copy_h2d(p, &byte, 1); }, "copy_h2d",
          "offset 0, length 1, 0 bytes at " + hex(p.value) + " allocated by empty");
  v.gpu->free(p);
  refused([&] { v.gpu->free(p); }, "free", "was freed (allocated by empty, 0 bytes)");
}

BOOST_AUTO_TEST_CASE(unknown_and_foreign_pointers_are_refused) {
  Validated v;
  std::vector<std::uint8_t> host(16);
  refused([&] { v.gpu->copy_h2d(DevicePtr{0x1000}, host.data(), 16); }, "copy_h2d",
          "0x1000 is not memory of this backend");
  auto other = v.validated();
  const DevicePtr theirs = other->alloc(64, "other_backend");
  refused([&] { v.gpu->copy_d2h(host.data(), theirs, 16); }, "copy_d2h",
          hex(theirs.value) + " is not memory of this backend");
  refused([&] { v.gpu->free(theirs); }, "free",
          hex(theirs.value) + " is not memory of this backend");
  other->free(theirs);
}

BOOST_AUTO_TEST_CASE(managed_memory_is_recorded_too) {
  Validated v;
  DevicePtr p;
  try {
    p = v.gpu->alloc_managed(512, "managed_weights");
  } catch (const Error& e) {
    BOOST_TEST_REQUIRE(e.status() == Status::unsupported, e.what());
    return;
  }
  v.gpu->memset(p, 1, 512);
  refused([&] { v.gpu->memset(p, 1, 513); }, "memset",
          "runs past the end of its managed allocation");
  v.gpu->free(p);
  refused([&] { v.gpu->memset(p, 1, 1); }, "memset",
          "was freed (managed, allocated by managed_weights, 512 bytes)");
}

BOOST_AUTO_TEST_CASE(module_globals_are_memory_until_their_module_is_unloaded) {
  Validated v;
  v.gpu->load_module_file("mine", layer_module_file("gemm"));
  const auto sym = v.gpu->device_symbol("mine", "gemm_f32_n_tile");
  BOOST_TEST_REQUIRE(sym.has_value());
  std::uint32_t tile = 0;
  v.gpu->copy_d2h(&tile, sym->address, sizeof tile);
  BOOST_TEST(tile != 0u);
  std::uint64_t wide = 0;
  refused([&] { v.gpu->copy_d2h(&wide, sym->address, sizeof wide); }, "copy_d2h",
          "runs past the end of module global mine::gemm_f32_n_tile: offset 0, length 8, 4 bytes");
  v.gpu->unload_module("mine");
  refused([&] { v.gpu->copy_d2h(&tile, sym->address, sizeof tile); }, "copy_d2h",
          "is not memory of this backend");
}

BOOST_AUTO_TEST_CASE(sweep_unreleased_frees_what_the_record_holds) {
  Validated v;
  const DevicePtr p = v.gpu->alloc(32, "leaky");
  v.gpu->sweep_unreleased();
  std::uint8_t byte = 0;
  refused([&] { v.gpu->copy_d2h(&byte, p, 1); }, "copy_d2h",
          "was freed (allocated by leaky, 32 bytes)");
}

BOOST_AUTO_TEST_CASE(threads_hammering_alloc_copy_free_see_no_false_report) {
  Validated v;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::atomic<int> wrong_bytes{0};  // copies that brought back bytes this thread never wrote
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::uint8_t> in(1024, static_cast<std::uint8_t>(t)), out(1024);
      try {
        for (int i = 0; i < 300; ++i) {
          const std::size_t bytes = 64 + static_cast<std::size_t>((i * 37 + t) % 960);
          const DevicePtr p = v.gpu->alloc(bytes, "hammer");
          v.gpu->copy_h2d(p, in.data(), bytes);
          v.gpu->copy_d2h(out.data(), p + bytes / 2, bytes - bytes / 2);
          // The bytes are this thread's: a staging region shared with another thread's copy
          // would show here.
          const auto back = std::count(out.begin(), out.begin() + (bytes - bytes / 2),
                                       static_cast<std::uint8_t>(t));
          if (back != static_cast<std::ptrdiff_t>(bytes - bytes / 2)) ++wrong_bytes;
          v.gpu->memset(p, 0, bytes);
          v.gpu->free(p);
        }
      } catch (const Error& e) {
        ++failures;
        BOOST_TEST_MESSAGE("thread " << t << ": " << e.what());
      }
    });
  }
  for (auto& th : threads) th.join();
  BOOST_TEST(failures.load() == 0);
  BOOST_TEST(wrong_bytes.load() == 0);
  BOOST_TEST(v.gpu->live_alloc_count() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(streams_and_events)

BOOST_AUTO_TEST_CASE(a_destroyed_stream_is_named) {
  Validated v;
  const DevicePtr p = v.gpu->alloc(64, "buf");
  const Stream s = v.gpu->create_stream();
  v.gpu->memset(p, 0, 64, s);
  v.gpu->destroy_stream(s);
  const std::string gone = "stream " + std::to_string(s.value) + " was destroyed";
  refused([&] { v.gpu->memset(p, 0, 64, s); }, "memset", gone);
  refused([&] { v.gpu->synchronize(s); }, "synchronize", gone);
  refused([&] { v.gpu->destroy_stream(s); }, "destroy_stream", gone);
  v.gpu->free(p);
}

BOOST_AUTO_TEST_CASE(a_stream_of_another_backend_is_refused) {
  Validated v;
  auto other = v.validated();
  const Stream theirs = other->create_stream();
  const DevicePtr p = v.gpu->alloc(64, "buf");
  std::vector<std::uint8_t> host(64);
  refused([&] { v.gpu->copy_h2d_async(p, host.data(), 64, theirs); }, "copy_h2d_async",
          "stream " + std::to_string(theirs.value) + " was not created on this backend");
  other->destroy_stream(theirs);
  v.gpu->free(p);
}

BOOST_AUTO_TEST_CASE(destroyed_and_foreign_events_are_named) {
  Validated v;
  Event e;
  try {
    e = v.gpu->create_event();
  } catch (const Error& err) {
    BOOST_TEST_REQUIRE(err.status() == Status::unsupported, err.what());
    return;
  }
  // The other backend's event is made while e is live, so that a driver reusing e's address
  // (the fake HIP runtime's allocator may) cannot give it e's handle value.
  auto other = v.validated();
  const Event theirs = other->create_event();
  v.gpu->destroy_event(e);
  refused([&] { v.gpu->record(e); }, "record",
          "event " + std::to_string(e.value) + " was destroyed");
  refused([&] { v.gpu->query(theirs); }, "query",
          "event " + std::to_string(theirs.value) + " was not created on this backend");
  other->destroy_event(theirs);
}

BOOST_AUTO_TEST_CASE(destroy_with_live_streams_and_events_warns_and_names_them) {
  LogRecords logs;
  gpuplug::set_log_level(gpuplug::LogLevel::warning);
  Stream s;
  Event e;
  bool events = true;
  {
    Validated v;
    s = v.gpu->create_stream();
    try {
      e = v.gpu->create_event();
    } catch (const Error&) {
      events = false;
    }
    logs.take();
  }  // the backend goes: a warning, no failure
  std::string expected = "validate: destroyed with 1 stream (" + std::to_string(s.value) + ")";
  if (events) expected += " and 1 event (" + std::to_string(e.value) + ")";
  expected += " still live";
  bool warned = false;
  for (const auto& r : logs.take())
    warned |= r.level == gpuplug::LogLevel::warning && r.channel == layer_backend_name() &&
              contains(r.message, expected);
  BOOST_TEST(warned, expected);
}

BOOST_AUTO_TEST_SUITE_END()

/// A validated backend with axpy's buffers and arguments (kernels/host/axpy.cpp: n, a, x,
/// y), freed at the end.
struct Axpy : Validated {
  DevicePtr x = gpu->alloc(1024, "x");
  DevicePtr y = gpu->alloc(1024, "y");
  AxpyArgs args{256, x, y};
  ~Axpy() {
    gpu->free(x);
    gpu->free(y);
  }
  void launch(KernelHandle h, Dim3 grid = {1, 1, 1}, Dim3 block = {256, 1, 1}) {
    gpu->launch(h, grid, block, 0, Stream{}, args.params);
  }
};

BOOST_FIXTURE_TEST_SUITE(kernels, Axpy)

BOOST_AUTO_TEST_CASE(a_handle_of_another_backend_is_refused) {
  auto other = validated();
  const KernelHandle theirs = other->kernel("axpy", "axpy");
  refused([&] { launch(theirs); }, "launch",
          "function " + hex(theirs.value) + " was not resolved on this backend");
}

BOOST_AUTO_TEST_CASE(a_handle_whose_module_was_unloaded_names_module_and_function) {
  gpu->load_module_file("mine", layer_module_file("axpy"));
  const KernelHandle h = gpu->kernel("mine", "axpy");
  launch(h);
  gpu->synchronize();
  gpu->unload_module("mine");
  refused([&] { launch(h); }, "launch",
          "function " + hex(h.value) + " is mine::axpy, whose module mine was unloaded");
}

BOOST_AUTO_TEST_CASE(a_counted_launch_with_the_wrong_argument_count_is_refused) {
  // The core checks it against axpy_args before the launch reaches validate or the plugin: on
  // the fake CUDA driver as on host, the module's published sizes are read when it resolves.
  const KernelHandle h = gpu->kernel("axpy", "axpy");
  refused([&] { gpu->launch(h, Dim3{1, 1, 1}, Dim3{256, 1, 1}, 0, Stream{}, {256u, 1.0f, x}); },
          "launch",
          "kernel axpy::axpy takes 4 arguments (4, 4, 8, 8 bytes), given 3 arguments (4, 4, 8 "
          "bytes)");
  gpu->launch(h, Dim3{1, 1, 1}, Dim3{256, 1, 1}, 0, Stream{}, {256u, 1.0f, x, y});
  gpu->synchronize();
}

BOOST_AUTO_TEST_CASE(a_zero_grid_or_block_is_refused) {
  const KernelHandle h = gpu->kernel("axpy", "axpy");
  refused(
      [&] {
        launch(h, Dim3{0, 1, 1});
      },
      "launch", "grid (0, 1, 1) of axpy::axpy has a zero dimension");
  refused(
      [&] {
        launch(h, Dim3{1, 1, 1}, Dim3{256, 0, 1});
      },
      "launch", "block (256, 0, 1) of axpy::axpy has a zero dimension");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(enabling)

BOOST_AUTO_TEST_CASE(gpuplug_layers_turns_it_on) {
  ScopedEnv env("GPUPLUG_LAYERS", "validate");
  Validated v;
  auto plain = v.registry.create(layer_selector());
  const DevicePtr p = plain->alloc(8, "from_env");
  plain->free(p);
  refused([&] { plain->free(p); }, "free", "allocated by from_env");
}

BOOST_AUTO_TEST_SUITE_END()

// OpCache::release needs exclusive use of the cache (docs/opcache.md); on a backend that runs
// validate, a cache checks it (docs/layers.md, "validate").
BOOST_AUTO_TEST_SUITE(op_cache)

BOOST_AUTO_TEST_CASE(release_while_another_thread_is_inside_is_refused) {
  Validated v;
  auto gpu = gated_backend(v.registry);
  gpuplug::OpCache cache;
  cache.scratch(*gpu, "warm", 64);
  gate.arm();
  std::thread user([&] { cache.scratch(*gpu, "grow", 4096); });  // stops in the alloc
  gate.wait_inside();
  const Error e = error_of([&] { cache.release(*gpu); }, Status::invalid_argument);
  BOOST_TEST(contains(e.what(),
                      "OpCache::release of 'op scratch' while 1 call is inside the "
                      "same cache on another thread"),
             e.what());
  gate.let_go();
  user.join();
  BOOST_TEST(cache.scratch_count() == 2u);  // nothing was released
  cache.release(*gpu);                      // alone now: fine
  BOOST_TEST(gpu->live_alloc_count() == 0u);
}

BOOST_AUTO_TEST_CASE(a_call_while_release_runs_is_refused) {
  Validated v;
  auto gpu = gated_backend(v.registry);
  gpuplug::OpCache cache(*gpu, "model A");
  const DevicePtr warm = cache.scratch(*gpu, "warm", 64);
  gate.arm();
  std::thread releaser([&] { cache.release(*gpu); });  // stops in the free of "warm"
  gate.wait_inside();
  const Error e = error_of([&] { cache.scratch(*gpu, "warm", 64); }, Status::invalid_argument);
  BOOST_TEST(contains(e.what(),
                      "OpCache::scratch: the cache 'op scratch (model A)' is being "
                      "released by another thread"),
             e.what());
  gate.let_go();
  releaser.join();
  BOOST_TEST(cache.scratch_count() == 0u);
  BOOST_TEST(warm.value != 0u);
}

BOOST_AUTO_TEST_CASE(threads_sharing_a_checked_cache_then_release_see_no_false_report) {
  Validated v;
  gpuplug::OpCache cache;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      try {
        for (int i = 0; i < 200; ++i) {
          cache.kernel(*v.gpu, "axpy", "axpy");
          cache.scratch(*v.gpu, "tmp", 256 + static_cast<std::size_t>(i));
        }
      } catch (const Error& e) {
        ++failures;
        BOOST_TEST_MESSAGE(e.what());
      }
    });
  }
  for (auto& th : threads) th.join();
  BOOST_TEST(failures.load() == 0);
  cache.release(*v.gpu);
  BOOST_TEST(v.gpu->live_alloc_count() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
