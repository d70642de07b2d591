// SPDX-License-Identifier: Apache-2.0
// The host backend's driver: the executor that runs a device's work (on a worker pool, in-order
// streams, grid launches), what a GPU plugin's driver.hpp is to its vendor runtime.
#pragma once

#include <gpuplug/abi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "worker_pool.hpp"

namespace gpuplug::host {

/// Runs a device's work. Streams are FIFO queues drained on the pool, one operation at a time
/// per stream (so each stream keeps submission order), different streams concurrently.
/// Stream 0 is the legacy default stream: an operation on it first waits for every blocking
/// stream, then runs synchronously in the calling thread. A non-blocking stream (created with
/// `blocking` false, as CU_STREAM_NON_BLOCKING) is not ordered with stream 0 either way: stream-0
/// work does not wait for it, and its work never waits for stream 0's (which has always finished
/// by the time anything else is queued, stream 0 being synchronous here).
///
/// A launch runs its grid's blocks across the pool (the launching thread takes part) and
/// returns when the grid is done: the kernel's `params` point at the caller's argument storage,
/// whose size the host backend cannot know, so they may not be read after launch returns.
/// On a stream other than 0 the launch still waits its turn: it runs after everything queued
/// before it on that stream, and everything queued after it waits for it.
///
/// Async copies and memsets on a stream other than 0 are queued and return at once; the host
/// buffers they name must stay valid until the stream is synchronized, except the source of
/// copy_staged, which is copied into a buffer the queued copy owns before it returns.
///
/// Kernel failures. A kernel that throws does not take the process down: every block catches,
/// the first exception of a grid is recorded (blocks not yet started are skipped, as a faulting
/// GPU grid stops; blocks already running finish) and the launch itself returns normally, as an
/// asynchronous GPU launch would. The failure is then pending on the stream the launch was on
/// (stream 0 has its own slot) and is reported exactly once, as sdk::Failure(LAUNCH_FAILED)
/// naming the kernel, the block and the exception, by the first of:
///  - synchronize_stream of that stream (for stream 0: synchronize, below);
///  - synchronize, which reports (and clears) the pending failures of every stream at once;
///  - the next launch on that stream, which is then not run (its message says so);
///  - destroy_stream of that stream, which destroys the stream either way.
/// (An event whose capture covered the failed launch also reports it from synchronize_event,
/// without clearing it: see Events below.)
/// Only the first failure of a stream is kept until it is reported; later ones (other blocks of
/// that grid, later launches) are counted in its message. Once reported, the stream (and the
/// device) work normally again: unlike CUDA's sticky context errors, one failed kernel does not
/// poison the device, because the host executor's state is intact after an exception (the kernel's
/// own data may not be). Copies and memsets never report kernel failures (they are not launches);
/// the destructor waits without reporting.
///
/// Events (ABI 1.1) are stream-ordered markers. record(e, s) queues a mark behind the work
/// queued on s so far (on an idle stream it completes at once); the mark's completion time
/// (steady clock) is what elapsed_ms subtracts. wait(s, e) queues a wait item: when the drain of
/// s reaches it before e's capture completed, the stream parks (it stays owned, nothing behind
/// it runs) without holding a pool thread, and the capture's completion resumes it; the host
/// returns at once. On stream 0 (the legacy default stream, synchronous here) record captures
/// the work queued on every blocking stream so far, and wait blocks the caller until the capture
/// completes, as every other stream-0 operation of this executor blocks. A launch queued behind
/// a wait waits for it (the launching thread waits its turn, as for any launch). Recording
/// again replaces the capture; waits already queued keep the one they saw. Captures only ever
/// cover work queued before them, so waits cannot form a cycle. A kernel failure pending on a
/// stream when a capture of it completes is also reported by synchronize_event (LAUNCH_FAILED
/// naming the event); it stays pending on the stream, which still reports it once as above.
///
/// Thread-safety: every member may be called concurrently, except that a stream may not be
/// used while (or after) it is being destroyed. Errors: sdk::Failure(INVALID_ARGUMENT) for an
/// unknown stream; sdk::Failure(LAUNCH_FAILED) as above; std::bad_alloc when queueing runs out
/// of memory.
class Executor {
 public:
  explicit Executor(unsigned threads);
  /// Waits for every stream, then stops the pool.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  unsigned workers() const noexcept { return pool_.size(); }

