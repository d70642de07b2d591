// SPDX-License-Identifier: Apache-2.0
// Graphs on the host plugin (ABI 1.3, docs/graphs.md): the acceptance program (3 launches, a
// memset and an upload from a temporary, replayed 100 times), capture modes, what poisons a
// capture, a kernel without `<func>_args`, what replay reads, destroy during a queued replay, and
// captures on two threads while a third launches eagerly.
#define BOOST_TEST_MODULE graphs
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "host_backend.hpp"

using namespace gpuplug;

namespace gpuplug {
inline std::ostream& boost_test_print_type(std::ostream& os, const Status& s) {
  return os << to_string(s);
}
}  // namespace gpuplug

namespace {

constexpr std::uint32_t kN = 1024;
constexpr std::size_t kBytes = kN * sizeof(float);

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

void axpy(GpuBackend& gpu, float a, DevicePtr x, DevicePtr y, Stream s) {
  // Resolved before any capture (OpCache: a hit never reads `axpy_args` again): kernel() reads
  // it with a synchronous copy, which a capture would not allow (kernel_resolved_during_capture).
  const KernelHandle f = gpu.op_cache().kernel(gpu, "axpy", "axpy");
  gpu.launch_args(f, Dim3{(kN + 255) / 256, 1, 1}, Dim3{256, 1, 1}, 0, s, kN, a, x.value, y.value);
}

/// A stream, synchronized and destroyed when the scope ends however it ends: declared after the
/// buffers its work uses, so that no queued work outlives them.
struct ScopedStream {
  GpuBackend& gpu;
  Stream s;
  explicit ScopedStream(GpuBackend& g) : gpu(g), s(g.create_stream()) {}
  ~ScopedStream() {
    gpu.abort_capture_if_active(s);
    try {
      gpu.destroy_stream(s);
    } catch (...) {
    }
  }
};

std::vector<float> download(GpuBackend& gpu, DevicePtr p, Stream s) {
  std::vector<float> out(kN, -1.0f);
  gpu.copy_d2h_async(out.data(), p, kBytes, s);
  gpu.synchronize(s);
  return out;
}

/// The Error `f` throws (the test fails when it throws none).
template <class F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  BOOST_FAIL("no Error thrown");
  throw std::logic_error("unreachable");
}

struct Buffers {
  GpuBackend& gpu;
  DevicePtr x, y;
  explicit Buffers(GpuBackend& g) : gpu(g), x(g.alloc(kBytes)), y(g.alloc(kBytes)) {}
  ~Buffers() {
    gpu.free(x);
    gpu.free(y);
  }
};

/// Captures y = 0; x = <temporary upload of base + i>; y += 1x; y += 2x; y += 3x on `s`.
Graph capture_step(GpuBackend& gpu, Stream s, const Buffers& b, float base) {
  gpu.op_cache().kernel(gpu, "axpy", "axpy");  // resolved (module loaded) before the capture
  gpu.begin_capture(s);
  {
    std::vector<float> temporary(kN);
    for (std::uint32_t i = 0; i < kN; ++i) temporary[i] = base + static_cast<float>(i % 50);
    gpu.memset(b.y, 0, kBytes, s);
    gpu.copy_h2d_async(b.x, temporary.data(), kBytes, s);
    for (float a : {1.0f, 2.0f, 3.0f}) axpy(gpu, a, b.x, b.y, s);
    std::fill(temporary.begin(), temporary.end(), 1e6f);  // replay must upload the old bytes
  }
  return gpu.end_capture(s);
}

bool is_six_x(const std::vector<float>& y, float base) {
  for (std::uint32_t i = 0; i < kN; ++i)
    if (y[i] != 6.0f * (base + static_cast<float>(i % 50))) return false;
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(acceptance_three_launches_memset_upload_replayed_100_times) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  Buffers b(gpu);
  const Stream s = gpu.create_stream();
  const Graph g = capture_step(gpu, s, b, 2.0f);
  int good = 0;
  for (int round = 0; round < 100; ++round) {
    gpu.memset(b.y, 0xFF, kBytes, s);  // NaN: a replay that does nothing is seen
    gpu.memset(b.x, 0xFF, kBytes, s);
    gpu.launch_graph(g, s);
    good += is_six_x(download(gpu, b.y, s), 2.0f) ? 1 : 0;
  }
  BOOST_TEST(good == 100);
  gpu.destroy_graph(g);
  gpu.destroy_stream(s);
}

