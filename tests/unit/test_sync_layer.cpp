// SPDX-License-Identifier: Apache-2.0
// The built-in `sync` layer (docs/layers.md, "sync"): a kernel's fault fails the launch that
// caused it, naming the kernel, where without the layer it waits for the next synchronize.
#define BOOST_TEST_MODULE sync_layer
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <filesystem>
#include <gpuplug/gpuplug.hpp>
#include <string>
#include <thread>
#include <vector>

#include "contains.hpp"
#include "error_of.hpp"
#include "test_print.hpp"

using gpuplug::DevicePtr;
using gpuplug::Dim3;
using gpuplug::Error;
using gpuplug::Status;
using namespace gpuplug::test;


namespace {

const std::filesystem::path kTestKernels = GPUPLUG_TEST_HOST_KERNEL_DIR;  // test_throws.so

/// A host backend with `layers`, the test_throws module loaded, and a counter.
struct Throwing {
  gpuplug::PluginRegistry registry;
  std::shared_ptr<gpuplug::GpuBackend> gpu;
  gpuplug::KernelHandle runtime, count;
  DevicePtr counter;
  gpuplug::Stream stream;

  explicit Throwing(const std::string& layers) {
    registry.discover();
    gpu = registry.create("host!", {{"layers", layers}});
    gpu->load_module_file("test_throws", kTestKernels / "test_throws.so");
    runtime = gpu->kernel("test_throws", "throw_runtime");
    count = gpu->kernel("test_throws", "count");
    counter = gpu->alloc(4, "sync_layer");
    stream = gpu->create_stream();
  }
  ~Throwing() {
    gpu->destroy_stream(stream);
    gpu->free(counter);
  }
  void launch_throwing(std::uint32_t fail_block) {
    void* params[] = {&fail_block, &counter};
    gpu->launch(runtime, Dim3{4}, Dim3{1}, 0, stream, params);
  }
  std::uint32_t counted() {
    std::uint32_t n = 0;
    gpu->copy_d2h(&n, counter, 4);
    return n;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(without_the_layer_a_fault_waits_for_the_next_synchronize) {
  Throwing t("");
  t.launch_throwing(1);  // returns: the fault is pending on the stream
  const Error e = error_of([&] { t.gpu->synchronize(t.stream); }, Status::launch_failed);
  BOOST_TEST(contains(e.what(), "boom in block 1"), e.what());
}

BOOST_AUTO_TEST_CASE(with_the_layer_the_launch_that_faults_fails_naming_the_kernel) {
  Throwing t("sync");
  const Error e = error_of([&] { t.launch_throwing(2); }, Status::launch_failed);
  BOOST_TEST(contains(e.what(), "host:0"), e.what());
  BOOST_TEST(contains(e.what(), "sync: synchronize after the launch of "
                                "test_throws::throw_runtime on stream "),
             e.what());
  BOOST_TEST(contains(e.what(), "boom in block 2"), e.what());
  // Reported once, by the launch: the stream works again.
  t.gpu->synchronize(t.stream);
  t.gpu->memset(t.counter, 0, 4);
  t.gpu->launch_args(t.count, Dim3{5}, Dim3{1}, 0, t.stream, t.counter);
  // No synchronize: the layer waited for the launch.
  BOOST_TEST(t.counted() == 5u);
}

BOOST_AUTO_TEST_CASE(a_handle_the_layer_did_not_resolve_is_named_by_its_value) {
  Throwing t("sync");
  // The handle of a backend made without the layer: the sync layer of `t` never saw it resolved.
  auto plain = t.registry.create("host!", {{"layers", ""}});
  plain->load_module_file("test_throws", kTestKernels / "test_throws.so");
  const gpuplug::KernelHandle foreign = plain->kernel("test_throws", "count");
  void* params[] = {&t.counter};
  const Error e = error_of([&] { t.gpu->launch(foreign, Dim3{1}, Dim3{1}, 0, t.stream, params); },
                           Status::invalid_argument);
  BOOST_TEST(contains(e.what(), "sync: launch of kernel 0x"), e.what());
  BOOST_TEST(contains(e.what(), "(not resolved here)"), e.what());
}

BOOST_AUTO_TEST_CASE(many_threads_launch_through_the_layer) {
  Throwing t("sync");
  t.gpu->memset(t.counter, 0, 4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      const gpuplug::Stream s = t.gpu->create_stream();
      for (int j = 0; j < 25; ++j) t.gpu->launch_args(t.count, Dim3{2}, Dim3{1}, 0, s, t.counter);
      t.gpu->destroy_stream(s);
    });
  }
  for (std::thread& th : threads) th.join();
  BOOST_TEST(t.counted() == 4u * 25u * 2u);
}

BOOST_AUTO_TEST_CASE(a_launch_into_a_capture_is_not_waited_for) {
  Throwing t("sync");
  t.gpu->memset(t.counter, 0, 4);
  t.gpu->synchronize();
  t.gpu->begin_capture(t.stream);
  t.gpu->launch_args(t.count, Dim3{3}, Dim3{1}, 0, t.stream, t.counter);  // would invalidate it
  const gpuplug::Graph g = t.gpu->end_capture(t.stream);
  BOOST_TEST(t.counted() == 0u);
  t.gpu->launch_graph(g, t.stream);
  t.gpu->synchronize(t.stream);
  BOOST_TEST(t.counted() == 3u);
  t.gpu->destroy_graph(g);
}