  /// A new stream; `blocking` false makes it non-blocking (see the class comment).
  std::uint64_t create_stream(bool blocking = true);
  /// Whether the stream (or the queue an alias runs on) is ordered with stream 0; true for 0.
  /// Failure(INVALID_ARGUMENT) for an unknown stream.
  bool blocks_with_default(std::uint64_t stream) const;
  /// A second value for the queue `queue` (an id create_stream returned, or another alias):
  /// work on either runs on the same queue, in one order. Destroying one value leaves the
  /// queue to the other (import_stream, ABI 1.2). Failure(INVALID_ARGUMENT) for an unknown queue.
  std::uint64_t alias_stream(std::uint64_t queue);
  /// The queue id a stream value runs on: its own for a created stream, the original's for an
  /// alias (what native handles report); 0 for the default stream. Failure(INVALID_ARGUMENT)
  /// for an unknown stream.
  std::uint64_t queue_of(std::uint64_t stream) const;
  /// Waits for the stream's work, then forgets the value (and the queue, when no other value
  /// runs on it).
  void destroy_stream(std::uint64_t stream);
  /// Waits for the stream's work, then reports its pending kernel failure (see above).
  void synchronize_stream(std::uint64_t stream);
  /// Waits until every stream is idle; reports nothing (free, which must not leave queued work
  /// naming freed memory, and the destructor).
  void wait_all();
  /// Waits until every stream is idle, then reports every stream's pending kernel failure.
  void synchronize();

  /// memcpy(dst, src, bytes), ordered on `stream`.
  void copy(std::uint64_t stream, void* dst, const void* src, std::size_t bytes);
  /// The same, with `src` free to change or go as soon as this returns: on a stream other than
  /// 0 its bytes are copied first, into a buffer the queued copy owns (std::bad_alloc when there
  /// is no memory for it).
  void copy_staged(std::uint64_t stream, void* dst, const void* src, std::size_t bytes);
  /// `height` rows of `width` bytes, row r from src + r * src_pitch to dst + r * dst_pitch,
  /// ordered on `stream` (driver_pitched.cpp). With `stage_source` the rows are copied out of
  /// `src` into a buffer owned by the queued operation before this returns, so the caller may
  /// reuse `src` at once (a host source); without it `src` is read when the copy runs.
  void copy_2d(std::uint64_t stream, void* dst, std::size_t dst_pitch, const void* src,
               std::size_t src_pitch, std::size_t width, std::size_t height, bool stage_source);
  /// copy, with `keep` (which owns `src`) kept alive by the queued copy until it ran: a graph's
  /// staged upload, whose graph may be destroyed while the replay is queued.
  void copy_owned(std::uint64_t stream, void* dst, std::shared_ptr<const std::byte[]> keep,
                  std::size_t bytes);
  /// memset(dst, value, bytes), ordered on `stream`.
  void fill(std::uint64_t stream, void* dst, std::uint8_t value, std::size_t bytes);
  /// Runs `kernel` once per block of `grid` (see the class comment); returns when all ran.
  /// `name` ("module::function", already escaped for messages) must stay valid until then.
  void launch(std::uint64_t stream, gpuplug_host_kernel_fn kernel, const std::string& name,
              gpuplug_dim3_t grid, gpuplug_dim3_t block, std::uint32_t shared_bytes,
              void** params);

  // ---- events (see the class comment). Unknown events are Failure(INVALID_ARGUMENT).
  /// A new event, never recorded; its value is unique in the process (foreign ones are refused).
  std::uint64_t create_event();
  /// Forgets the event; marks and waits already queued keep its capture alive.
  void destroy_event(std::uint64_t event);
  void record_event(std::uint64_t event, std::uint64_t stream);
  void wait_event(std::uint64_t stream, std::uint64_t event);
  /// Blocks until the capture completes (never recorded: returns at once).
  void synchronize_event(std::uint64_t event);
  /// True when the capture has completed (never recorded: true); never blocks.
  bool query_event(std::uint64_t event);
  /// Milliseconds between the two captures' completions; Failure(INVALID_ARGUMENT) for an event
  /// never recorded, Failure(UNAVAILABLE) "not ready" when one has not completed.
  float elapsed_ms(std::uint64_t start, std::uint64_t end);

