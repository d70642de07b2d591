// SPDX-License-Identifier: Apache-2.0
// libgpuplug-cuda.so's graphs (ABI 1.3) through its C table, against the fake libcuda.so.1
// (fake_libcuda.c): capture errors and their statuses, abort, replays, a driver without graphs.

// CTest runs it with GPUPLUG_FAKE_CUDA=device (the fake records captures and replays them) and
// =device_no_graphs (cuGetProcAddress knows no graph entry point); run any other way (no fake,
// or a real driver, whose graphs the conformance suite checks) every case says it is skipped.

#define BOOST_TEST_MODULE test_cuda_graphs
#include <dlfcn.h>

#include <cstdlib>
#include <string_view>

#include "gpu_graph_cases.hpp"

using namespace gpuplug::test;  // NOLINT(google-build-using-namespace): the harness is the test's

std::filesystem::path gpuplug::test::plugin_under_test() {
  return GPUPLUG_TEST_PLUGIN_DIR "/libgpuplug-cuda.so";
}

namespace {

std::string_view fake_mode() {
  const char* m = std::getenv("GPUPLUG_FAKE_CUDA");
  return m != nullptr ? m : "";
}

boost::test_tools::assertion_result is_mode(std::string_view wanted) {
  boost::test_tools::assertion_result ok(fake_mode() == wanted);
  ok.message() << "GPUPLUG_FAKE_CUDA is '" << fake_mode() << "', not '" << wanted << "'";
  return ok;
}
boost::test_tools::assertion_result is_device(boost::unit_test::test_unit_id) {
  return is_mode("device");
}
boost::test_tools::assertion_result is_no_graphs(boost::unit_test::test_unit_id) {
  return is_mode("device_no_graphs");
}
// Functions, not lambdas: GCC 12 warns about boost::function copying an empty closure.
boost::unit_test::precondition fake_device() { return boost::unit_test::precondition(&is_device); }
boost::unit_test::precondition fake_without_graphs() {
  return boost::unit_test::precondition(&is_no_graphs);
}

template <class Fn>
Fn fake_counter(const char* name) {
  void* fake = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  BOOST_TEST_REQUIRE(fake != nullptr);
  auto fn = reinterpret_cast<Fn>(dlsym(fake, name));
  BOOST_TEST_REQUIRE(fn != nullptr, name);
  return fn;
}

GraphVendor cuda_vendor() {
  BOOST_TEST_REQUIRE(probe().reason == GPUPLUG_PROBE_AVAILABLE, probe().message);
  const auto replays = fake_counter<long long (*)()>("gpuplug_fake_cuda_graph_launches");
  const auto graphs = fake_counter<int (*)()>("gpuplug_fake_cuda_live_graphs");
  const auto execs = fake_counter<int (*)()>("gpuplug_fake_cuda_live_graph_execs");
  return GraphVendor{"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
                     "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", [replays] { return replays(); },
                     [graphs, execs] { return static_cast<long long>(graphs() + execs()); }};
}

}  // namespace

BOOST_AUTO_TEST_CASE(synchronize_during_capture_invalidates_and_abort_recovers, *fake_device()) {
  check_synchronize_invalidates_and_abort_recovers(cuda_vendor());
}

BOOST_AUTO_TEST_CASE(default_stream_work_follows_stream_flags, *fake_device()) {
  check_default_stream_work_follows_stream_flags();
}

BOOST_AUTO_TEST_CASE(replays_are_counted_and_uploads_staged, *fake_device()) {
  check_replays_are_counted_and_uploads_staged(cuda_vendor());
}

BOOST_AUTO_TEST_CASE(a_global_capture_refuses_alloc, *fake_device()) {
  check_global_capture_refuses_alloc(cuda_vendor());
}

BOOST_AUTO_TEST_CASE(a_driver_without_graph_symbols_reports_unsupported, *fake_without_graphs()) {
  BOOST_TEST_REQUIRE(probe().reason == GPUPLUG_PROBE_AVAILABLE, probe().message);
  check_graphs_unsupported_without_the_symbols("cuStreamBeginCapture");
}
