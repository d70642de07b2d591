// SPDX-License-Identifier: Apache-2.0
// Conformance cases for graphs (ABI 1.3, docs/graphs.md): capture and replay, replay on another
// stream, what invalidates a capture and how abort recovers, default-stream work during the capture
// of a blocking and of a non-blocking stream, stream_is_capturing, fork and join
// across streams with events, an unjoined fork, a destroyed graph. A backend without graphs
// (begin_capture unsupported: any plugin older than 1.3, a CUDA or HIP driver without the graph
// entry points) skips them all with the reason it gave.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

constexpr std::uint32_t kN = 4096;
constexpr std::size_t kBytes = kN * sizeof(float);

/// begin_capture of `stream`, or Skip when the backend reports graphs unsupported.
void begin_or_skip(GpuBackend& gpu, Stream stream, CaptureMode mode = CaptureMode::relaxed) {
  try {
    gpu.begin_capture(stream, mode);
  } catch (const Error& e) {
    if (e.status() != Status::unsupported) throw;
    skip(std::string("graphs unsupported by this backend: ") + e.what());
  }
}

/// A graph destroyed when the case ends, unless the case destroyed it (release()).
class ScopedGraph {
 public:
  ScopedGraph(GpuBackend& gpu, Graph g) : gpu_(&gpu), g_(g) {}
  ~ScopedGraph() {
    if (!g_) return;
    try {
      gpu_->destroy_graph(g_);
    } catch (...) {
    }
  }
  ScopedGraph(const ScopedGraph&) = delete;
  ScopedGraph& operator=(const ScopedGraph&) = delete;
  Graph get() const noexcept { return g_; }
  Graph release() noexcept { return std::exchange(g_, Graph{}); }

 private:
  GpuBackend* gpu_;
  Graph g_;
};

std::vector<float> ramp(float start) {
  std::vector<float> v(kN);
  for (std::uint32_t i = 0; i < kN; ++i) v[i] = start + static_cast<float>(i % 97);
  return v;
}

/// The decode-loop shape: y = 0 (memset), x uploaded with copy_h2d_async from a temporary that
/// is overwritten and freed right after the capture, then y += 1x, y += 2x, y += 3x: y = 6x.
/// The expected x is returned.
std::vector<float> capture_step(GpuBackend& gpu, Stream s, DevicePtr x, DevicePtr y) {
  std::vector<float> expected = ramp(1.0f);
  gpu.op_cache().kernel(gpu, "axpy", "axpy");  // resolved before the capture
  begin_or_skip(gpu, s);
  {
    auto temporary = std::make_unique<std::vector<float>>(expected);
    gpu.memset(y, 0, kBytes, s);
    gpu.copy_h2d_async(x, temporary->data(), kBytes, s);
    for (float a : {1.0f, 2.0f, 3.0f}) launch_axpy(gpu, kN, a, x, y, s);
    std::fill(temporary->begin(), temporary->end(), -999.0f);  // replay must not see this
  }
  return expected;
}

/// y as replay must leave it: 6x, exactly (small integers).
void check_six_x(GpuBackend& gpu, const std::vector<float>& x, DevicePtr y, Stream s, int round) {
  std::vector<float> out(kN, -1.0f);
  gpu.copy_d2h_async(out.data(), y, kBytes, s);
  gpu.synchronize(s);
  for (std::uint32_t i = 0; i < kN; ++i)
    GPUPLUG_CHECK_MSG(out[i] == 6.0f * x[i], "replay " << round << ": y[" << i << "] = " << out[i]
                                                       << ", expected 6 * " << x[i]);
}