BOOST_AUTO_TEST_CASE(nothing_runs_while_capturing) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  Buffers b(gpu);
  gpu.memset(b.y, 0, kBytes);
  const Stream s = gpu.create_stream();
  gpu.begin_capture(s);
  gpu.memset(b.y, 0x3F, kBytes, s);
  const Graph g = gpu.end_capture(s);
  BOOST_TEST(download(gpu, b.y, s)[0] == 0.0f);  // the memset was recorded, not run
  gpu.launch_graph(g, s);
  BOOST_TEST(download(gpu, b.y, s)[0] != 0.0f);
  gpu.destroy_graph(g);
  gpu.destroy_stream(s);
}

BOOST_AUTO_TEST_CASE(kernel_without_args_metadata_cannot_be_captured) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  Buffers b(gpu);
  gpu.load_module_file("test_throws", GPUPLUG_TEST_HOST_MODULE_DIR "/test_throws.so");
  const KernelHandle f = gpu.kernel("test_throws", "throw_runtime");
  const Stream s = gpu.create_stream();
  gpu.begin_capture(s);
  const Error e = error_of([&] {
    gpu.launch_args(f, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, s, std::uint32_t{5}, b.x.value);
  });
  BOOST_TEST(e.status() == Status::invalid_argument);
  BOOST_TEST(contains(e.what(), "test_throws::throw_runtime"), e.what());
  BOOST_TEST(contains(e.what(), "publishes no throw_runtime_args"), e.what());
  // The capture is poisoned: the next operation and end_capture fail with the reason.
  const Error next = error_of([&] { gpu.memset(b.y, 0, kBytes, s); });
  BOOST_TEST(next.status() == Status::capture_invalidated);
  const Error end = error_of([&] { gpu.end_capture(s); });
  BOOST_TEST(end.status() == Status::capture_invalidated);
  BOOST_TEST(contains(end.what(), "throw_runtime_args"), end.what());
  BOOST_TEST(!gpu.stream_is_capturing(s));
  gpu.memset(b.y, 0, kBytes, s);  // ended: the stream runs work again
  gpu.synchronize(s);
  gpu.destroy_stream(s);
}

// kernel() reads `<func>_args` with a synchronous copy: during the capture of a blocking stream
// it fails at once, saying so, instead of poisoning the capture behind the caller's back.
BOOST_AUTO_TEST_CASE(kernel_resolved_during_capture_says_why_it_fails) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  const Stream s = gpu.create_stream(StreamFlags::blocking);
  gpu.begin_capture(s);
  const Error e = error_of([&] { gpu.kernel("axpy", "axpy"); });
  BOOST_TEST(e.status() == Status::capture_invalidated);
  BOOST_TEST(contains(e.what(), "axpy::axpy_args"), e.what());
  BOOST_TEST(contains(e.what(), "resolve kernels before begin_capture"), e.what());
  gpu.abort_capture_if_active(s);
  BOOST_TEST(gpu.kernel("axpy", "axpy").value != 0);
  gpu.destroy_stream(s);
}

// During the capture of a non-blocking stream (create_stream()'s) the default stream is not
// ordered with it: kernel(), copies, memsets and launches there run, and the capture stays valid.
BOOST_AUTO_TEST_CASE(stream_zero_work_runs_beside_a_non_blocking_capture) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  Buffers b(gpu);
  const Stream s = gpu.create_stream();
  std::vector<float> host(kN, 2.0f);
  gpu.begin_capture(s);
  gpu.memset(b.y, 0, kBytes, s);
  BOOST_TEST(gpu.kernel("axpy", "axpy").value != 0);
  gpu.copy_h2d(b.x, host.data(), kBytes);
  axpy(gpu, 1.0f, b.x, b.x, Stream{});  // x = 2x on the default stream, run now: 4
  std::vector<float> out(kN, 0.0f);
  gpu.copy_d2h(out.data(), b.x, kBytes);
  BOOST_TEST(out[0] == 4.0f);
  BOOST_TEST(gpu.stream_is_capturing(s));
  const Graph g = gpu.end_capture(s);
  gpu.memset(b.y, 0x7F, kBytes, s);
  gpu.launch_graph(g, s);
  gpu.synchronize(s);
  gpu.copy_d2h(out.data(), b.y, kBytes);
  BOOST_TEST(out[kN - 1] == 0.0f);  // the captured memset
  gpu.destroy_graph(g);
  gpu.destroy_stream(s);
}

