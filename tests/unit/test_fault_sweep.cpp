// SPDX-License-Identifier: Apache-2.0
// The fault sweep (docs/layers.md): a small workload on one backend, failed by the
// `faults` layer at every call it makes of every operation that can fail, one call at a time.
//
// For each injection point (operation, call k, mode) on a fresh backend with faults='op@k=status'
// the sweep checks that:
//   - the workload stops with the Error the fault documents: the injected status, this backend,
//     and a message naming the operation and the call;
//   - once the workload's error path has released what it made, the ledger is empty;
//   - the same backend then runs the whole workload cleanly, with the right result.
// The calls of each operation are found by trying k = 1, 2, ... until the workload runs clean, so
// a plugin that makes more or fewer calls is swept just as fully. `after` (the plugin is called,
// then the failure reported and undone) is swept for the operations that make something. The
// releasing operations (free, stream_destroy, event_destroy, unload_module) are not swept: a
// failed release keeps its object by contract, so there the leak would be the right answer.
//
// GPUPLUG_TEST_SWEEP_PLUGIN names the plugin (default host); CTest runs it on host, on the fake
// HIP runtime (tests/unit/fake_hip) and on the fake CUDA driver (tests/unit/fake_libcuda.c). The
// last line gives the count of injection points. GPUPLUG_TEST_SWEEP_KERNELS_RUN=0 says the
// kernels do not run (the fake CUDA driver checks and counts launches only): the same workload,
// calls and injection points, but the result checked is the copies' (y as uploaded, through
// every copy direction), not axpy's.
#define BOOST_TEST_MODULE fault_sweep
#include <boost/test/results_collector.hpp>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gpuplug/gpuplug.hpp>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "contains.hpp"
#include "test_print.hpp"

using gpuplug::DevicePtr;
using gpuplug::Error;
using gpuplug::Event;
using gpuplug::GpuBackend;
using gpuplug::Status;
using gpuplug::Stream;
using gpuplug::test::contains;
namespace fs = std::filesystem;

namespace {

constexpr const char* module_name = "sweep_axpy";
constexpr std::uint32_t n = 1000;  // elements of the workload's axpy
constexpr float a = 2.0f;

std::string plugin() {
  const char* p = std::getenv("GPUPLUG_TEST_SWEEP_PLUGIN");
  return p != nullptr && *p != '\0' ? p : "host";
}

/// Whether launched kernels compute (all but the fake CUDA driver's); see the top.
bool kernels_run() {
  const char* r = std::getenv("GPUPLUG_TEST_SWEEP_KERNELS_RUN");
  return r == nullptr || std::string(r) != "0";
}

/// The axpy module of the plugin's kernel folder, as bytes (the workload loads it with
/// load_module, so that the load is the layer's to fail).
std::vector<std::byte> axpy_image() {
  const fs::path dir = fs::path(GPUPLUG_TEST_KERNEL_DIR) / plugin();
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().stem() != "axpy") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                  std::istreambuf_iterator<char>()};
    const auto* first = reinterpret_cast<const std::byte*>(bytes.data());
    return {first, first + bytes.size()};
  }
  BOOST_FAIL("no axpy module for plugin '" << plugin() << "' in " << dir);
  return {};
}

/// What one run of the workload made: its error path releases it all. The host buffers live
/// here too: an async copy still queued when the workload fails writes them until its stream is
/// destroyed, so they must outlive release().
struct Made {
  std::vector<float> x, y, out, back;
  bool module = false;
  std::vector<DevicePtr> buffers;
  std::optional<Stream> stream;
  std::optional<Event> event;
};