void graphs_capture_replay_hundred(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  ScopedStream s(gpu);
  DeviceBuffer x(gpu, kBytes), y(gpu, kBytes);
  const std::vector<float> expected = capture_step(gpu, s.get(), x.ptr(), y.ptr());
  GPUPLUG_CHECK(gpu.stream_is_capturing(s.get()));
  ScopedGraph g(gpu, gpu.end_capture(s.get()));
  GPUPLUG_CHECK(g.get());
  GPUPLUG_CHECK(!gpu.stream_is_capturing(s.get()));
  // Nothing ran while capturing: y still holds what a fresh memset below leaves.
  for (int round = 0; round < 100; ++round) {
    gpu.memset(y.ptr(), 0x7F, kBytes, s.get());  // a replay that does nothing leaves this
    gpu.memset(x.ptr(), 0x7F, kBytes, s.get());  // and the upload must come from the capture
    gpu.launch_graph(g.get(), s.get());
    check_six_x(gpu, expected, y.ptr(), s.get(), round);
  }
}

void graphs_replay_on_another_stream(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  ScopedStream s(gpu), other(gpu);
  DeviceBuffer x(gpu, kBytes), y(gpu, kBytes);
  const std::vector<float> expected = capture_step(gpu, s.get(), x.ptr(), y.ptr());
  ScopedGraph g(gpu, gpu.end_capture(s.get()));
  for (int round = 0; round < 3; ++round) {
    gpu.memset(y.ptr(), 0x7F, kBytes, other.get());
    gpu.launch_graph(g.get(), other.get());
    check_six_x(gpu, expected, y.ptr(), other.get(), round);
  }
}

void graphs_synchronize_invalidates_abort_recovers(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  ScopedStream s(gpu);
  DeviceBuffer y(gpu, kBytes);
  begin_or_skip(gpu, s.get());
  gpu.memset(y.ptr(), 1, kBytes, s.get());
  const Error e = GPUPLUG_CHECK_THROWS(gpu.synchronize(s.get()), Status::capture_invalidated);
  GPUPLUG_CHECK_MSG(contains(e.what(), std::to_string(s.get().value)),
                    "the error does not name the stream: " << e.what());
  // Poisoned: it still captures, and every operation on it fails the same way.
  GPUPLUG_CHECK(gpu.stream_is_capturing(s.get()));
  GPUPLUG_CHECK_THROWS(gpu.memset(y.ptr(), 2, kBytes, s.get()), Status::capture_invalidated);
  gpu.abort_capture_if_active(s.get());
  GPUPLUG_CHECK(!gpu.stream_is_capturing(s.get()));
  gpu.abort_capture_if_active(s.get());  // none active: a no-op
  // The stream runs work again.
  gpu.memset(y.ptr(), 0x3C, kBytes, s.get());
  std::vector<std::uint8_t> out(kBytes, 0);
  gpu.copy_d2h_async(out.data(), y.ptr(), kBytes, s.get());
  gpu.synchronize(s.get());
  for (std::size_t i = 0; i < kBytes; ++i)
    GPUPLUG_CHECK_MSG(out[i] == 0x3C, "byte " << i << " = " << int(out[i]) << " after the abort");
  // A poisoned capture cannot be ended into a graph; the stream is usable after that too.
  begin_or_skip(gpu, s.get());
  GPUPLUG_CHECK_THROWS(gpu.synchronize(s.get()), Status::capture_invalidated);
  GPUPLUG_CHECK_THROWS(gpu.end_capture(s.get()), Status::capture_invalidated);
  GPUPLUG_CHECK(!gpu.stream_is_capturing(s.get()));
  gpu.synchronize(s.get());
}

/// Every byte of `bytes` at `ptr` (a synchronous download on the default stream) is `want`.
void check_bytes(GpuBackend& gpu, DevicePtr ptr, std::uint8_t want, const char* what) {
  std::vector<std::uint8_t> out(kBytes, 0);
  gpu.copy_d2h(out.data(), ptr, kBytes);
  const auto bad = std::find_if(out.begin(), out.end(), [want](auto b) { return b != want; });
  GPUPLUG_CHECK_MSG(bad == out.end(), what << ": byte " << (bad - out.begin()) << " is "
                                            << int(*bad) << ", not " << int(want));
}

