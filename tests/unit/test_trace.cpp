// SPDX-License-Identifier: Apache-2.0
// The `trace` layer (docs/layers.md): the file it writes, its bounded ring, the summary
// it logs, its options, and many threads through it. tests/scripts/check_trace.py checks the
// file of a whole gemm_pipeline run as Chrome trace-event JSON. The backend is "host!", or the
// selector GPUPLUG_TEST_LAYER_BACKEND names (layer_backend.hpp: CTest runs it again on the fake
// HIP runtime and on the fake CUDA driver).
#define BOOST_TEST_MODULE trace
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gpuplug/gpuplug.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "contains.hpp"
#include "error_of.hpp"
#include "layer_backend.hpp"
#include "loader_env.hpp"
#include "log_records.hpp"
#include "test_print.hpp"

using gpuplug::Options;
using gpuplug::Status;
using namespace gpuplug::test;
namespace fs = std::filesystem;

BOOST_TEST_GLOBAL_FIXTURE(LoaderEnvironment);

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("gpuplug-trace-test-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::string read(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// "0x1f", as the trace writes pointers.
std::string hex_of(gpuplug::DevicePtr p) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(p.value));
  return buf;
}

/// The info records the backend logged, joined.
std::string info_text(LogRecords& logs) {
  std::string all;
  for (const auto& r : logs.take()) all += r.message + "\n";
  return all;
}

/// One traced run: a folder for its file, the records logged at info level, and a registry.
struct Traced {
  TempDir dir;
  LogRecords logs;
  gpuplug::PluginRegistry registry;
  Traced() {
    gpuplug::set_log_level(gpuplug::LogLevel::info);
    registry.discover();
  }
  /// A backend with the trace layer writing to `file` (in the folder) and `extra` options.
  std::shared_ptr<gpuplug::GpuBackend> create(const std::string& file, Options extra = {}) {
    extra["layers"] = "trace";
    extra["trace_file"] = (dir.path / file).string();
    return registry.create(layer_selector(), extra);
  }
  std::string file(const std::string& name) const { return read(dir.path / name); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(every_call_is_written_with_its_arguments_and_summarized) {
  Traced run;
  {
    auto gpu = run.create("t.json");
    const gpuplug::DevicePtr p = gpu->alloc(4096, "weights");
    std::vector<char> host(4096, 1);
    gpu->copy_h2d(p, host.data(), host.size());
    const gpuplug::Stream s = gpu->create_stream();
    gpu->memset(p, 0, 4096, s);
    gpu->copy_h2d_2d_async(p, 128, host.data(), 64, 48, 10, s);  // 10 rows of 48 bytes
    gpu->synchronize(s);
    gpu->destroy_stream(s);
    BOOST_CHECK_THROW(gpu->free(gpuplug::DevicePtr{0x10}), gpuplug::Error);
    gpu->free(p);
  }
  const std::string text = run.file("t.json");
  BOOST_TEST(contains(text, R"("name":"alloc","cat":"gpuplug","args":{"bytes":4096,)"), text);
  BOOST_TEST(contains(text, R"("site":"weights")"), text);
  BOOST_TEST(contains(text, R"("name":"copy_h2d")"), text);
  BOOST_TEST(contains(text, R"("name":"copy_h2d_2d_async","cat":"gpuplug","args":{"device_ptr":")"),
             text);
  BOOST_TEST(contains(text, R"("bytes":480)"), text);
  BOOST_TEST(contains(text, R"j("name":"free (failed)")j"), text);
  BOOST_TEST(contains(text, R"("status":"invalid_argument")"), text);
  BOOST_TEST(contains(text, R"("name":"thread_name")"), text);
  BOOST_TEST(contains(text, "(queued)"), text);  // the stream's own track
  BOOST_TEST(contains(text, R"("name":"live bytes")"), text);
  BOOST_TEST(contains(text, R"("dropped_events":0)"), text);
  const std::string info = info_text(run.logs);
  BOOST_TEST(contains(info, "trace summary: "), info);
  BOOST_TEST(contains(info, "alloc: 1 calls"), info);
  BOOST_TEST(contains(info, "free: 2 calls (1 failed)"), info);
  BOOST_TEST(contains(info, "memory: 4096 bytes (4.0 KiB) allocated, 4096 bytes (4.0 KiB) freed"),
             info);
  BOOST_TEST(contains(info, "trace: wrote "), info);
}

BOOST_AUTO_TEST_CASE(a_launch_records_the_first_8_bytes_of_each_argument) {
  Traced run;
  gpuplug::DevicePtr x{}, y{};
  {
    auto gpu = run.create("args.json");
    gpu->load_module_file("axpy", layer_module_file("axpy"));
    const gpuplug::KernelHandle axpy = gpu->kernel("axpy", "axpy");
    x = gpu->alloc(16, "x");
    y = gpu->alloc(16, "y");
    gpu->memset(x, 0, 16);
    gpu->memset(y, 0, 16);
    const std::uint32_t n = 4;
    const float alpha = 2.5f;  // 0x40200000
    gpu->launch_args(axpy, gpuplug::Dim3{1}, gpuplug::Dim3{256}, 0, gpuplug::Stream{}, n, alpha, x,
                     y);
    gpu->synchronize();
    gpu->free(x);
    gpu->free(y);
  }
  const std::string text = run.file("args.json");
  const std::string words = R"("arg_words":["0x4","0x40200000",")" + hex_of(x) +
                            R"(",")" + hex_of(y) + R"("])";
  BOOST_TEST(contains(text, words), text);
}