/// The application's cleanup: releases everything `made` holds, newest first. A release that
/// fails is a finding of the sweep (no release is ever injected), returned as text.
std::vector<std::string> release(GpuBackend& gpu, Made& made) {
  // Streams first: destroying one waits for its queued work, which may still use the buffers.
  std::vector<std::string> problems;
  auto attempt = [&](const char* what, auto&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      problems.push_back(std::string(what) + ": " + e.what());
    }
  };
  if (made.stream) attempt("destroy_stream", [&] { gpu.destroy_stream(*made.stream); });
  if (made.event) attempt("destroy_event", [&] { gpu.destroy_event(*made.event); });
  for (auto it = made.buffers.rbegin(); it != made.buffers.rend(); ++it) {
    attempt("free", [&] { gpu.free(*it); });
  }
  if (made.module) attempt("unload_module", [&] { gpu.unload_module(module_name); });
  made = {};
  return problems;
}

/// The workload: a module, a kernel and a symbol, the device queries, two device buffers and a
/// managed one, a stream and an event; every copy direction, and two steps of memset, upload and
/// axpy launch; each kind of synchronization. Checks its result (y = a*x + y,
/// exact for these small whole numbers; y itself where kernels do not run). Records what it makes
/// in `made` as it goes.
void workload(GpuBackend& gpu, const std::vector<std::byte>& image, Made& made) {
  constexpr std::size_t bytes = n * sizeof(float);
  made.x.assign(n, 0.0f);
  made.y.assign(n, 0.0f);
  made.out.assign(n, -1.0f);
  made.back.assign(n, -1.0f);
  std::vector<float>&x = made.x, &y = made.y, &out = made.out, &back = made.back;
  for (std::uint32_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 17);
    y[i] = static_cast<float>(i % 5);
  }
  gpu.load_module(module_name, image);
  made.module = true;
  BOOST_TEST(gpu.has_module(module_name));
  const gpuplug::KernelHandle axpy = gpu.kernel(module_name, "axpy");
  gpu.device_symbol(module_name, "axpy_args");  // whether the module publishes it or not
  gpu.device_info();
  gpu.memory_info();
  const DevicePtr dx = gpu.alloc(bytes, "sweep x");
  made.buffers.push_back(dx);
  const DevicePtr dy = gpu.alloc(bytes, "sweep y");
  made.buffers.push_back(dy);
  try {
    made.buffers.push_back(gpu.alloc_managed(bytes, "sweep managed"));
  } catch (const Error& e) {
    if (e.status() != Status::unsupported) throw;  // a device without managed memory
  }
  made.stream = gpu.create_stream();
  const Stream s = *made.stream;
  bool events = true;
  try {
    made.event = gpu.create_event();
  } catch (const Error& e) {
    if (e.status() != Status::unsupported) throw;
    events = false;  // a plugin without events (ABI 1.0): the rest of the workload still runs
  }
  gpu.copy_h2d(dx, x.data(), bytes);
  for (int step = 0; step < 2; ++step) {  // an application's loop: each step computes y anew
    gpu.memset(dy, 0xFF, bytes, s);
    gpu.copy_h2d_async(dy, y.data(), bytes, s);  // ordered after the memset on s
    gpu.launch_args(axpy, {(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, s, n, a, dx.value, dy.value);
  }
  if (events) {
    gpu.record(*made.event, s);
    gpu.wait(Stream{}, *made.event);
    gpu.synchronize(*made.event);
    BOOST_TEST(gpu.query(*made.event));
  }
  gpu.synchronize(s);
  gpu.copy_d2h(out.data(), dy, bytes);
  gpu.copy_d2d(dx, dy, bytes);
  gpu.copy_d2h_async(back.data(), dx, bytes, s);
  gpu.synchronize();
  const bool computed = kernels_run();
  for (std::uint32_t i = 0; i < n; ++i) {
    const float expected = computed ? a * x[i] + y[i] : y[i];
    if (out[i] != expected || back[i] != out[i]) {
      BOOST_ERROR("axpy element " << i << ": got " << out[i] << " (copied back " << back[i]
                                  << "), expected " << expected);
      break;
    }
  }
}

/// The operations the sweep fails, with the status a real plugin would report for each.
struct Swept {
  const char* op;  // the abi.h slot name the spec uses
  Status status;
  bool after;  // also swept in mode `after`: the operation makes something to undo
};
constexpr Swept swept[] = {
    {"load_module", Status::invalid_image, true},
    {"get_function", Status::not_found, false},
    {"has_module", Status::device_error, false},
    {"get_global", Status::device_error, false},  // not not_found: that is "no such symbol"
    {"device_info", Status::device_error, false},
    {"memory_info", Status::device_error, false},
    {"alloc", Status::out_of_memory, true},
    {"alloc_managed", Status::out_of_memory, true},
    {"stream_create_with_flags", Status::device_error, true},
    {"event_create", Status::device_error, true},
    {"copy_h2d", Status::device_error, false},
    {"memset_d8", Status::device_error, false},
    {"copy_h2d_async", Status::device_error, false},
    {"launch", Status::launch_failed, false},
    {"event_record", Status::device_error, false},
    {"stream_wait_event", Status::device_error, false},
    {"event_synchronize", Status::launch_failed, false},
    {"event_query", Status::device_error, false},
    {"stream_synchronize", Status::launch_failed, false},
    {"copy_d2h", Status::device_error, false},
    {"copy_d2d", Status::device_error, false},
    {"copy_d2h_async", Status::device_error, false},
    {"synchronize", Status::launch_failed, false},
};

}  // namespace