BOOST_AUTO_TEST_CASE(work_on_stream_zero_and_device_synchronize_invalidate) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  Buffers b(gpu);
  const Stream s = gpu.create_stream(StreamFlags::blocking);
  std::vector<float> host(kN, 1.0f);
  for (int what = 0; what < 4; ++what) {
    gpu.begin_capture(s);
    const Error e = error_of([&] {
      switch (what) {
        case 0: gpu.copy_h2d(b.x, host.data(), kBytes); break;
        case 1: gpu.memset(b.x, 0, kBytes); break;
        case 2: axpy(gpu, 1.0f, b.x, b.y, Stream{}); break;
        default: gpu.synchronize(); break;
      }
    });
    BOOST_TEST(e.status() == Status::capture_invalidated, "case " << what << ": " << e.what());
    BOOST_TEST(contains(e.what(), "stream " + std::to_string(s.value)), e.what());
    // Poisoned until aborted: work on the capturing stream fails the same way.
    BOOST_TEST(error_of([&] { gpu.memset(b.y, 0, kBytes, s); }).status() ==
               Status::capture_invalidated);
    BOOST_TEST(gpu.stream_is_capturing(s));
    gpu.abort_capture_if_active(s);
    BOOST_TEST(!gpu.stream_is_capturing(s));
  }
  gpu.copy_h2d(b.x, host.data(), kBytes);  // nothing captures: stream 0 works again
  gpu.synchronize();
  gpu.destroy_stream(s);
}

BOOST_AUTO_TEST_CASE(capture_modes_refuse_alloc_and_free_as_cuda_does) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  const Stream s = gpu.create_stream();
  const auto alloc_on_other_thread = [&] {
    Status status = Status::success;
    std::thread t([&] {
      try {
        gpu.free(gpu.alloc(64));
      } catch (const Error& e) {
        status = e.status();
      }
    });
    t.join();
    return status;
  };
  // global: from any thread.
  gpu.begin_capture(s, CaptureMode::global);
  BOOST_TEST(alloc_on_other_thread() == Status::capture_invalidated);
  const Error global_end = error_of([&] { gpu.end_capture(s); });
  BOOST_TEST(global_end.status() == Status::capture_invalidated);
  BOOST_TEST(contains(global_end.what(), "global mode"), global_end.what());
  // thread: another thread may, the capturing one may not.
  gpu.begin_capture(s, CaptureMode::thread);
  BOOST_TEST(alloc_on_other_thread() == Status::success);
  BOOST_TEST(error_of([&] { gpu.alloc(64); }).status() == Status::capture_invalidated);
  BOOST_TEST(error_of([&] { gpu.end_capture(s); }).status() == Status::capture_invalidated);
  // relaxed: nobody is refused, and the capture stays valid.
  gpu.begin_capture(s, CaptureMode::relaxed);
  BOOST_TEST(alloc_on_other_thread() == Status::success);
  gpu.free(gpu.alloc(64));
  const Graph g = gpu.end_capture(s);
  gpu.destroy_graph(g);
  gpu.destroy_stream(s);
}

BOOST_AUTO_TEST_CASE(retained_upload_is_read_at_replay_staged_at_capture) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  Buffers b(gpu);
  const Stream s = gpu.create_stream();
  std::vector<float> staged(kN, 1.0f), retained(kN, 1.0f);
  gpu.begin_capture(s);
  gpu.copy_h2d_async(b.x, staged.data(), kBytes, s);
  gpu.copy_h2d_async_retained(b.y, retained.data(), kBytes, s);
  const Graph g = gpu.end_capture(s);
  std::fill(staged.begin(), staged.end(), 7.0f);
  std::fill(retained.begin(), retained.end(), 7.0f);
  gpu.launch_graph(g, s);
  BOOST_TEST(download(gpu, b.x, s)[kN - 1] == 1.0f);  // the bytes it had at capture
  BOOST_TEST(download(gpu, b.y, s)[kN - 1] == 7.0f);  // the pointer, read at replay
  gpu.destroy_graph(g);
  gpu.destroy_stream(s);
}

