// SPDX-License-Identifier: Apache-2.0
// Conformance cases for events (ABI 1.1): cross-stream ordering, query, elapsed time, destroying
// a recorded event, 8 threads at once, and bad input. A backend without events (a plugin built
// against ABI 1.0) skips them all with the reason its create_event gave.
#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

/// A new event of `gpu`, or Skip when the backend reports events unsupported (the reason it
/// gave: e.g. "events are not supported by the x plugin (ABI 1.0; events need ABI 1.1)").
Event event_or_skip(GpuBackend& gpu) {
  try {
    return gpu.create_event();
  } catch (const Error& e) {
    if (e.status() != Status::unsupported) throw;
    skip(std::string("events unsupported by this backend: ") + e.what());
  }
}

/// Destroys an event when the case ends, however it ends (errors swallowed: a case that wants
/// to see destroy fail calls it itself and release()s).
class ScopedEvent {
 public:
  ScopedEvent(GpuBackend& gpu, Event e) : gpu_(&gpu), e_(e) {}
  explicit ScopedEvent(GpuBackend& gpu) : ScopedEvent(gpu, event_or_skip(gpu)) {}
  ~ScopedEvent() {
    if (!e_) return;
    try {
      gpu_->destroy_event(e_);
    } catch (...) {
    }
  }
  ScopedEvent(const ScopedEvent&) = delete;
  ScopedEvent& operator=(const ScopedEvent&) = delete;
  Event get() const noexcept { return e_; }
  Event release() noexcept { return std::exchange(e_, Event{}); }

 private:
  GpuBackend* gpu_;
  Event e_;
};

/// The long kernel the cases put before a record: a 256^3 gemm into `c` on `stream` (a few ms on
/// a CPU, long enough on a GPU for a missing wait to let a later read through).
struct LongKernel {
  static constexpr std::uint32_t n = 256;
  DeviceBuffer a, b, c;
  explicit LongKernel(GpuBackend& gpu)
      : a(to_device(gpu, random_floats(std::size_t{n} * n, -1, 1, 1))),
        b(to_device(gpu, random_floats(std::size_t{n} * n, -1, 1, 2))),
        c(gpu, std::size_t{n} * n * sizeof(float)) {}
  void launch(GpuBackend& gpu, Stream stream) {
    launch_gemm(gpu, "gemm_f32", n, n, n, a.ptr(), b.ptr(), c.ptr(), stream);
  }
};

/// Queued work that takes a while on any backend: `copies` device-to-device copies back and forth
/// between two scratch buffers on `stream`. On the host executor a launch returns when it is
/// done, queued copies do not, so this is what keeps a stream busy there; on a GPU it adds to
/// the kernel. A read on another stream that does not wait for it lands before it ends.
/// Big enough that 4 copies outlast the reading stream's start by far (measured on the host
/// executor: with 4 x 32 MiB a reader without the wait still lost the race at times, with
/// 4 x 64 MiB it never did), small enough for any device.
constexpr std::size_t kBusyBytes = std::size_t{64} << 20;

struct BusyChain {
  DeviceBuffer a, b;
  BusyChain(GpuBackend& gpu, std::size_t bytes) : a(gpu, bytes), b(gpu, bytes) {
    gpu.memset(a.ptr(), 0, bytes);
    gpu.memset(b.ptr(), 0, bytes);
  }
  void queue(GpuBackend& gpu, Stream stream, int copies) {
    for (int i = 0; i < copies; ++i) {
      if (i % 2 == 0)
        gpu.copy_d2d_async(b.ptr(), a.ptr(), a.bytes(), stream);
      else
        gpu.copy_d2d_async(a.ptr(), b.ptr(), a.bytes(), stream);
    }
  }
};