BOOST_AUTO_TEST_CASE(the_ring_is_bounded_and_says_what_it_dropped) {
  Traced run;
  {
    auto gpu = run.create("ring.json", {{"trace_buffer", "8"}});
    for (int i = 0; i < 20; ++i) gpu->free(gpu->alloc(64));
  }
  const std::string text = run.file("ring.json");
  BOOST_TEST(contains(text, R"("dropped_events":32)"), text);
  BOOST_TEST(contains(text, R"("ring_capacity":8)"), text);
  const std::string info = info_text(run.logs);
  // The counters still cover every call.
  BOOST_TEST(contains(info, "alloc: 20 calls"), info);
  BOOST_TEST(contains(info, "32 events dropped: the ring keeps the last 8 (option trace_buffer)"),
             info);
}

BOOST_AUTO_TEST_CASE(bad_options_are_refused_by_name) {
  gpuplug::PluginRegistry registry;
  registry.discover();
  const auto e = error_of(
      [&] {
        registry.create(layer_selector(), {{"layers", "trace"}, {"trace_buffer", "0"}});
      },
      Status::invalid_argument);
  BOOST_TEST(contains(e.what(), "layer 'trace': option trace_buffer='0': expected a count"),
             e.what());
  const auto f = error_of(
      [&] {
        registry.create(layer_selector(), {{"layers", "trace"}, {"trace_file", ""}});
      },
      Status::invalid_argument);
  BOOST_TEST(contains(f.what(), "option trace_file=''"), f.what());
}

BOOST_AUTO_TEST_CASE(a_file_that_cannot_be_written_is_logged_not_thrown) {
  LogRecords logs;
  {
    gpuplug::PluginRegistry registry;
    registry.discover();
    auto gpu = registry.create(
        layer_selector(), {{"layers", "trace"}, {"trace_file", "/nonexistent-dir/trace.json"}});
    gpu->free(gpu->alloc(8));
  }
  bool logged = false;
  for (const auto& r : logs.take()) {
    logged |= r.level == gpuplug::LogLevel::error &&
              contains(r.message, "trace: cannot write '/nonexistent-dir/trace.json'");
  }
  BOOST_TEST(logged);
}

BOOST_AUTO_TEST_CASE(many_threads_each_get_a_track) {
  Traced run;
  {
    auto gpu = run.create("threads.json");
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 200; ++i) gpu->free(gpu->alloc(32));
      });
    }
    for (auto& t : threads) t.join();
    BOOST_TEST(gpu->live_alloc_count() == 0u);
  }
  const std::string text = run.file("threads.json");
  for (int t = 1; t <= 6; ++t) {
    BOOST_TEST(contains(text, "\"name\":\"thread " + std::to_string(t) + "\""), text.substr(0, 800));
  }
  BOOST_TEST(contains(text, R"("dropped_events":0)"));
}
