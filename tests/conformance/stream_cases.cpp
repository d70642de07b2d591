// SPDX-License-Identifier: Apache-2.0
// Conformance cases for stream semantics (blocking and non-blocking streams), made independent of
// timing.
//
// How ordering is checked without a race: the "gate" kernel of module "sync" (docs/kernels.md)
// holds a stream busy until the case releases it through managed memory. A case starts a gate
// on stream A and waits until it runs, then issues the operation under test from a second thread,
// waits until that call returned or a grace period passed, and only then releases the gate. A
// correct plugin's outcome never depends on the grace (an operation that must wait for the gate
// either is queued, and returns, or blocks until the release); a plugin that does the operation
// at once is caught whenever its call returns within the grace, which it does at once.
// An operation issued after the gate was seen running is after the gate in submission order:
// the launch is certainly in the stream by then, whatever thread the plugin runs it on.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <thread>

#include "gpuplug/support/text.hpp"
#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

using namespace std::chrono_literals;

// How long a case lets the operation under test run before it releases the gate. A broken
// plugin that does the operation at once returns well within it; a correct one is right either
// way, so the value trades nothing but the time of the cases (they wait it out where the
// operation blocks until the release, as a synchronous copy does).
constexpr auto kGrace = 200ms;
// How long a launched gate may take to be seen running: far beyond any queueing delay.
constexpr auto kStartLimit = 10s;
constexpr std::uint32_t kGateTimedOut = 0x71D;  // flags[2] of a gate that gave up waiting

constexpr std::uint8_t kGateValue = 0x11;
constexpr std::size_t kBytes = 4096;