 private:
  struct Handoff;
  struct Capture;
  struct Stream;
  struct Pitched;  // a 2D copy's rows (driver_pitched.cpp)
  /// One queued operation of a stream.
  struct Item {
    enum class Kind { copy, fill, handoff, mark, wait, copy_2d } kind;
    void* dst;
    const void* src;
    std::size_t bytes;
    std::uint8_t value;
    Handoff* handoff;  // Kind::handoff: the launch waiting for its turn
    std::shared_ptr<Capture> capture = {};  // Kind::mark: completes it; Kind::wait: waits for it
    std::shared_ptr<const std::byte[]> staged = {};  // Kind::copy: owns src when it was staged
    std::shared_ptr<const Pitched> pitched = {};  // Kind::copy_2d: the rows (and staged source)
  };
  /// One record of an event: completes when every stream share of it has drained (one for a
  /// record on a stream, one per busy stream for stream 0), then resumes the parked streams.
  struct Capture {
    std::mutex mutex;
    std::condition_variable completed;
    std::atomic<bool> done{false};
    std::atomic<std::size_t> remaining{1};       // shares not yet drained (+1 while recording)
    std::chrono::steady_clock::time_point at{};  // written before done (release)
    std::vector<Stream*> parked;                 // guarded by mutex; streams waiting on it
    // The first kernel failure pending on a covered stream when its share drained (guarded by
    // mutex): what event_synchronize reports. The stream keeps it pending for its own report.
    std::string failure;
  };
  /// A kernel failure waiting to be reported: the first message, and how many blocks or
  /// launches failed after it before it was reported. `pending` mirrors !message.empty() so that the
  /// launch path can look without taking the lock (one relaxed load).
  struct Fault {
    explicit Fault(std::mutex& guard) : mutex(guard) {}
    std::mutex& mutex;         // the owner's mutex, which guards message and later
    std::string message;       // guarded by mutex
    std::uint64_t later = 0;   // guarded by mutex
    std::atomic<bool> pending{false};
  };
  /// Invariant: `active` is true while exactly one party (a drain job on the pool, or a
  /// launching thread) owns the stream's execution; it is false only when `queue` is empty.
  struct Stream {
    std::mutex mutex;
    std::condition_variable idle;
    std::deque<Item> queue;
    bool active = false;
    Executor* owner = nullptr;  // set at creation; drain completes captures through it
    std::uint64_t id = 0;       // its ABI value, for messages
    bool blocking = true;       // ordered with stream 0; set at creation
    Fault fault{mutex};  // guarded by mutex (except fault.pending)
  };
  struct Grid;

  std::shared_ptr<Stream> find(std::uint64_t stream) const;
  void enqueue(std::uint64_t stream, const Item& item);
  void acquire(Stream& s);           // waits for the stream's turn, then owns it
  void release(Stream& s) noexcept;  // gives ownership back (drains what queued meanwhile)
  /// Runs the grid; a block that throws records its failure on `fault` (under fault.mutex).
  /// Few arguments on purpose: this is the launch path.
  void run_grid(gpuplug_host_kernel_fn kernel, const std::string& name, gpuplug_dim3_t grid,
                gpuplug_dim3_t block, std::uint32_t shared_bytes, void** params, Fault& fault);
  /// Waits until every blocking stream is idle; reports nothing (before stream 0 work).
  void wait_blocking();
  /// Records `message` on `fault` (first one kept, later ones counted); caller holds its mutex.
  static void record(Fault& fault, std::string message) noexcept;
  /// The pending failure's message ("" when none), cleared; caller holds the fault's mutex.
  static std::string take(Fault& fault, std::string_view where);
  static void wait_idle(Stream& s);
  static void drain(void* stream) noexcept;  // a pool job
  /// Drains one share of `c`; the last one stamps the time and resumes the parked streams.
  void complete(Capture& c) noexcept;
  /// Copies the failure pending on `fault`, stream `stream`'s (0: the default stream's), into
  /// `c` unless it holds one; caller holds fault.mutex. Allocates only when one is pending.
  static void note_failure(Capture& c, const Fault& fault, std::uint64_t stream) noexcept;
  /// The event's current capture (null: never recorded); Failure(INVALID_ARGUMENT) when unknown.
  std::shared_ptr<Capture> capture_of(std::uint64_t event, const char* op) const;
  static void run(const Item& item) noexcept;
  static void run_2d(const Pitched& rows) noexcept;  // Kind::copy_2d
  static void help_grid(void* grid) noexcept;  // a pool job
  /// Runs blocks of `g` until none is left. A block that throws is recorded on the grid (the
  /// first one's message, later ones counted) and stops the grid: blocks not yet claimed are
  /// skipped. Exceptions never leave: this runs on pool threads, where one would terminate.
  static void run_blocks(Grid& g, void* shared) noexcept;

  WorkerPool pool_;
  std::mutex default_fault_mutex_;
  Fault default_fault_{default_fault_mutex_};  // stream 0's pending failure
  mutable std::shared_mutex streams_mutex_;
  std::map<std::uint64_t, std::shared_ptr<Stream>> streams_;  // guarded by streams_mutex_
  std::uint64_t next_stream_ = 1;                             // guarded by streams_mutex_
  mutable std::mutex events_mutex_;
  // event -> its latest capture (null until recorded); guarded by events_mutex_
  std::map<std::uint64_t, std::shared_ptr<Capture>> events_;
  std::uint64_t event_tag_;       // this executor's high bits of its event values
  std::uint64_t next_event_ = 1;  // guarded by events_mutex_
};

/// `text` for a message when it comes from a module or a file (untrusted for length and
/// encoding): at most `max` bytes of it, escaped with support::escape_text (one line, no
/// terminal controls, invalid UTF-8 as \xNN), with "... (N bytes in all)" when cut.
std::string bounded_text(std::string_view text, std::size_t max);

}  // namespace gpuplug::host