BOOST_AUTO_TEST_CASE(a_pitched_copy_is_recorded_row_by_row_and_its_upload_staged) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  Buffers b(gpu);
  const Stream s = gpu.create_stream();
  gpu.memset(b.x, 0, kBytes, s);
  gpu.memset(b.y, 0, kBytes, s);
  gpu.synchronize(s);
  // 4 rows of 16 floats out of rows 64 floats apart, into rows 32 floats apart.
  std::vector<float> host(4 * 64, 0.0f);
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t c = 0; c < 16; ++c) host[r * 64 + c] = static_cast<float>(r * 100 + c);
  gpu.begin_capture(s);
  gpu.copy_h2d_2d_async(b.x, 32 * sizeof(float), host.data(), 64 * sizeof(float),
                        16 * sizeof(float), 4, s);
  gpu.copy_d2d_2d_async(b.y, 16 * sizeof(float), b.x, 32 * sizeof(float), 16 * sizeof(float), 4,
                        s);
  const Graph g = gpu.end_capture(s);
  BOOST_TEST(download(gpu, b.y, s)[16] == 0.0f);  // recorded, not run
  std::fill(host.begin(), host.end(), -1.0f);     // the upload was staged at capture
  gpu.launch_graph(g, s);
  const std::vector<float> y = download(gpu, b.y, s);
  BOOST_TEST(y[0] == 0.0f);
  BOOST_TEST(y[15] == 15.0f);
  BOOST_TEST(y[16] == 100.0f);
  BOOST_TEST(y[3 * 16 + 5] == 305.0f);
  BOOST_TEST(y[4 * 16] == 0.0f);  // nothing past the last row
  gpu.destroy_graph(g);
  gpu.destroy_stream(s);
}

BOOST_AUTO_TEST_CASE(destroy_while_a_replay_is_queued_is_safe) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  constexpr std::size_t big = std::size_t{32} << 20;
  const DevicePtr a = gpu.alloc(big), c = gpu.alloc(big), out = gpu.alloc(kBytes);
  const Stream s = gpu.create_stream();
  std::vector<float> ones(kN, 1.0f);
  gpu.begin_capture(s);
  for (int i = 0; i < 4; ++i) gpu.copy_d2d_async(i % 2 ? a : c, i % 2 ? c : a, big, s);
  gpu.copy_h2d_async(out, ones.data(), kBytes, s);  // staged: its bytes must outlive the graph
  const Graph g = gpu.end_capture(s);
  gpu.memset(out, 0, kBytes, s);
  gpu.launch_graph(g, s);
  gpu.destroy_graph(g);  // the copies are still queued behind the big ones
  BOOST_TEST(download(gpu, out, s)[kN / 2] == 1.0f);
  BOOST_TEST(error_of([&] { gpu.launch_graph(g, s); }).status() == Status::invalid_argument);
  gpu.free(a);
  gpu.free(c);
  gpu.free(out);
  gpu.destroy_stream(s);
}

BOOST_AUTO_TEST_CASE(wait_on_an_event_from_outside_the_capture_invalidates) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  const Stream s = gpu.create_stream(), other = gpu.create_stream();
  const Event e = gpu.create_event();
  gpu.record(e, other);
  gpu.begin_capture(s);
  const Error err = error_of([&] { gpu.wait(s, e); });
  BOOST_TEST(err.status() == Status::capture_invalidated);
  BOOST_TEST(contains(err.what(), "outside the capture"), err.what());
  gpu.abort_capture_if_active(s);
  gpu.wait(s, e);  // not capturing: an ordinary wait
  gpu.synchronize(s);
  gpu.destroy_event(e);
  gpu.destroy_stream(s);
  gpu.destroy_stream(other);
}

