// SPDX-License-Identifier: Apache-2.0
// The built-in `faults` layer (docs/layers.md): its spec, which calls it fails, the
// `after` mode's undo, many threads, and the Error a host application sees. On host, or on the
// backend GPUPLUG_TEST_LAYER_BACKEND names (layer_backend.hpp: CTest runs it again on the fake
// CUDA driver).
#define BOOST_TEST_MODULE faults
#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <gpuplug/gpuplug.hpp>
#include <string>
#include <thread>
#include <vector>

#include "contains.hpp"
#include "error_of.hpp"
#include "layer_backend.hpp"
#include "loader_env.hpp"
#include "scoped_env.hpp"
#include "test_print.hpp"

using gpuplug::DevicePtr;
using gpuplug::Error;
using gpuplug::Options;
using gpuplug::Status;
using namespace gpuplug::test;

BOOST_TEST_GLOBAL_FIXTURE(LoaderEnvironment);

namespace {

/// A registry of this build tree's plugins, and backends (host, or layer_selector()'s) with the
/// faults layer on.
struct Faulty {
  gpuplug::PluginRegistry registry;
  Faulty() { registry.discover(); }
  std::shared_ptr<gpuplug::GpuBackend> backend(const std::string& spec) {
    return registry.create(layer_selector(), {{"layers", "faults"}, {"faults", spec}});
  }
  /// The Error creating a backend with `spec` gives.
  Error refused(const std::string& spec) {
    return error_of([&] { backend(spec); }, Status::invalid_argument);
  }
};

/// Which of `count` allocations of one byte fail on `gpu` (true = failed); frees the others.
std::vector<bool> failing_allocs(gpuplug::GpuBackend& gpu, int count) {
  std::vector<bool> failed;
  for (int i = 0; i < count; ++i) {
    try {
      gpu.free(gpu.alloc(1));
      failed.push_back(false);
    } catch (const Error& e) {
      BOOST_TEST(e.status() == Status::out_of_memory, e.what());
      failed.push_back(true);
    }
  }
  return failed;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(spec)

BOOST_AUTO_TEST_CASE(good_specs_are_taken) {
  Faulty f;
  for (const char* spec :
       {"alloc@3=out_of_memory; load_module@1=invalid_image; launch@every:100=launch_failed; "
        "copy_d2h@2=device_error",
        "memset@1=device_error", "kernel@2=not_found:before", "alloc@p:0.5,seed:7=out_of_memory",
        "alloc@p:1=out_of_memory;", " create_stream @ 1 = device_error : after ", ""}) {
    BOOST_TEST_CONTEXT("faults='" << spec << "'") { BOOST_CHECK_NO_THROW(f.backend(spec)); }
  }
}

BOOST_AUTO_TEST_CASE(a_bad_spec_names_the_bad_part) {
  Faulty f;
  const std::pair<const char*, const char*> cases[] = {
      {"alloc@x=out_of_memory", "'x' is not a call number (a whole number from 1)"},
      {"alloc@0=out_of_memory", "'0' is not a call number"},
      {"alloc@every:0=out_of_memory", "'0' is not a period"},
      {"alloc@p:1.5=out_of_memory", "'1.5' is not a probability (a number in [0, 1])"},
      {"alloc@p:0.1,sed:3=out_of_memory", "'sed:3' is not a seed"},
      {"allco@1=out_of_memory", "'allco' is not an operation; did you mean alloc?"},
      {"last_error@1=internal", "'last_error' returns no status, so it cannot fail"},
      {"alloc@1=oom", "'oom' is not a status (one of invalid_argument, out_of_memory,"},
      {"alloc@1=out_of_memroy", "'out_of_memroy' is not a status; did you mean out_of_memory?"},
      {"alloc@1=success", "'success' is not a status"},
      {"alloc@1=out_of_memory:later", "'later' is not a mode (before or after)"},
      {"alloc=out_of_memory", "'alloc=out_of_memory' is not op@when=status"},
      {"alloc@1=out_of_memory; free@1=invalid_argument:after",
       "'free@1=invalid_argument:after': free cannot fail after the call"},
  };
  for (const auto& [spec, why] : cases) {
    const Error e = f.refused(spec);
    BOOST_TEST(contains(e.what(), "layer 'faults': faults='" + std::string(spec) + "': "),
               e.what());
    BOOST_TEST(contains(e.what(), why), e.what());
  }
}

BOOST_AUTO_TEST_CASE(gpuplug_faults_is_read_when_the_option_is_absent) {
  Faulty f;
  ScopedEnv layers("GPUPLUG_LAYERS", "faults");
  ScopedEnv faults("GPUPLUG_FAULTS", "alloc@1=device_error");
  auto gpu = f.registry.create(layer_selector());
  error_of([&] { gpu->alloc(8); }, Status::device_error);
  // The option wins over the variable.
  auto other = f.registry.create(layer_selector(), {{"faults", "alloc@2=device_error"}});
  other->free(other->alloc(8));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(which_calls)

BOOST_AUTO_TEST_CASE(the_nth_call_fails_with_the_status_and_a_message_naming_it) {
  Faulty f;
  auto gpu = f.backend("alloc@2=out_of_memory");
  const DevicePtr a = gpu->alloc(16);
  const Error e = error_of([&] { gpu->alloc(16); }, Status::out_of_memory);
  BOOST_TEST(e.backend() == layer_backend_name());
  BOOST_TEST(e.operation() == "alloc");
  // The injected message, inside the out-of-memory report every failed alloc gets (docs/memory.md).
  BOOST_TEST(contains(std::string(e.what()),
                      layer_backend_name() + ": alloc: out of memory allocating 16 B at "),
             e.what());
  BOOST_TEST(contains(e.message(), ": injected fault: alloc call 2 (faults='alloc@2=out_of_memory'); "),
             e.what());
  const DevicePtr c = gpu->alloc(16);                  // call 3 goes through
  BOOST_TEST(gpu->ledger_stats().total_allocs == 2u);  // the plugin never saw call 2
  gpu->free(a);
  gpu->free(c);
}

BOOST_AUTO_TEST_CASE(a_gpubackend_name_reaches_its_slot) {
  Faulty f;
  auto gpu = f.backend("memset@1=device_error");
  const DevicePtr p = gpu->alloc(16);
  const Error e = error_of([&] { gpu->memset(p, 0, 16); }, Status::device_error);
  BOOST_TEST(e.operation() == "memset");
  BOOST_TEST(contains(e.message(), "injected fault: memset_d8 call 1"), e.what());
  gpu->free(p);
}

BOOST_AUTO_TEST_CASE(a_pitched_copy_slot_fails_by_name) {
  Faulty f;
  auto gpu = f.backend("copy_d2d_2d_async@2=device_error");
  const DevicePtr a = gpu->alloc(256), b = gpu->alloc(256);
  gpu->copy_d2d_2d_async(b, 64, a, 64, 32, 4, {});  // call 1 goes through
  const Error e = error_of([&] { gpu->copy_d2d_2d_async(b, 64, a, 64, 32, 4, {}); },
                           Status::device_error);
  BOOST_TEST(e.operation() == "copy_d2d_2d_async");
  BOOST_TEST(contains(e.message(), "injected fault: copy_d2d_2d_async call 2"), e.what());
  gpu->synchronize();
  gpu->free(a);
  gpu->free(b);
}

BOOST_AUTO_TEST_CASE(every_nth_call_fails) {
  Faulty f;
  auto gpu = f.backend("alloc@every:3=out_of_memory");
  const std::vector<bool> failed = failing_allocs(*gpu, 10);
  BOOST_TEST(failed == (std::vector<bool>{false, false, true, false, false, true, false, false,
                                          true, false}));
}

BOOST_AUTO_TEST_CASE(a_probability_fails_the_same_calls_for_the_same_seed) {
  Faulty f;
  const std::vector<bool> first =
      failing_allocs(*f.backend("alloc@p:0.25,seed:42=out_of_memory"), 400);
  const std::vector<bool> again =
      failing_allocs(*f.backend("alloc@p:0.25,seed:42=out_of_memory"), 400);
  const std::vector<bool> other =
      failing_allocs(*f.backend("alloc@p:0.25,seed:43=out_of_memory"), 400);
  BOOST_TEST(first == again);
  BOOST_TEST(first != other);
  const auto n = std::count(first.begin(), first.end(), true);
  BOOST_TEST((n > 50 && n < 150), n << " of 400 calls failed at p = 0.25");
  const std::vector<bool> never = failing_allocs(*f.backend("alloc@p:0=out_of_memory"), 50);
  BOOST_TEST(std::count(never.begin(), never.end(), true) == 0);
  const std::vector<bool> always = failing_allocs(*f.backend("alloc@p:1=out_of_memory"), 50);
  BOOST_TEST(std::count(always.begin(), always.end(), true) == 50);
}

BOOST_AUTO_TEST_CASE(the_first_rule_that_fires_wins_and_others_count_on) {
  Faulty f;
  auto gpu =
      f.backend("alloc@2=out_of_memory; alloc@every:2=device_error; copy_h2d@1=launch_failed");
  gpu->free(gpu->alloc(4));
  error_of([&] { gpu->alloc(4); }, Status::out_of_memory);
  gpu->free(gpu->alloc(4));
  error_of([&] { gpu->alloc(4); }, Status::device_error);
  BOOST_TEST(gpu->live_alloc_count() == 0u);
}

BOOST_AUTO_TEST_CASE(counts_are_per_backend) {
  Faulty f;
  auto a = f.backend("alloc@1=out_of_memory");
  auto b = f.backend("alloc@1=out_of_memory");
  error_of([&] { a->alloc(4); }, Status::out_of_memory);
  error_of([&] { b->alloc(4); }, Status::out_of_memory);
  a->free(a->alloc(4));
}

BOOST_AUTO_TEST_CASE(many_threads_fail_exactly_every_nth_call) {
  Faulty f;
  auto gpu = f.backend("alloc@every:10=out_of_memory");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        try {
          gpu->free(gpu->alloc(64));
        } catch (const Error& e) {
          if (e.status() == Status::out_of_memory && contains(e.message(), "injected fault"))
            failures.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  BOOST_TEST(failures.load() == 400);  // calls 10, 20, ..., 4000, whichever thread made them
  BOOST_TEST(gpu->live_alloc_count() == 0u);
  BOOST_TEST(gpu->ledger_stats().total_allocs == 3600u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(modes)

BOOST_AUTO_TEST_CASE(before_never_calls_the_plugin_after_calls_it_and_undoes) {
  Faulty f;
  auto before = f.backend("alloc@1=out_of_memory");
  error_of([&] { before->alloc(32); }, Status::out_of_memory);
  BOOST_TEST(before->ledger_stats().total_allocs == 0u);

  auto after = f.backend("alloc@1=out_of_memory:after");
  const Error e = error_of([&] { after->alloc(32); }, Status::out_of_memory);
  BOOST_TEST(contains(e.message(),
                      ": injected fault: alloc call 1, after the call, which was undone "
                      "(faults='alloc@1=out_of_memory:after'); 0 B live (0 B device, 0 B managed); "),
             e.what());
  const gpuplug::LedgerStats s = after->ledger_stats();
  BOOST_TEST(s.total_allocs == 1u);  // the plugin allocated ...
  BOOST_TEST(s.total_frees == 1u);   // ... and the layer freed it
  BOOST_TEST(s.live_count == 0u);
}

BOOST_AUTO_TEST_CASE(after_a_module_load_the_module_is_unloaded) {
  Faulty f;
  const std::vector<std::byte> image = layer_module_bytes("axpy");
  auto gpu = f.backend("load_module@1=invalid_image:after");
  error_of([&] { gpu->load_module("faulted_axpy", image); }, Status::invalid_image);
  BOOST_TEST(!gpu->has_module("faulted_axpy"));
  gpu->load_module("faulted_axpy", image);  // the name is free again: it was unloaded
  BOOST_TEST(gpu->kernel("faulted_axpy", "axpy").value != 0u);
  gpu->unload_module("faulted_axpy");
}

BOOST_AUTO_TEST_CASE(after_a_stream_or_event_is_made_it_is_destroyed) {
  Faulty f;
  auto gpu = f.backend("create_stream@1=device_error:after; create_event@1=device_error:after");
  error_of([&] { gpu->create_stream(); }, Status::device_error);
  error_of([&] { gpu->create_event(); }, Status::device_error);
  // The next ones work; the backend's destruction finds nothing left behind.
  gpu->destroy_stream(gpu->create_stream());
  gpu->destroy_event(gpu->create_event());
}

BOOST_AUTO_TEST_CASE(a_failure_of_the_plugin_itself_stands_in_after_mode) {
  Faulty f;
  auto gpu = f.registry.create(layer_selector(), {{"layers", "faults"},
                                                  {"faults", "alloc@1=device_error:after"},
                                                  {"device_memory_limit", "1024"}});
  const Error e = error_of([&] { gpu->alloc(4096); }, Status::out_of_memory);
  BOOST_TEST(!contains(e.message(), "injected fault"), e.what());
}

BOOST_AUTO_TEST_SUITE_END()