BOOST_AUTO_TEST_CASE(every_call_of_the_workload_fails_cleanly) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  const std::string selector = plugin() + ":0!";
  const std::vector<std::byte> image = axpy_image();
  std::string backend;
  std::map<std::string, int> points_by_op;
  int points = 0, after_points = 0;

  for (const Swept& s : swept) {
    for (const bool after : {false, true}) {
      if (after && !s.after) continue;
      for (int k = 1;; ++k) {
        const std::string spec = std::string(s.op) + "@" + std::to_string(k) + "=" +
                                 to_string(s.status) + (after ? ":after" : "");
        BOOST_TEST_CONTEXT("faults='" << spec << "'") {
          auto gpu = registry.create(selector, {{"layers", "faults"}, {"faults", spec}});
          backend = std::string(gpu->name());
          Made made;
          bool fired = false;
          try {
            workload(*gpu, image, made);
          } catch (const Error& e) {
            fired = true;
            BOOST_TEST(e.status() == s.status, e.what());
            BOOST_TEST(e.backend() == backend, e.what());
            BOOST_TEST(contains(e.message(), "injected fault: " + std::string(s.op) + " call " +
                                                 std::to_string(k)),
                       e.what());
          }
          for (const std::string& p : release(*gpu, made)) BOOST_ERROR("cleanup: " << p);
          BOOST_TEST(gpu->live_alloc_count() == 0u, gpu->alloc_report());
          if (!fired) break;  // k is past the operation's last call: this was a clean run
          ++points;
          after_points += after ? 1 : 0;
          ++points_by_op[std::string(s.op) + (after ? ":after" : "")];
          // The same backend keeps working: the workload again, past the faulted call.
          BOOST_CHECK_NO_THROW(workload(*gpu, image, made));
          for (const std::string& p : release(*gpu, made)) BOOST_ERROR("cleanup: " << p);
          BOOST_TEST(gpu->live_alloc_count() == 0u, gpu->alloc_report());
        }
        BOOST_TEST_REQUIRE(k < 100, "more than 100 calls of " << s.op << ": the sweep never ends");
      }
    }
  }
  std::string per_op;
  for (const auto& [op, count] : points_by_op) {
    per_op += (per_op.empty() ? "" : ", ") + op + " " + std::to_string(count);
  }
  BOOST_TEST(points > 0);
  namespace utf = boost::unit_test;
  const bool clean =
      utf::results_collector.results(utf::framework::current_test_case().p_id).passed();
  // std::cout, so that the count shows in ctest -V and in the test log.
  std::cout << "fault sweep " << backend << ": " << points << " injection points (" << after_points
            << " after the call), "
            << (clean ? "all surfaced, nothing leaked" : "with the failures reported above")
            << "\n  per operation: " << per_op << std::endl;
}