// Two threads capture and replay on their own streams while a third launches eagerly on a third
// stream (relaxed mode: its work runs, never recorded). Under TSan this is the race check of the
// capture machinery and of the fast path that reads `any()` without a lock.
BOOST_AUTO_TEST_CASE(captures_on_two_threads_while_a_third_launches_eagerly) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  gpu.op_cache().kernel(gpu, "axpy", "axpy");
  std::atomic<int> bad{0};
  std::mutex messages_mutex;
  std::vector<std::string> messages;  // Boost.Test's log is not for other threads
  const auto note = [&](const std::string& m) {
    std::lock_guard lock(messages_mutex);
    messages.push_back(m);
  };
  std::atomic<bool> stop{false};
  const auto capturer = [&](float base) {
    try {
      Buffers b(gpu);
      ScopedStream scoped(gpu);
      const Stream s = scoped.s;
      for (int round = 0; round < 20; ++round) {
        const Graph g = capture_step(gpu, s, b, base + static_cast<float>(round));
        for (int replay = 0; replay < 3; ++replay) {
          gpu.memset(b.y, 0xFF, kBytes, s);
          gpu.launch_graph(g, s);
          if (!is_six_x(download(gpu, b.y, s), base + static_cast<float>(round))) ++bad;
        }
        gpu.destroy_graph(g);
      }
    } catch (const std::exception& e) {
      note(std::string("capturer: ") + e.what());
      ++bad;
    }
  };
  int eager_rounds = 0;
  std::thread eager([&] {
    try {
      Buffers b(gpu);
      ScopedStream scoped(gpu);
      const Stream s = scoped.s;
      std::vector<float> ones(kN, 1.0f);
      while (!stop.load()) {
        gpu.memset(b.y, 0, kBytes, s);
        gpu.copy_h2d_async(b.x, ones.data(), kBytes, s);
        axpy(gpu, 2.0f, b.x, b.y, s);
        if (download(gpu, b.y, s)[kN - 1] != 2.0f) ++bad;
        ++eager_rounds;
      }
    } catch (const std::exception& e) {
      note(std::string("eager: ") + e.what());
      ++bad;
    }
  });
  std::thread one(capturer, 1.0f), two(capturer, 100.0f);
  one.join();
  two.join();
  stop = true;
  eager.join();
  for (const std::string& m : messages) BOOST_TEST_MESSAGE(m);
  BOOST_TEST(bad.load() == 0);
  BOOST_TEST(eager_rounds > 0);
}

// The layers know the graph slots: faults fails them by their GpuBackend names too (undoing an
// end_capture in mode `after` destroys the graph it made), validate refuses a destroyed graph.
BOOST_AUTO_TEST_CASE(layers_fail_and_check_the_graph_slots) {
  test::Host h;
  auto faulty = h.registry.create(
      "host!", {{"layers", "faults"}, {"faults", "launch_graph@1=device_error; end_capture@1=out_of_memory:after"}});
  const Stream s = faulty->create_stream();
  faulty->begin_capture(s);
  const Error end = error_of([&] { faulty->end_capture(s); });
  BOOST_TEST(end.status() == Status::out_of_memory);
  BOOST_TEST(contains(end.what(), "injected fault"), end.what());
  BOOST_TEST(!faulty->stream_is_capturing(s));
  faulty->begin_capture(s);
  const Graph g = faulty->end_capture(s);
  const Error launch = error_of([&] { faulty->launch_graph(g, s); });
  BOOST_TEST(launch.status() == Status::device_error);
  faulty->launch_graph(g, s);  // the rule took call 1 only
  faulty->destroy_graph(g);
  faulty->destroy_stream(s);

  auto checked = h.registry.create("host!", {{"layers", "validate"}});
  const Stream t = checked->create_stream();
  checked->begin_capture(t);
  const Graph made = checked->end_capture(t);
  checked->destroy_graph(made);
  const Error gone = error_of([&] { checked->launch_graph(made, t); });
  BOOST_TEST(gone.status() == Status::invalid_argument);
  BOOST_TEST(contains(gone.what(), "graph " + std::to_string(made.value) + " was destroyed"),
             gone.what());
  checked->destroy_stream(t);
}