std::vector<float> iota_floats(std::size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

/// The Error must be invalid_argument, name `operation` and contain `needle` (the event).
void check_names(const Error& e, std::string_view operation, std::string_view needle) {
  GPUPLUG_CHECK_MSG(contains(e.operation(), operation) || contains(e.what(), operation),
                    "the error does not name the operation " << operation << ": " << e.what());
  GPUPLUG_CHECK_MSG(contains(e.what(), needle),
                    "the error does not name " << needle << ": " << e.what());
}

// ---- cases
// ---------------------------------------------------------------------------------------

void events_cross_stream_ordering(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  ScopedEvent e(gpu);
  ScopedStream a(gpu), b(gpu);
  constexpr std::size_t n = 1 << 20;  // 4 MiB: an async copy the host executor queues, too
  LongKernel kernel(gpu);
  const std::vector<float> x = iota_floats(n, 0.0f), y0 = iota_floats(n, 1.0f);
  DeviceBuffer dx = to_device(gpu, x);
  DeviceBuffer dy(gpu, n * sizeof(float));
  DeviceBuffer copy(gpu, n * sizeof(float));
  gpu.memset(copy.ptr(), 0, n * sizeof(float));
  gpu.synchronize();

  // Stream A: the long kernel, y = y0 (async upload) and y = 2*x + y, then a chain of queued
  // copies, and last w = 0x3F bytes. Then the record.
  DeviceBuffer dw(gpu, n * sizeof(float));
  gpu.memset(dw.ptr(), 0, n * sizeof(float));
  BusyChain busy(gpu, kBusyBytes);
  gpu.synchronize();
  kernel.launch(gpu, a.get());
  gpu.copy_h2d_async(dy.ptr(), y0.data(), n * sizeof(float), a.get());
  launch_axpy(gpu, static_cast<std::uint32_t>(n), 2.0f, dx.ptr(), dy.ptr(), a.get());
  busy.queue(gpu, a.get(), 4);
  gpu.memset(dw.ptr(), 0x3F, n * sizeof(float), a.get());
  gpu.record(e.get(), a.get());
  // Stream B: waits for the event, then reads A's results (w first: the last thing A wrote).
  gpu.wait(b.get(), e.get());
  std::vector<std::uint8_t> out_w(n * sizeof(float), 0);
  gpu.copy_d2h_async(out_w.data(), dw.ptr(), out_w.size(), b.get());
  gpu.copy_d2d_async(copy.ptr(), dy.ptr(), n * sizeof(float), b.get());
  std::vector<float> out(n, -1.0f);
  gpu.copy_d2h_async(out.data(), copy.ptr(), n * sizeof(float), b.get());
  gpu.synchronize(b.get());
  gpu.synchronize();  // A too, before any check can throw and free buffers it still uses
  const auto stale =
      std::count_if(out_w.begin(), out_w.end(), [](std::uint8_t v) { return v != 0x3F; });
  GPUPLUG_CHECK_MSG(stale == 0, "stream B read " << stale
                                                 << " bytes of w before A's memset landed: "
                                                    "the wait did not order B after A");
  for (std::size_t i = 0; i < n; ++i) {
    const float want = 2.0f * x[i] + y0[i];  // small integers: exact
    GPUPLUG_CHECK_MSG(out[i] == want, "stream B read y = " << out[i] << " at " << i << ", A wrote "
                                                           << want
                                                           << ": the wait did not order B after A");
  }
  gpu.synchronize(a.get());
}

void events_query_before_and_after_completion(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  ScopedEvent e(gpu);
  ScopedStream s(gpu);
  // Never recorded: complete, as in CUDA.
  GPUPLUG_CHECK_MSG(gpu.query(e.get()), "an event never recorded must query as complete");
  gpu.synchronize(e.get());  // returns at once
  LongKernel kernel(gpu);
  constexpr std::size_t n = 1 << 20;
  const std::vector<float> host = iota_floats(n, 3.0f);
  DeviceBuffer d(gpu, n * sizeof(float));
  kernel.launch(gpu, s.get());
  gpu.copy_h2d_async(d.ptr(), host.data(), n * sizeof(float), s.get());
  gpu.record(e.get(), s.get());
  // Before completion query may say either, but must answer without blocking or throwing.
  const bool early = gpu.query(e.get());
  gpu.synchronize(e.get());
  GPUPLUG_CHECK_MSG(gpu.query(e.get()), "query is false after synchronize(event) returned");
  // The capture's work is done: the copy landed.
  const std::vector<float> back = d.download<float>(n);
  GPUPLUG_CHECK_MSG(back == host, "synchronize(event) returned before the captured copy landed");
  if (early) ctx.note("the capture had completed before the first query");
  // Recording again replaces the capture; with nothing new queued it completes too.
  gpu.record(e.get(), s.get());
  gpu.synchronize(e.get());
  GPUPLUG_CHECK(gpu.query(e.get()));
  // Stream 0 (the legacy default stream) records and waits like the others.
  gpu.record(e.get(), Stream{});
  gpu.synchronize(e.get());
  GPUPLUG_CHECK(gpu.query(e.get()));
  gpu.synchronize(s.get());
}

void events_elapsed_ms_positive_and_ordered(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  ScopedEvent e0(gpu), e1(gpu), e2(gpu), never(gpu);
  ScopedStream s(gpu);
  LongKernel kernel(gpu);
  gpu.record(e0.get(), s.get());
  kernel.launch(gpu, s.get());
  gpu.record(e1.get(), s.get());
  kernel.launch(gpu, s.get());
  gpu.record(e2.get(), s.get());
  gpu.synchronize(e2.get());
  gpu.synchronize(e1.get());
  const float t01 = gpu.elapsed_ms(e0.get(), e1.get());
  const float t02 = gpu.elapsed_ms(e0.get(), e2.get());
  const float t12 = gpu.elapsed_ms(e1.get(), e2.get());
  ctx.note("gemm 256^3: " + std::to_string(t01) + " ms, two: " + std::to_string(t02) + " ms");
  GPUPLUG_CHECK_MSG(t01 > 0.0f, "elapsed_ms(e0, e1) is " << t01 << " around a kernel");
  GPUPLUG_CHECK_MSG(t12 > 0.0f, "elapsed_ms(e1, e2) is " << t12 << " around a kernel");
  GPUPLUG_CHECK_MSG(t02 >= t01 && t02 >= t12, "elapsed_ms not ordered: e0->e2 "
                                                  << t02 << " vs e0->e1 " << t01 << " and e1->e2 "
                                                  << t12);
  // An event never recorded has no time: invalid_argument naming it.
  const Error err =
      GPUPLUG_CHECK_THROWS(gpu.elapsed_ms(e0.get(), never.get()), Status::invalid_argument);
  check_names(err, "elapsed_ms", std::to_string(never.get().value));
  gpu.synchronize(s.get());
}

void events_destroy_recorded_not_waited(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  ScopedStream s(gpu), other(gpu);
  constexpr std::size_t n = 1 << 20;
  const std::vector<float> host = iota_floats(n, 7.0f);
  DeviceBuffer d(gpu, n * sizeof(float));
  LongKernel kernel(gpu);
  {
    ScopedEvent e(gpu);
    kernel.launch(gpu, s.get());
    gpu.copy_h2d_async(d.ptr(), host.data(), n * sizeof(float), s.get());
    gpu.record(e.get(), s.get());
    const Event gone = e.release();
    gpu.destroy_event(gone);  // recorded, not waited on, maybe still pending
    // Gone: every use is invalid_argument naming it, and destroying it again too.
    check_names(GPUPLUG_CHECK_THROWS(gpu.query(gone), Status::invalid_argument), "query",
                std::to_string(gone.value));
    check_names(GPUPLUG_CHECK_THROWS(gpu.destroy_event(gone), Status::invalid_argument), "destroy",
                std::to_string(gone.value));
  }
  // The work it was recorded after completes normally.
  gpu.synchronize(s.get());
  GPUPLUG_CHECK_MSG(d.download<float>(n) == host, "the copy before a destroyed event was lost");
  // A wait queued before the destroy still orders its stream.
  ScopedEvent e2(gpu);
  BusyChain busy(gpu, kBusyBytes);
  kernel.launch(gpu, s.get());
  busy.queue(gpu, s.get(), 4);
  gpu.memset(d.ptr(), 0x3F, n * sizeof(float), s.get());
  gpu.record(e2.get(), s.get());
  gpu.wait(other.get(), e2.get());
  gpu.destroy_event(e2.release());
  std::vector<std::uint8_t> out(n * sizeof(float));
  gpu.copy_d2h_async(out.data(), d.ptr(), out.size(), other.get());
  gpu.synchronize(other.get());
  gpu.synchronize();  // s too, before a check can throw and free buffers it still uses
  GPUPLUG_CHECK_MSG(std::all_of(out.begin(), out.end(), [](std::uint8_t v) { return v == 0x3F; }),
                    "a wait on an event destroyed after the wait did not order the stream");
  gpu.synchronize(s.get());
}

void events_eight_threads(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  ScopedEvent shared(gpu);  // recorded and waited on by every thread at once
  constexpr unsigned threads = 8;
  constexpr int rounds = 20;
  constexpr std::size_t n = 4096;
  std::atomic<unsigned> ready{0};
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < threads) std::this_thread::yield();
      try {
        ScopedStream a(gpu), b(gpu);
        ScopedEvent own(gpu, gpu.create_event());
        DeviceBuffer d(gpu, n);
        BusyChain busy(gpu, 256 * 1024);
        std::vector<std::uint8_t> out(n);
        for (int r = 0; r < rounds; ++r) {
          const auto value = static_cast<std::uint8_t>(t * 16 + r);
          busy.queue(gpu, a.get(), 2);
          gpu.memset(d.ptr(), value, n, a.get());
          gpu.record(own.get(), a.get());
          gpu.record(shared.get(), a.get());
          gpu.wait(b.get(), own.get());
          gpu.wait(b.get(), shared.get());
          gpu.copy_d2h_async(out.data(), d.ptr(), n, b.get());
          gpu.synchronize(b.get());
          (void)gpu.query(shared.get());
          GPUPLUG_CHECK_MSG(
              std::all_of(out.begin(), out.end(), [&](std::uint8_t v) { return v == value; }),
              "thread " << t << " round " << r << ": stream B read before A's memset landed");
        }
        gpu.synchronize(own.get());
        gpu.synchronize(a.get());
      } catch (...) {
        std::lock_guard lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  if (first) std::rethrow_exception(first);
  gpu.synchronize(shared.get());
  GPUPLUG_CHECK(gpu.query(shared.get()));
}

void events_streams_destroyed_after_waits(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  constexpr int rounds = 200;
  constexpr std::size_t n = 4096;
  DeviceBuffer d(gpu, n), small(gpu, 256);
  std::vector<std::uint8_t> out(n);
  // Another thread submits all along, so that the backend finds each round's work completed
  // (and lets its streams go) at any moment, not only when the next round starts.
  std::atomic<bool> stop{false};
  std::exception_ptr fed;
  std::thread feeder([&] {
    try {
      ScopedStream c(gpu);
      while (!stop.load()) gpu.memset(small.ptr(), 0, 256, c.get());
      gpu.synchronize(c.get());
    } catch (...) {
      fed = std::current_exception();
    }
  });
  try {
    for (int r = 0; r < rounds; ++r) {
      const auto value = static_cast<std::uint8_t>(r + 1);
      ScopedStream a(gpu), b(gpu);
      ScopedEvent on_a(gpu), on_b(gpu);
      gpu.memset(d.ptr(), value, n, a.get());
      gpu.record(on_a.get(), a.get());
      gpu.wait(a.get(), on_a.get());  // a stream waiting on its own event
      gpu.wait(b.get(), on_a.get());
      gpu.copy_d2h_async(out.data(), d.ptr(), n, b.get());
      gpu.record(on_b.get(), b.get());
      gpu.synchronize(b.get());
      GPUPLUG_CHECK_MSG(
          std::all_of(out.begin(), out.end(), [&](std::uint8_t v) { return v == value; }),
          "round " << r << ": stream B read before A's memset landed");
      // Each waits on the other's event and both go with those waits pending: the streams,
      // their events and the driver's objects behind them are freed (the sanitizer runs see it).
      gpu.wait(a.get(), on_b.get());
      gpu.wait(b.get(), on_a.get());
    }
  } catch (...) {
    stop = true;
    feeder.join();
    throw;
  }
  stop = true;
  feeder.join();
  if (fed) std::rethrow_exception(fed);
  gpu.synchronize();
}

void events_bad_input(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  ScopedEvent mine(gpu);
  ScopedStream s(gpu);
  // An event of another backend (same plugin, same device: the most plausible mix-up).
  std::shared_ptr<GpuBackend> other = ctx.make_backend();
  ScopedEvent foreign(*other);
  const std::string f = std::to_string(foreign.get().value);
  check_names(GPUPLUG_CHECK_THROWS(gpu.record(foreign.get(), s.get()), Status::invalid_argument),
              "record", f);
  check_names(GPUPLUG_CHECK_THROWS(gpu.wait(s.get(), foreign.get()), Status::invalid_argument),
              "wait", f);
  check_names(GPUPLUG_CHECK_THROWS(gpu.synchronize(foreign.get()), Status::invalid_argument),
              "synchronize", f);
  check_names(GPUPLUG_CHECK_THROWS(gpu.query(foreign.get()), Status::invalid_argument), "query", f);
  check_names(GPUPLUG_CHECK_THROWS(gpu.destroy_event(foreign.get()), Status::invalid_argument),
              "destroy", f);
  gpu.record(mine.get(), s.get());
  check_names(
      GPUPLUG_CHECK_THROWS(gpu.elapsed_ms(mine.get(), foreign.get()), Status::invalid_argument),
      "elapsed_ms", f);
  // The other backend still owns a working event.
  other->record(foreign.get(), Stream{});
  other->synchronize(foreign.get());
  // A value never created, and the null event.
  const Event never{0x5EEDF00Dull};
  check_names(GPUPLUG_CHECK_THROWS(gpu.record(never, s.get()), Status::invalid_argument), "record",
              std::to_string(never.value));
  check_names(GPUPLUG_CHECK_THROWS(gpu.query(Event{}), Status::invalid_argument), "query",
              "null event");
  // A destroyed event.
  const Event gone = gpu.create_event();
  gpu.destroy_event(gone);
  check_names(GPUPLUG_CHECK_THROWS(gpu.wait(s.get(), gone), Status::invalid_argument), "wait",
              std::to_string(gone.value));
  check_names(GPUPLUG_CHECK_THROWS(gpu.synchronize(gone), Status::invalid_argument), "synchronize",
              std::to_string(gone.value));
  // A good event on a stream that is not this backend's: the stream is named.
  check_names(
      GPUPLUG_CHECK_THROWS(gpu.record(mine.get(), Stream{0xBADull}), Status::invalid_argument),
      "record", std::to_string(0xBAD));
  // After all that, the backend's own event still works.
  gpu.record(mine.get(), s.get());
  gpu.synchronize(mine.get());
  GPUPLUG_CHECK(gpu.query(mine.get()));
}

const Case cases[] = {
    {"events_cross_stream_ordering",
     "stream B waits on an event recorded on A after a long kernel; B's read sees A's write",
     events_cross_stream_ordering},
    {"events_query_before_and_after_completion",
     "query never blocks, is true once synchronize(event) returns and for an unrecorded event",
     events_query_before_and_after_completion},
    {"events_elapsed_ms_positive_and_ordered",
     "elapsed_ms around kernels is positive and ordered; an unrecorded event is refused",
     events_elapsed_ms_positive_and_ordered},
    {"events_destroy_recorded_not_waited",
     "destroying a recorded, unwaited event leaves its work and earlier waits intact",
     events_destroy_recorded_not_waited},
    {"events_eight_threads",
     "8 threads record and wait (own and one shared event) at once; every read ordered",
     events_eight_threads},
    {"events_streams_destroyed_after_waits",
     "streams destroyed right after their work and with waits on each other's events pending",
     events_streams_destroyed_after_waits},
    {"events_bad_input",
     "foreign, destroyed, never-created and null events are invalid_argument naming the event",
     events_bad_input},
};

}  // namespace

std::span<const Case> event_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