void graphs_default_stream_and_stream_flags(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  DeviceBuffer y(gpu, kBytes), z(gpu, kBytes);
  {
    // A blocking stream is ordered with the default stream: work there would wait for the
    // capture, so it invalidates it.
    ScopedStream b(gpu, StreamFlags::blocking);
    begin_or_skip(gpu, b.get());
    gpu.memset(y.ptr(), 0x22, kBytes, b.get());
    GPUPLUG_CHECK_THROWS(gpu.memset(z.ptr(), 0x3D, kBytes), Status::capture_invalidated);
    GPUPLUG_CHECK_THROWS(gpu.memset(y.ptr(), 0x23, kBytes, b.get()), Status::capture_invalidated);
    gpu.abort_capture_if_active(b.get());
    GPUPLUG_CHECK(!gpu.stream_is_capturing(b.get()));
  }
  {
    // A non-blocking stream is not ordered with the default stream: work there runs at once
    // and leaves the capture valid.
    require_non_blocking_streams(ctx);
    ScopedStream s(gpu, StreamFlags::non_blocking);
    begin_or_skip(gpu, s.get());
    gpu.memset(y.ptr(), 0x21, kBytes, s.get());
    gpu.memset(z.ptr(), 0x3C, kBytes);
    check_bytes(gpu, z.ptr(), 0x3C, "a default-stream memset during a non-blocking capture");
    GPUPLUG_CHECK(gpu.stream_is_capturing(s.get()));
    ScopedGraph g(gpu, gpu.end_capture(s.get()));
    gpu.launch_graph(g.get(), s.get());
    gpu.synchronize(s.get());
    check_bytes(gpu, y.ptr(), 0x21, "the graph's memset");
  }
}

void graphs_stream_is_capturing(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  ScopedStream s(gpu), other(gpu);
  GPUPLUG_CHECK(!gpu.stream_is_capturing(s.get()));
  begin_or_skip(gpu, s.get());
  GPUPLUG_CHECK(gpu.stream_is_capturing(s.get()));
  GPUPLUG_CHECK(!gpu.stream_is_capturing(other.get()));
  GPUPLUG_CHECK(!gpu.stream_is_capturing(Stream{}));
  // A second begin on the same stream is refused; the capture goes on.
  GPUPLUG_CHECK_THROWS(gpu.begin_capture(s.get()), Status::invalid_argument);
  ScopedGraph g(gpu, gpu.end_capture(s.get()));  // an empty graph is a graph
  GPUPLUG_CHECK(!gpu.stream_is_capturing(s.get()));
  gpu.launch_graph(g.get(), s.get());
  gpu.synchronize(s.get());
}

/// The origin forks `side` with an event, both do work, the origin joins it back (when `join`).
struct ForkJoin {
  ScopedStream origin, side;
  DeviceBuffer a, b;
  Event forked{}, joined{};
  explicit ForkJoin(GpuBackend& gpu) : origin(gpu), side(gpu), a(gpu, kBytes), b(gpu, kBytes) {}
};

Event event_or_skip(GpuBackend& gpu) {
  try {
    return gpu.create_event();
  } catch (const Error& e) {
    if (e.status() != Status::unsupported) throw;
    skip(std::string("events unsupported by this backend: ") + e.what());
  }
}

void graphs_fork_join(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  ForkJoin f(gpu);
  const Event e1 = event_or_skip(gpu), e2 = gpu.create_event();
  begin_or_skip(gpu, f.origin.get());
  gpu.memset(f.a.ptr(), 0x11, kBytes, f.origin.get());
  gpu.record(e1, f.origin.get());
  gpu.wait(f.side.get(), e1);  // the side stream joins the capture
  GPUPLUG_CHECK(gpu.stream_is_capturing(f.side.get()));
  gpu.copy_d2d_async(f.b.ptr(), f.a.ptr(), kBytes, f.side.get());  // after the origin's memset
  gpu.record(e2, f.side.get());
  gpu.wait(f.origin.get(), e2);  // joined back
  gpu.memset(f.a.ptr(), 0x22, kBytes, f.origin.get());  // after the side's copy
  ScopedGraph g(gpu, gpu.end_capture(f.origin.get()));
  GPUPLUG_CHECK(!gpu.stream_is_capturing(f.side.get()));
  for (int round = 0; round < 3; ++round) {
    gpu.memset(f.b.ptr(), 0, kBytes, f.origin.get());
    gpu.launch_graph(g.get(), f.origin.get());
    std::vector<std::uint8_t> out_a(kBytes), out_b(kBytes);
    gpu.copy_d2h_async(out_a.data(), f.a.ptr(), kBytes, f.origin.get());
    gpu.copy_d2h_async(out_b.data(), f.b.ptr(), kBytes, f.origin.get());
    gpu.synchronize(f.origin.get());
    for (std::size_t i = 0; i < kBytes; ++i) {
      GPUPLUG_CHECK_MSG(out_b[i] == 0x11, "round " << round << ": b[" << i << "] = "
                                                   << int(out_b[i]) << ", expected 0x11");
      GPUPLUG_CHECK_MSG(out_a[i] == 0x22, "round " << round << ": a[" << i << "] = "
                                                   << int(out_a[i]) << ", expected 0x22");
    }
  }
  gpu.destroy_event(e1);
  gpu.destroy_event(e2);
}

