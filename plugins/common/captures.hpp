// SPDX-License-Identifier: Apache-2.0
// Captures: stream capture for a plugin's graphs (ABI 1.3): which streams capture, what they
// recorded, what invalidates a capture, and the live graphs. Vendor-neutral: a plugin whose
// driver has no graphs of its own (host, Vulkan) records its operations here instead of running
// them, and replays a graph by running the recorded operations in order.
#pragma once

#include <gpuplug/abi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

// Built only against an ABI with graphs (1.3 and later).
#if GPUPLUG_ABI_VERSION_MINOR >= 3
namespace gpuplug::sdk {

/// One recorded operation. Copies and fills name their memory as it was given (a vendor whose
/// device pointers are integers casts them); a staged copy (copy_h2d_async) owns the bytes its
/// source held at capture. A launch names the vendor's kernel (`kernel`, opaque here: what the
/// vendor needs to run it again) and owns a copy of its argument bytes (`args`, laid out one
/// after another, `arg_sizes` long each, or as the vendor packed them).
struct CapturedOp {
  enum class Kind { copy_h2d, copy_d2h, copy_d2d, fill, launch } kind = Kind::copy_d2d;
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
  std::uint8_t value = 0;
  std::shared_ptr<const std::byte[]> staged = {};  // copy: owns src when it was staged
  const void* kernel = nullptr;                    // launch
  std::string name;                                // launch: "module::function"
  gpuplug_dim3_t grid{}, block{};
  std::uint32_t shared_bytes = 0;
  std::vector<std::byte> args;
  std::vector<std::uint32_t> arg_sizes;

  /// A copy of `bytes` from `src` to `dst`; `stage`: the op keeps a copy of the bytes `src`
  /// holds now and replays from it (copy_h2d_async, whose source is free at return).
  static CapturedOp copy(Kind kind, void* dst, const void* src, std::size_t bytes, bool stage);
  /// A fill of `bytes` at `dst` with `value`.
  static CapturedOp fill(void* dst, std::uint8_t value, std::size_t bytes);
};

/// An instantiated graph: the operations in recording order, which is an order valid for every
/// dependency the capture saw (a stream's own order, and each event wait after its record).
struct GraphData {
  std::vector<CapturedOp> ops;
};

/// The captures of one device and the graphs they made.
///
/// Fast path: `any()` is one relaxed atomic load, false whenever no stream of the device
/// captures; the copy, memset, launch and event paths call the rest only when it is true.
///
/// A capture has an origin stream (begin_capture's) and the streams that joined it by waiting on
/// an event recorded in it (forks). While a capture is poisoned (`poison`), every operation on
/// its streams fails CAPTURE_INVALIDATED with the reason, until abort or end.
///
/// Thread-safety: every member may be called concurrently (one mutex; the fast path takes none).
/// Errors are sdk::Failure: INVALID_ARGUMENT for misuse (a stream that captures already, end on a
/// stream that began no capture, an unknown graph), CAPTURE_INVALIDATED as abi.h says.
class Captures {
 public:
  bool any() const noexcept { return active_.load(std::memory_order_relaxed) != 0; }

  /// `blocking`: the stream is ordered with stream 0 (it was not made non-blocking), so that
  /// work on stream 0 would wait for the capture and invalidates it; a capture of non-blocking
  /// streams only is not affected by stream 0.
  void begin(std::uint64_t stream, std::int32_t mode, bool blocking);
  /// Ends the capture `stream` began; the graph's value (never 0), or CAPTURE_INVALIDATED.
  std::uint64_t end(std::uint64_t stream);
  /// Discards the capture `stream` is part of (its origin's); nothing when none.
  void abort(std::uint64_t stream) noexcept;
  bool is_capturing(std::uint64_t stream) const;

  /// Where work queued on `stream` goes while any() is true: false to run it now; true when it
  /// was recorded into the stream's capture (`op` is then moved from). Work on stream 0
  /// invalidates every active capture with a blocking member and fails; so does any work on a
  /// poisoned capture.
  /// `make` builds the operation (only called when the stream captures; it may throw, e.g. the
  /// launch of a kernel without `<func>_args`, which then poisons the capture).
  template <class Make>
  bool record(std::uint64_t stream, const char* op, Make&& make) {
    std::lock_guard lock(mutex_);
    Capture* c = capture_for_work(stream, op);
    if (c == nullptr) return false;
    try {
      c->ops.push_back(make());
    } catch (...) {
      poison_current(*c);
      throw;
    }
    return true;
  }
  /// The operations of a graph launched on a capturing stream become part of its capture.
  bool record_graph(std::uint64_t stream, const GraphData& graph);

  /// A synchronize of `stream` (0: the legacy default stream) while it or, for 0, any stream
  /// captures: poisons those captures and fails. Nothing when none is affected.
  void check_synchronize(std::uint64_t stream, const char* op);
  /// A device-wide synchronize while any stream captures: poisons every capture and fails.
  void check_device_synchronize(const char* op);
  /// alloc / free of the device while captures are active: refused by a global capture (from any
  /// thread) and by a thread-local capture begun on this thread, which it poisons.
  void check_unsafe_call(const char* op);

  /// Event record on a capturing stream: recorded in its capture (true). Elsewhere the event
  /// leaves any capture it was recorded in before (false: record it now).
  bool record_event(std::uint64_t event, std::uint64_t stream);
  /// Event wait: a stream that waits on an event recorded in a capture joins it (a fork; the
  /// origin waiting on an event of a fork joins the fork back); true when handled here. A
  /// capturing stream waiting on an event recorded outside its capture fails (it would cross the
  /// capture's boundary) and poisons the capture.
  /// `blocking` is the waiting stream's, as for begin.
  bool wait_event(std::uint64_t stream, std::uint64_t event, bool blocking);
  /// The stream goes: a capture it began is discarded; a capture it joined is poisoned.
  void forget_stream(std::uint64_t stream) noexcept;

  /// The live graph's data, kept alive by the caller for as long as it replays it.
  std::shared_ptr<const GraphData> graph(std::uint64_t graph) const;
  void destroy_graph(std::uint64_t graph);

 private:
  struct Capture {
    std::uint64_t origin = 0;
    std::int32_t mode = GPUPLUG_CAPTURE_MODE_RELAXED;
    std::thread::id thread;
    std::string poisoned;                // why it was invalidated; "" while valid
    std::vector<CapturedOp> ops;
    std::set<std::uint64_t> members;     // origin and forks
    std::set<std::uint64_t> blocking;    // the members ordered with stream 0
    std::set<std::uint64_t> unjoined;    // forks not joined back yet
    std::map<std::uint64_t, std::uint64_t> events;  // event recorded in it -> its stream
  };
  /// The capture `stream` is part of (null: none; then work runs), or the failure (stream 0
  /// while a capture with a blocking member is active, a poisoned capture). Caller holds mutex_.
  Capture* capture_for_work(std::uint64_t stream, const char* op);
  [[noreturn]] void poison_and_fail(Capture& c, std::string why);
  void poison_current(Capture& c) noexcept;  // the exception in flight poisons `c`
  void remove(const std::shared_ptr<Capture>& c) noexcept;  // caller holds mutex_

  mutable std::mutex mutex_;
  std::atomic<std::size_t> active_{0};  // streams in by_stream_; written under mutex_
  std::map<std::uint64_t, std::shared_ptr<Capture>> by_stream_;  // member stream -> capture
  std::map<std::uint64_t, std::shared_ptr<const GraphData>> graphs_;
  std::uint64_t next_graph_ = 1;
};

}  // namespace gpuplug::sdk
#endif