/// A function run on a thread of its own; join() rethrows what it threw.
class Background {
 public:
  explicit Background(std::function<void()> body)
      : thread_([this, body = std::move(body)] {
          try {
            body();
          } catch (...) {
            error_ = std::current_exception();
          }
          done_.store(true);
        }) {}
  ~Background() {
    if (thread_.joinable()) thread_.join();
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  bool done() const noexcept { return done_.load(); }
  /// The body threw (meaningful once done()).
  bool failed() const noexcept { return done() && error_ != nullptr; }
  /// Waits until the body returned or `limit` passed; true when it returned.
  bool wait_for(std::chrono::milliseconds limit) const {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(1ms);
    return done();
  }
  void join() {
    thread_.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::atomic<bool> done_{false};
  std::exception_ptr error_;
  std::thread thread_;  // last: starts once the members it uses exist
};

/// Skips the case when this backend cannot run a gate, naming what is missing.
void require_gate(GpuBackend& gpu) {
  const DeviceInfo info = gpu.device_info();
  if (!info.managed_memory || !info.concurrent_managed_access) {
    skip(
        "the gate kernel's flags live in managed memory the host touches while the kernel runs, "
        "and this device has no concurrent managed access");
  }
  if (!gpu.has_module("sync")) {
    skip("no kernel module \"sync\" (the gate kernel, docs/kernels.md) for this plugin");
  }
}

/// The gate kernel on one stream: writes `value` to dst[0, bytes) once released.
class Gate {
 public:
  Gate(GpuBackend& gpu, Stream stream, DevicePtr dst, std::size_t bytes)
      : flags_(DeviceBuffer::managed(gpu, 4 * sizeof(std::uint32_t), "conformance_gate")) {
    const std::uint32_t zero[4] = {};
    gpu.copy_h2d(flags_.ptr(), zero, sizeof zero);
    const KernelHandle f = gpu.op_cache().kernel(gpu, "sync", "gate");
    const std::uint64_t flags = flags_.ptr().value;
    const std::uint64_t target = dst.value;
    const std::uint64_t count = bytes;
    // The host plugin runs a launch on the calling thread, so the launch has a thread of its own.
    launcher_.emplace([&gpu, f, stream, flags, target, count] {
      gpu.launch_args(f, Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, stream, flags, target, kGateValue, count);
    });
    // A GPU launch returns before the kernel starts, so only the time limit ends the wait; a
    // launch that failed says why at once.
    const auto end = std::chrono::steady_clock::now() + kStartLimit;
    while (flag(0) == 0) {
      const bool returned = launcher_->done();
      if (launcher_->failed() || std::chrono::steady_clock::now() > end) {
        release();
        launcher_->join();  // rethrows the launch's own error
        fail("the gate kernel launched on stream " + support::hex(stream.value) +
             " did not start within 10 s" + (returned ? " although its launch had returned" : "") +
             ": launched work must start without a synchronize");
      }
      std::this_thread::sleep_for(100us);
    }
  }
  // A failed case must not leave the kernel waiting: released here, then launcher_ is joined
  // before flags_ is freed (members go in reverse order).
  ~Gate() { release(); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  void release() { std::atomic_ref<std::uint32_t>(word(1)).store(1); }
  /// Joins the launching thread, rethrowing what its launch threw.
  void join() {
    launcher_->join();
    launcher_.reset();
  }
  /// The device has finished the gate (after a synchronize that covers it).
  void check_released() {
    GPUPLUG_CHECK_MSG(flag(2) != kGateTimedOut,
                      "the gate kernel timed out waiting for its release (10 s)");
  }

 private:
  std::uint32_t& word(int i) {
    return reinterpret_cast<std::uint32_t*>(static_cast<std::uintptr_t>(flags_.ptr().value))[i];
  }
  std::uint32_t flag(int i) { return std::atomic_ref<std::uint32_t>(word(i)).load(); }

  DeviceBuffer flags_;
  std::optional<Background> launcher_;
};

/// Starts a gate on `stream`, runs `op` on another thread, releases the gate when `op` returned
/// or the grace passed, then joins both (rethrowing their errors) and synchronizes the device.
void behind_gate(GpuBackend& gpu, Stream stream, DevicePtr dst, const std::function<void()>& op) {
  Gate gate(gpu, stream, dst, kBytes);
  {
    Background issuer(op);
    issuer.wait_for(std::chrono::duration_cast<std::chrono::milliseconds>(kGrace));
    gate.release();
    issuer.join();
  }
  gate.join();
  gpu.synchronize();
  gate.check_released();
}

/// The first index of `bytes` that is not `want`, or bytes.size().
std::size_t first_not(const std::vector<std::uint8_t>& bytes, std::uint8_t want) {
  return static_cast<std::size_t>(
      std::find_if(bytes.begin(), bytes.end(), [want](std::uint8_t b) { return b != want; }) -
      bytes.begin());
}

std::string byte_text(std::uint8_t b) { return support::hex(b); }

void memset_waits_for_its_stream(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  require_gate(gpu);
  DeviceBuffer dst(gpu, kBytes);
  gpu.memset(dst.ptr(), 0, kBytes);
  const Stream a = gpu.create_stream();
  behind_gate(gpu, a, dst.ptr(), [&] { gpu.memset(dst.ptr(), 0x22, kBytes, a); });
  gpu.destroy_stream(a);
  const auto out = dst.download<std::uint8_t>(kBytes);
  const std::size_t bad = first_not(out, 0x22);
  GPUPLUG_CHECK_MSG(bad == out.size(),
                    "memset on stream A ran before the kernel queued before it on A: memset "
                    "ignores its stream (byte "
                        << bad << " is " << byte_text(out[bad])
                        << ", the kernel's value; the memset's is 0x22)");
}

void stream_destroy_waits_for_its_work(Context& ctx) {
  // The gate writes managed memory, which the host reads directly once destroy_stream returned:
  // no later call on the device may order the read after the stream's work.
  GpuBackend& gpu = ctx.backend();
  require_gate(gpu);
  DeviceBuffer dst = DeviceBuffer::managed(gpu, kBytes, "conformance_destroyed_stream");
  gpu.memset(dst.ptr(), 0, kBytes);
  gpu.synchronize();
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(
      static_cast<std::uintptr_t>(dst.ptr().value));
  std::vector<std::uint8_t> seen;
  const Stream a = gpu.create_stream();
  behind_gate(gpu, a, dst.ptr(), [&] {
    gpu.destroy_stream(a);
    seen.assign(bytes, bytes + kBytes);
  });
  const std::size_t bad = first_not(seen, kGateValue);
  GPUPLUG_CHECK_MSG(bad == seen.size(),
                    "destroy_stream returned while the kernel queued on the stream had not run: "
                    "it must wait for the stream's work (byte "
                        << bad << " is " << byte_text(seen[bad]) << ", not the kernel's "
                        << byte_text(kGateValue) << ")");
}

void async_copies_wait_for_their_stream(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  require_gate(gpu);
  DeviceBuffer dst(gpu, kBytes), copy(gpu, kBytes);
  gpu.memset(dst.ptr(), 0, kBytes);
  gpu.memset(copy.ptr(), 0, kBytes);
  const std::vector<std::uint8_t> fresh(kBytes, 0x33);
  std::vector<std::uint8_t> seen(kBytes, 0);
  const Stream a = gpu.create_stream();
  // In stream order: read what the kernel wrote, overwrite it, copy the new bytes on device.
  behind_gate(gpu, a, dst.ptr(), [&] {
    gpu.copy_d2h_async(seen.data(), dst.ptr(), kBytes, a);
    gpu.copy_h2d_async(dst.ptr(), fresh.data(), kBytes, a);
    gpu.copy_d2d_async(copy.ptr(), dst.ptr(), kBytes, a);
  });
  gpu.destroy_stream(a);
  std::size_t bad = first_not(seen, kGateValue);
  GPUPLUG_CHECK_MSG(bad == seen.size(),
                    "copy_d2h_async on stream A ran before the kernel queued before it on A: "
                    "async copies ignore their stream (byte "
                        << bad << " read " << byte_text(seen[bad]) << ", not the kernel's "
                        << byte_text(kGateValue) << ")");
  const auto out = dst.download<std::uint8_t>(kBytes);
  bad = first_not(out, 0x33);
  GPUPLUG_CHECK_MSG(bad == out.size(),
                    "copy_h2d_async on stream A ran before the kernel queued before it on A: "
                    "async copies ignore their stream (byte "
                        << bad << " is " << byte_text(out[bad]) << ", not the copy's 0x33)");
  const auto copied = copy.download<std::uint8_t>(kBytes);
  bad = first_not(copied, 0x33);
  GPUPLUG_CHECK_MSG(bad == copied.size(),
                    "copy_d2d_async on stream A did not run after the copy queued before it on A "
                    "(byte "
                        << bad << " is " << byte_text(copied[bad]) << ", expected 0x33)");
}

// The seed's contract, which engines rely on when they upload a temporary: the source of
// copy_h2d_async may be overwritten and freed as soon as the call returns, even while the copy
// still waits behind other work on its stream.
void async_upload_source_is_free_at_return(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  require_gate(gpu);
  DeviceBuffer staged(gpu, kBytes), retained(gpu, kBytes);
  const std::vector<std::uint8_t> kept(kBytes, 0x5a);
  const Stream a = gpu.create_stream();
  behind_gate(gpu, a, staged.ptr(), [&] {
    auto temporary = std::make_unique<std::vector<std::uint8_t>>(kBytes, 0x44);
    gpu.copy_h2d_async(staged.ptr(), temporary->data(), kBytes, a);
    std::fill(temporary->begin(), temporary->end(), 0x55);
    temporary.reset();  // freed before the stream reaches the copy
    gpu.copy_h2d_async_retained(retained.ptr(), kept.data(), kBytes, a);
  });
  gpu.destroy_stream(a);
  const auto out = staged.download<std::uint8_t>(kBytes);
  std::size_t bad = first_not(out, 0x44);
  GPUPLUG_CHECK_MSG(bad == out.size(),
                    "copy_h2d_async read its source after it returned: byte "
                        << bad << " is " << byte_text(out[bad])
                        << ", not the 0x44 the source held at the call (0x55 was written over "
                           "it, then it was freed)");
  const auto kept_out = retained.download<std::uint8_t>(kBytes);
  bad = first_not(kept_out, 0x5a);
  GPUPLUG_CHECK_MSG(bad == kept_out.size(), "copy_h2d_async_retained of a kept source: byte "
                                                << bad << " is " << byte_text(kept_out[bad])
                                                << ", not 0x5a");
}

void default_stream_waits_for_other_streams(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  require_gate(gpu);
  DeviceBuffer dst(gpu, kBytes);
  gpu.memset(dst.ptr(), 0, kBytes);
  const Stream a = gpu.create_stream(StreamFlags::blocking);  // ordered with the default stream
  behind_gate(gpu, a, dst.ptr(), [&] { gpu.memset(dst.ptr(), 0x44, kBytes, Stream{}); });
  gpu.destroy_stream(a);
  const auto out = dst.download<std::uint8_t>(kBytes);
  const std::size_t bad = first_not(out, 0x44);
  GPUPLUG_CHECK_MSG(bad == out.size(),
                    "memset on the default stream ran before the kernel queued earlier on stream "
                    "A: the default stream is not ordered with other streams (legacy default "
                    "stream semantics; byte "
                        << bad << " is " << byte_text(out[bad]) << ", the kernel's value)");
}

// The seed's streams, and create_stream()'s: not ordered with the default stream. A memset and a
// synchronous copy there run while a kernel still holds the non-blocking stream. The gate is
// released only once they returned (or after the start limit, when a broken plugin waits), so a
// correct plugin passes whatever the timing.
void default_stream_skips_non_blocking_streams(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  require_gate(gpu);
  require_non_blocking_streams(ctx);
  DeviceBuffer gated(gpu, kBytes), other(gpu, kBytes);
  gpu.memset(gated.ptr(), 0, kBytes);
  gpu.memset(other.ptr(), 0, kBytes);
  std::vector<std::uint8_t> seen(kBytes, 0xEE), other_seen(kBytes, 0);
  const Stream a = gpu.create_stream(StreamFlags::non_blocking);
  bool returned = false;
  {
    Gate gate(gpu, a, gated.ptr(), kBytes);
    Background issuer([&] {
      gpu.memset(other.ptr(), 0x44, kBytes, Stream{});
      gpu.copy_d2h(seen.data(), gated.ptr(), kBytes);
      gpu.copy_d2h(other_seen.data(), other.ptr(), kBytes);
    });
    returned = issuer.wait_for(std::chrono::duration_cast<std::chrono::milliseconds>(kStartLimit));
    gate.release();
    issuer.join();
    gate.join();
    gpu.synchronize();
    gate.check_released();
  }
  gpu.destroy_stream(a);
  GPUPLUG_CHECK_MSG(returned, "a memset and a copy_d2h on the default stream waited for a kernel "
                              "on non-blocking stream A (10 s): the default stream must not be "
                              "ordered with a non-blocking stream");
  std::size_t bad = first_not(seen, 0);
  GPUPLUG_CHECK_MSG(bad == seen.size(),
                    "copy_d2h on the default stream read what the kernel on non-blocking stream "
                    "A wrote after its release: it waited for A (byte "
                        << bad << " read " << byte_text(seen[bad]) << ", not 0x00)");
  bad = first_not(other_seen, 0x44);
  GPUPLUG_CHECK_MSG(bad == other_seen.size(), "the default-stream memset: byte "
                                                  << bad << " is " << byte_text(other_seen[bad])
                                                  << ", not 0x44");
}

void sync_copy_waits_for_queued_work(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  require_gate(gpu);
  DeviceBuffer dst(gpu, kBytes);
  gpu.memset(dst.ptr(), 0, kBytes);
  std::vector<std::uint8_t> seen(kBytes, 0);
  const Stream a = gpu.create_stream(StreamFlags::blocking);  // ordered with the default stream
  // copy_d2h blocks until the gate is released (after the grace) when it is right.
  behind_gate(gpu, a, dst.ptr(), [&] { gpu.copy_d2h(seen.data(), dst.ptr(), kBytes); });
  gpu.destroy_stream(a);
  const std::size_t bad = first_not(seen, kGateValue);
  GPUPLUG_CHECK_MSG(bad == seen.size(),
                    "copy_d2h returned before the kernel queued on stream A had finished: a "
                    "synchronous copy ignores queued work (it must wait for every stream, as on "
                    "the legacy default stream; byte "
                        << bad << " read " << byte_text(seen[bad]) << ", not the kernel's "
                        << byte_text(kGateValue) << ")");
}

/// Runs `op`, which must throw invalid_argument because it names `stream` (`kind`: "never
/// created", "destroyed"); fails naming the operation and the stream otherwise.
void expect_refused(std::string_view op, std::string_view kind, Stream stream,
                    const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    GPUPLUG_CHECK_MSG(e.status() == Status::invalid_argument,
                      op << " on a " << kind << " stream " << support::hex(stream.value)
                         << " failed with " << to_string(e.status())
                         << ", not invalid_argument: " << e.what());
    return;
  }
  fail(std::string(op) + " on a " + std::string(kind) + " stream " + support::hex(stream.value) +
       " was accepted: work on an unknown or destroyed stream must be invalid_argument, never "
       "run on some other stream");
}

void unknown_and_destroyed_streams_refused(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  constexpr std::uint32_t n = 256;
  const std::vector<float> ones(n, 1.0f);
  DeviceBuffer x = to_device(gpu, ones);
  DeviceBuffer y = to_device(gpu, ones);
  DeviceBuffer z(gpu, n * sizeof(float));
  std::vector<float> host(n, 5.0f);
  const KernelHandle axpy = gpu.op_cache().kernel(gpu, "axpy", "axpy");
  std::optional<Event> event;
  try {
    event = gpu.create_event();
  } catch (const Error& e) {
    if (e.status() != Status::unsupported) throw;
    ctx.note("events unsupported: record and wait not checked");
  }

  const Stream destroyed = gpu.create_stream();
  gpu.destroy_stream(destroyed);
  // Far from any value a plugin hands out, and not the destroyed one.
  const Stream never{destroyed.value ^ 0x5EED000000000000ull};
  for (const auto& [kind, s] :
       {std::pair{"never created", never}, std::pair{"destroyed", destroyed}}) {
    expect_refused("launch", kind, s, [&] {
      gpu.launch_args(axpy, Dim3{1, 1, 1}, Dim3{256, 1, 1}, 0, s, n, 2.0f, x.ptr().value,
                      y.ptr().value);
    });
    expect_refused("copy_h2d_async", kind, s,
                   [&] { gpu.copy_h2d_async(z.ptr(), host.data(), n * sizeof(float), s); });
    expect_refused("copy_d2h_async", kind, s,
                   [&] { gpu.copy_d2h_async(host.data(), y.ptr(), n * sizeof(float), s); });
    expect_refused("copy_d2d_async", kind, s,
                   [&] { gpu.copy_d2d_async(z.ptr(), y.ptr(), n * sizeof(float), s); });
    expect_refused("memset", kind, s, [&] { gpu.memset(y.ptr(), 0, n * sizeof(float), s); });
    expect_refused("synchronize(stream)", kind, s, [&] { gpu.synchronize(s); });
    if (event) {
      expect_refused("record", kind, s, [&] { gpu.record(*event, s); });
      expect_refused("wait", kind, s, [&] { gpu.wait(s, *event); });
    }
  }
  if (event) gpu.destroy_event(*event);
  gpu.synchronize();
  // Nothing refused ran: y is still ones (no axpy, no memset), the host buffer untouched.
  const auto after = y.download<float>(n);
  GPUPLUG_CHECK_MSG(after == ones, "a refused launch or memset on a bad stream changed y");
  GPUPLUG_CHECK_MSG(std::all_of(host.begin(), host.end(), [](float v) { return v == 5.0f; }),
                    "a refused copy_d2h_async on a bad stream wrote the host buffer");
}

const Case cases[] = {
    {"memset_waits_for_its_stream",
     "a memset on stream A runs after the kernel queued before it on A (gate kernel, no timing)",
     memset_waits_for_its_stream},
    {"stream_destroy_waits_for_its_work",
     "destroy_stream returns once the kernel queued on the stream has run (gate kernel, no "
     "timing)",
     stream_destroy_waits_for_its_work},
    {"async_copies_wait_for_their_stream",
     "copy_{d2h,h2d,d2d}_async on stream A run after the kernel queued before them, in order",
     async_copies_wait_for_their_stream},
    {"async_upload_source_is_free_at_return",
     "copy_h2d_async's source may be overwritten and freed as soon as the call returns, while the "
     "copy still waits on its stream; copy_h2d_async_retained copies a kept source",
     async_upload_source_is_free_at_return},
    {"default_stream_waits_for_other_streams",
     "work on the default stream runs after the work queued earlier on other streams (legacy "
     "default stream)",
     default_stream_waits_for_other_streams},
    {"default_stream_skips_non_blocking_streams",
     "a memset and a synchronous copy on the default stream run while a kernel holds a "
     "non-blocking stream (create_stream()'s): they are not ordered with it",
     default_stream_skips_non_blocking_streams},
    {"sync_copy_waits_for_queued_work",
     "a synchronous copy_d2h waits for a kernel still running on another stream",
     sync_copy_waits_for_queued_work},
    {"unknown_and_destroyed_streams_refused",
     "launch, async copies, memset, synchronize, record and wait on a never-created or destroyed "
     "stream are invalid_argument and do nothing",
     unknown_and_destroyed_streams_refused},
};

}  // namespace

std::span<const Case> stream_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