void graphs_unjoined_fork_fails(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  ForkJoin f(gpu);
  const Event e1 = event_or_skip(gpu);
  begin_or_skip(gpu, f.origin.get());
  gpu.record(e1, f.origin.get());
  gpu.wait(f.side.get(), e1);
  gpu.memset(f.b.ptr(), 0x11, kBytes, f.side.get());
  const Error e =
      GPUPLUG_CHECK_THROWS(gpu.end_capture(f.origin.get()), Status::capture_invalidated);
  GPUPLUG_CHECK_MSG(contains(e.what(), "stream " + std::to_string(f.side.get().value)),
                    "the error does not name the unjoined stream: " << e.what());
  GPUPLUG_CHECK(!gpu.stream_is_capturing(f.origin.get()));
  GPUPLUG_CHECK(!gpu.stream_is_capturing(f.side.get()));
  gpu.memset(f.b.ptr(), 0x5A, kBytes, f.side.get());  // both streams run work again
  gpu.synchronize(f.side.get());
  gpu.synchronize(f.origin.get());
  gpu.destroy_event(e1);
}

void graphs_destroyed_graph_is_invalid(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  ScopedStream s(gpu);
  DeviceBuffer y(gpu, kBytes);
  begin_or_skip(gpu, s.get());
  gpu.memset(y.ptr(), 1, kBytes, s.get());
  const Graph g = gpu.end_capture(s.get());
  gpu.destroy_graph(g);
  const Error e = GPUPLUG_CHECK_THROWS(gpu.launch_graph(g, s.get()), Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(e.what(), std::to_string(g.value)),
                    "the error does not name the graph: " << e.what());
  GPUPLUG_CHECK_THROWS(gpu.destroy_graph(g), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.launch_graph(Graph{}, s.get()), Status::invalid_argument);
}

const Case cases[] = {
    {"graphs_capture_replay_hundred",
     "3 axpy launches, a memset and an upload from a temporary captured, replayed 100 times",
     graphs_capture_replay_hundred},
    {"graphs_replay_on_another_stream", "a graph captured on one stream replays on another",
     graphs_replay_on_another_stream},
    {"graphs_synchronize_invalidates_abort_recovers",
     "synchronize during a capture is capture_invalidated; abort makes the stream usable again",
     graphs_synchronize_invalidates_abort_recovers},
    {"graphs_default_stream_and_stream_flags",
     "default-stream work during a capture runs when the capturing stream is non-blocking and "
     "invalidates the capture when it is blocking",
     graphs_default_stream_and_stream_flags},
    {"graphs_stream_is_capturing", "stream_is_capturing is true only while a stream captures",
     graphs_stream_is_capturing},
    {"graphs_fork_join", "a capture forks to a second stream and joins it back with events",
     graphs_fork_join},
    {"graphs_unjoined_fork_fails", "end_capture with a forked stream not joined back fails",
     graphs_unjoined_fork_fails},
    {"graphs_destroyed_graph_is_invalid",
     "launch_graph and destroy_graph of a destroyed graph are invalid_argument naming it",
     graphs_destroyed_graph_is_invalid},
};

}  // namespace

std::span<const Case> graph_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
