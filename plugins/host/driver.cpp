// SPDX-License-Identifier: Apache-2.0
// The host backend's driver: worker pool, stream queues with ownership hand-off, parallel grids.
#include "driver.hpp"

#include <cxxabi.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <typeinfo>
#include <utility>

#include "failure.hpp"
#include "gpuplug/support/escape.hpp"

namespace gpuplug::host {

unsigned machine_threads() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// ---- WorkerPool --------------------------------------------------------------------------------

WorkerPool::WorkerPool(unsigned threads) {
  threads = std::max(1u, threads);
  threads_.reserve(threads);
  try {
    for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  } catch (...) {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
    throw;
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::post(Job job, std::size_t copies) {
  if (copies == 0) return;
  {
    std::lock_guard lock(mutex_);
    if (count_ + copies > ring_.size()) {  // grow: copy the jobs out in order, head at 0
      std::size_t capacity = std::max<std::size_t>(ring_.size(), 64);
      while (capacity < count_ + copies) capacity *= 2;
      std::vector<Job> bigger(capacity);
      for (std::size_t i = 0; i < count_; ++i) bigger[i] = ring_[(head_ + i) & (ring_.size() - 1)];
      ring_.swap(bigger);
      head_ = 0;
    }
    const std::size_t mask = ring_.size() - 1;
    for (std::size_t i = 0; i < copies; ++i) ring_[(head_ + count_ + i) & mask] = job;
    count_ += copies;
  }
  if (copies == 1)
    wake_.notify_one();
  else
    wake_.notify_all();
}

std::size_t WorkerPool::cancel(const void* arg) noexcept {
  std::lock_guard lock(mutex_);
  // Compact in place, keeping the order of the jobs that stay.
  const std::size_t mask = ring_.size() - 1;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < count_; ++i) {
    const Job j = ring_[(head_ + i) & mask];
    if (j.arg != arg) ring_[(head_ + kept++) & mask] = j;
  }
  const std::size_t removed = count_ - kept;
  count_ = kept;
  return removed;
}

bool WorkerPool::pop(Job& job) noexcept {
  if (count_ == 0) return false;
  job = ring_[head_];
  head_ = (head_ + 1) & (ring_.size() - 1);
  --count_;
  return true;
}

void WorkerPool::work() noexcept {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || count_ != 0; });
      if (!pop(job)) return;  // stopping, and nothing left to run
    }
    job.run(job.arg);
  }
}

std::string bounded_text(std::string_view text, std::size_t max) {
  if (text.size() <= max) return support::escape_text(text);
  // Cutting may split a UTF-8 sequence; escape_text then shows its bytes as \xNN, never raw.
  return support::escape_text(text.substr(0, max)) + "... (" + std::to_string(text.size()) +
         " bytes in all)";
}

// ---- grids -------------------------------------------------------------------------------------

/// One launch in flight; lives on the launching thread's stack. Helpers are pool jobs that
/// claim blocks from `next`; `outstanding` counts helpers posted and not yet finished (or
/// cancelled), and the launcher waits for it to reach zero before the Grid goes away.
struct Executor::Grid {
  gpuplug_host_kernel_fn kernel;
  const std::string* name;  // "module::function", escaped
  void** params;
  gpuplug_dim3_t grid;
  gpuplug_dim3_t block;
  std::uint32_t shared_bytes;
  std::uint64_t total;
  std::atomic<std::uint64_t> next{0};
  std::mutex mutex;
  std::condition_variable done;
  std::size_t outstanding = 0;  // guarded by mutex
  // Where a throwing block records its failure (the launch's stream), under fault->mutex. A
  // pointer rather than a message member: the launch path stays free of string work.
  Fault* fault;
};

namespace {

/// Per-participant block shared memory: aligned like device shared memory, reused by the
/// participant's successive blocks (its content is undefined at block start, as on a GPU).
struct SharedMemory {
  explicit SharedMemory(std::uint32_t bytes)
      : ptr(bytes == 0 ? nullptr : ::operator new (bytes, std::align_val_t{256})) {}
  ~SharedMemory() {
    if (ptr != nullptr) ::operator delete (ptr, std::align_val_t{256});
  }
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  void* ptr;
};

// What a kernel's exception may contribute to a message. The text comes from module code, so it
// is untrusted: cut to a bound (a kernel could throw megabytes) and escaped (it could hold
// terminal escapes, newlines that forge log lines, or invalid UTF-8).
constexpr std::size_t kMaxWhatBytes = 512;
constexpr std::size_t kMaxTypeBytes = 160;

/// The type of the exception being handled, demangled where possible ("std::runtime_error").
std::string current_exception_type() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (type == nullptr) return "an unknown type";
  int status = 0;
  char* demangled = abi::__cxa_demangle(type->name(), nullptr, nullptr, &status);
  std::string out = bounded_text(status == 0 && demangled != nullptr ? demangled : type->name(),
                                 kMaxTypeBytes);
  std::free(demangled);  // NOLINT(cppcoreguidelines-no-malloc): __cxa_demangle's contract
  return out;
}

/// "kernel m::f threw std::runtime_error in block (1, 0, 0): what" for the exception being
/// handled; call only inside a catch block. Never throws: without memory for the text it says
/// so in a fixed message (the status still reports the failure).
std::string kernel_exception_message(std::string_view name, gpuplug_dim3_t at) noexcept {
  try {
    std::string where = " in block (" + std::to_string(at.x) + ", " + std::to_string(at.y) +
                        ", " + std::to_string(at.z) + "): ";
    std::string head = "kernel " + std::string(name) + " threw ";
    try {
      throw;
    } catch (const std::exception& e) {
      const char* what = e.what();
      return head + current_exception_type() + where +
             (what != nullptr ? bounded_text(what, kMaxWhatBytes) : std::string("(null what())"));
    } catch (...) {
      return head + "an exception that is not a std::exception (type " +
             current_exception_type() + ")" + where + "unknown exception";
    }
  } catch (...) {
    return {};
  }
}

}  // namespace

// Inlined into both callers: out of line it costs a call on every launch.
[[gnu::always_inline]] inline void Executor::run_blocks(Grid& g, void* shared) noexcept {
  gpuplug_host_block_t b{g.grid, g.block, {0, 0, 0}, g.shared_bytes, shared};
  const std::uint64_t gx = g.grid.x, gxy = static_cast<std::uint64_t>(g.grid.x) * g.grid.y;
  for (;;) {
    const std::uint64_t i = g.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= g.total) return;
    b.block_idx.x = static_cast<std::uint32_t>(i % gx);
    b.block_idx.y = static_cast<std::uint32_t>((i / gx) % g.grid.y);
    b.block_idx.z = static_cast<std::uint32_t>(i / gxy);
    try {
      g.kernel(&b, g.params);
    } catch (...) {
      std::string message = kernel_exception_message(*g.name, b.block_idx);
      // No memory for the description: a text short enough for std::string's inline buffer,
      // so that this assignment cannot allocate (and throw) in a noexcept function.
      if (message.empty()) message = "kernel threw";
      g.next.store(g.total, std::memory_order_relaxed);  // no new blocks; `total` fits in 64 bits
      std::lock_guard lock(g.fault->mutex);
      record(*g.fault, std::move(message));
      return;
    }
  }
}

void Executor::help_grid(void* arg) noexcept {
  Grid& g = *static_cast<Grid*>(arg);
  try {
    SharedMemory shared(g.shared_bytes);
    run_blocks(g, shared.ptr);
  } catch (...) {
    // No memory for this helper's shared buffer: it sits out; the launcher runs the blocks.
  }
  // Notify under the lock: once the launcher sees zero it destroys the Grid.
  std::lock_guard lock(g.mutex);
  if (--g.outstanding == 0) g.done.notify_all();
}

void Executor::run_grid(gpuplug_host_kernel_fn kernel, const std::string& name,
                        gpuplug_dim3_t grid, gpuplug_dim3_t block, std::uint32_t shared_bytes,
                        void** params, Fault& fault) {
  const std::uint64_t total = static_cast<std::uint64_t>(grid.x) * grid.y * grid.z;
  SharedMemory shared(shared_bytes);  // the launcher's own; throws bad_alloc before anything ran
  Grid g{kernel, &name, params, grid, block, shared_bytes, total};
  g.fault = &fault;
  const std::size_t helpers =
      static_cast<std::size_t>(std::min<std::uint64_t>(total - 1, pool_.size()));
  if (helpers != 0) {
    g.outstanding = helpers;
    try {
      pool_.post({&Executor::help_grid, &g}, helpers);
    } catch (...) {
      g.outstanding = 0;  // nothing was queued (insert is all or nothing); run alone
    }
  }
  run_blocks(g, shared.ptr);
  if (helpers != 0) {
    // Every block is claimed: helpers still queued have nothing to do, so take them back
    // instead of waiting for a worker to pick them up.
    const std::size_t cancelled = pool_.cancel(&g);
    std::unique_lock lock(g.mutex);
    g.outstanding -= cancelled;
    g.done.wait(lock, [&] { return g.outstanding == 0; });
  }
}

// ---- streams -----------------------------------------------------------------------------------

/// A launch waiting for its turn on a stream; lives on the launching thread's stack.
struct Executor::Handoff {
  std::mutex mutex;
  std::condition_variable turn;
  bool ready = false;  // guarded by mutex
};

namespace {
// Event values carry their executor's tag in the high bits, so that an event of another host
// backend is refused by value instead of naming one of ours. A generator of distinct tags, not
// per-backend state: trivially destructible, constant-initialised.
constinit std::atomic<std::uint64_t> g_next_event_tag{1};
constexpr unsigned kEventTagShift = 32;
}  // namespace

Executor::Executor(unsigned threads)
    : pool_(threads),
      event_tag_((g_next_event_tag.fetch_add(1, std::memory_order_relaxed) & 0xFFFFFFFFu)
                 << kEventTagShift) {}

// Waits without reporting: a destructor cannot throw, and HostDevice::shutdown has already
// synchronized (and logged any pending kernel failure) through the SDK.
Executor::~Executor() { wait_all(); }

std::uint64_t Executor::create_stream() {
  auto s = std::make_shared<Stream>();
  s->owner = this;
  std::unique_lock lock(streams_mutex_);
  const std::uint64_t id = next_stream_++;
  s->id = id;
  streams_.emplace(id, std::move(s));
  return id;
}

std::uint64_t Executor::alias_stream(std::uint64_t queue) {
  std::shared_ptr<Stream> s;
  {
    std::shared_lock lock(streams_mutex_);
    const auto it = streams_.find(queue);
    if (it != streams_.end()) s = it->second;
  }
  if (!s)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "import_stream: " + std::to_string(queue) +
                  " is not a queue of this host device (never created here, or destroyed)");
  // The alias is one more entry for the same Stream: everything that walks streams_ (stream 0's
  // waits and captures, synchronize) then visits the queue twice, which waits or marks it twice
  // and changes nothing else.
  std::unique_lock lock(streams_mutex_);
  const std::uint64_t id = next_stream_++;
  streams_.emplace(id, std::move(s));
  return id;
}

std::uint64_t Executor::queue_of(std::uint64_t stream) const {
  return stream == 0 ? 0 : find(stream)->id;
}

std::shared_ptr<Executor::Stream> Executor::find(std::uint64_t stream) const {
  std::shared_lock lock(streams_mutex_);
  auto it = streams_.find(stream);
  if (it == streams_.end())
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "unknown stream " + std::to_string(stream) +
                                                   " (never created on this device, or destroyed)");
  return it->second;
}

void Executor::destroy_stream(std::uint64_t stream) {
  std::shared_ptr<Stream> s = find(stream);
  wait_idle(*s);
  {
    std::unique_lock lock(streams_mutex_);
    streams_.erase(stream);
  }
  // The stream is gone either way; a failure still pending on it is reported now, not lost.
  std::string failure;
  {
    std::lock_guard lock(s->mutex);
    failure = take(s->fault, "stream " + std::to_string(stream));
  }
  if (!failure.empty()) sdk::fail(GPUPLUG_STATUS_LAUNCH_FAILED, std::move(failure));
}

void Executor::record(Fault& fault, std::string message) noexcept {
  if (fault.message.empty()) {
    fault.message = std::move(message);
    fault.pending.store(true, std::memory_order_relaxed);
  } else {
    ++fault.later;
  }
}

std::string Executor::take(Fault& fault, std::string_view where) {
  if (fault.message.empty()) return {};
  std::string out = std::string(where) + ": " + fault.message;
  if (fault.later != 0)
    out += " (and " + std::to_string(fault.later) + " more failure" +
           (fault.later == 1 ? "" : "s") + " since: other blocks of that grid or later launches)";
  fault.message.clear();
  fault.later = 0;
  fault.pending.store(false, std::memory_order_relaxed);
  return out;
}

void Executor::wait_idle(Stream& s) {
  std::unique_lock lock(s.mutex);
  s.idle.wait(lock, [&] { return !s.active && s.queue.empty(); });
}

void Executor::synchronize_stream(std::uint64_t stream) {
  if (stream == 0) {
    synchronize();
    return;
  }
  std::shared_ptr<Stream> s = find(stream);
  std::string failure;
  {
    std::unique_lock lock(s->mutex);
    s->idle.wait(lock, [&] { return !s->active && s->queue.empty(); });
    failure = take(s->fault, "stream " + std::to_string(stream));
  }
  if (!failure.empty()) sdk::fail(GPUPLUG_STATUS_LAUNCH_FAILED, std::move(failure));
}

void Executor::synchronize() {
  wait_all();
  // Reports every pending failure at once (the first in full, the others counted), so that a
  // device-wide synchronize leaves no failure behind to surprise a later call.
  std::string first;
  std::uint64_t others = 0;
  const auto add = [&](std::string message) {
    if (message.empty()) return;
    if (first.empty())
      first = std::move(message);
    else
      ++others;
  };
  if (default_fault_.pending.load(std::memory_order_relaxed)) {
    std::lock_guard lock(default_fault_mutex_);
    add(take(default_fault_, "the default stream"));
  }
  {
    std::shared_lock streams_lock(streams_mutex_);
    for (const auto& [id, s] : streams_) {
      if (!s->fault.pending.load(std::memory_order_relaxed)) continue;
      std::lock_guard lock(s->mutex);
      add(take(s->fault, "stream " + std::to_string(id)));
    }
  }
  if (first.empty()) return;
  if (others != 0)
    first += "; and failed launches on " + std::to_string(others) + " other stream" +
             (others == 1 ? "" : "s") + " (reported together here)";
  sdk::fail(GPUPLUG_STATUS_LAUNCH_FAILED, std::move(first));
}

void Executor::wait_all() {
  // Waits under the shared lock (no copy of the list, so the default-stream path allocates
  // nothing): drains never take streams_mutex_, and enqueueing takes it shared, so only
  // stream_create / stream_destroy wait for this.
  std::shared_lock lock(streams_mutex_);
  for (const auto& [id, s] : streams_) wait_idle(*s);
}

void Executor::run(const Item& item) noexcept {
  switch (item.kind) {
    case Item::Kind::copy:
      std::memmove(item.dst, item.src, item.bytes);
      break;
    case Item::Kind::fill:
      std::memset(item.dst, item.value, item.bytes);
      break;
    case Item::Kind::handoff:
    case Item::Kind::mark:
    case Item::Kind::wait:
      break;  // handled by drain
  }
}

void Executor::drain(void* arg) noexcept {
  Stream& s = *static_cast<Stream*>(arg);
  for (;;) {
    Item item;
    {
      std::lock_guard lock(s.mutex);
      if (s.queue.empty()) {
        s.active = false;
        s.idle.notify_all();  // under the lock: a waiter may destroy the stream once it sees idle
        return;
      }
      item = s.queue.front();
      s.queue.pop_front();
      if (item.kind == Item::Kind::handoff) {
        // The stream stays active: ownership passes to the waiting launcher, who drains
        // whatever queued behind it when it is done (release).
        std::lock_guard turn_lock(item.handoff->mutex);
        item.handoff->ready = true;
        item.handoff->turn.notify_one();
        return;
      }
    }
    if (item.kind == Item::Kind::mark) {
      {
        std::lock_guard lock(s.mutex);
        note_failure(*item.capture, s.fault, s.id);
      }
      s.owner->complete(*item.capture);
      continue;
    }
    if (item.kind == Item::Kind::wait) {
      Capture& c = *item.capture;
      std::unique_lock lock(c.mutex);
      if (!c.done.load(std::memory_order_acquire)) {
        try {
          // Park: the stream stays active (owned by the capture), no pool thread is held, and
          // complete() posts a drain for it. `s` may be touched by that drain from here on.
          c.parked.push_back(&s);
          return;
        } catch (...) {
          // No memory to park: wait here instead (holds one pool thread; cannot deadlock while
          // another thread is free, and the capture only covers work queued before it).
          c.completed.wait(lock, [&] { return c.done.load(std::memory_order_acquire); });
        }
      }
      continue;
    }
    run(item);
  }
}

void Executor::note_failure(Capture& c, const Fault& fault, std::uint64_t stream) noexcept {
  if (!fault.pending.load(std::memory_order_relaxed)) return;
  try {
    std::string text =
        (stream == 0 ? std::string("the default stream") : "stream " + std::to_string(stream)) +
        ": " + fault.message;
    std::lock_guard lock(c.mutex);
    if (c.failure.empty()) c.failure = std::move(text);
  } catch (...) {  // no memory for the copy: the stream still reports the failure itself
  }
}

void Executor::complete(Capture& c) noexcept {
  if (c.remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::vector<Stream*> parked;
  {
    std::lock_guard lock(c.mutex);
    c.at = std::chrono::steady_clock::now();
    c.done.store(true, std::memory_order_release);
    parked.swap(c.parked);
    c.completed.notify_all();
  }
  for (Stream* s : parked) {
    try {
      pool_.post({&Executor::drain, s});
    } catch (...) {
      drain(s);
    }
  }
}

// ---- events ------------------------------------------------------------------------------------

std::uint64_t Executor::create_event() {
  std::lock_guard lock(events_mutex_);
  const std::uint64_t id = event_tag_ | next_event_++;
  events_.emplace(id, nullptr);
  return id;
}

std::shared_ptr<Executor::Capture> Executor::capture_of(std::uint64_t event, const char* op) const {
  std::lock_guard lock(events_mutex_);
  const auto it = events_.find(event);
  if (it == events_.end())
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT, std::string(op) + ": unknown event " +
                                                   std::to_string(event) +
                                                   " (never created on this device, or destroyed)");
  return it->second;
}

void Executor::destroy_event(std::uint64_t event) {
  std::lock_guard lock(events_mutex_);
  if (events_.erase(event) == 0)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "event_destroy: unknown event " +
                                                   std::to_string(event) +
                                                   " (never created on this device, or destroyed)");
}

void Executor::record_event(std::uint64_t event, std::uint64_t stream) {
  (void)capture_of(event, "event_record");  // unknown events fail before anything is queued
  auto c = std::make_shared<Capture>();
  if (stream == 0) {
    // The legacy default stream: the capture covers the work queued on every stream so far.
    std::shared_lock streams_lock(streams_mutex_);
    {
      std::lock_guard lock(default_fault_mutex_);
      note_failure(*c, default_fault_, 0);
    }
    for (const auto& [id, s] : streams_) {
      std::lock_guard lock(s->mutex);
      if (!s->active && s->queue.empty()) {
        note_failure(*c, s->fault, id);
        continue;
      }
      c->remaining.fetch_add(1, std::memory_order_relaxed);
      try {
        s->queue.push_back(Item{Item::Kind::mark, nullptr, nullptr, 0, 0, nullptr, c});
      } catch (...) {
        c->remaining.fetch_sub(1, std::memory_order_relaxed);
        throw;
      }
    }
  } else {
    std::shared_ptr<Stream> s = find(stream);
    std::lock_guard lock(s->mutex);
    // An idle stream has nothing queued: the capture completes now (below). Otherwise the mark
    // goes behind the stream's work; the active owner drains it.
    if (s->active || !s->queue.empty()) {
      c->remaining.fetch_add(1, std::memory_order_relaxed);
      s->queue.push_back(Item{Item::Kind::mark, nullptr, nullptr, 0, 0, nullptr, c});
    } else {
      note_failure(*c, s->fault, stream);
    }
  }
  {
    std::lock_guard lock(events_mutex_);
    const auto it = events_.find(event);
    // Destroyed meanwhile (the caller's race): the marks still complete; nobody reads them.
    if (it != events_.end()) it->second = c;
  }
  complete(*c);  // the recording share
}

void Executor::wait_event(std::uint64_t stream, std::uint64_t event) {
  std::shared_ptr<Capture> c = capture_of(event, "stream_wait_event");
  if (c == nullptr || c->done.load(std::memory_order_acquire)) return;  // nothing to wait for
  if (stream == 0) {
    std::unique_lock lock(c->mutex);
    c->completed.wait(lock, [&] { return c->done.load(std::memory_order_acquire); });
    return;
  }
  enqueue(stream, Item{Item::Kind::wait, nullptr, nullptr, 0, 0, nullptr, std::move(c)});
}

void Executor::synchronize_event(std::uint64_t event) {
  std::shared_ptr<Capture> c = capture_of(event, "event_synchronize");
  if (c == nullptr) return;
  std::string failure;
  {
    std::unique_lock lock(c->mutex);
    c->completed.wait(lock, [&] { return c->done.load(std::memory_order_acquire); });
    failure = c->failure;
  }
  if (!failure.empty())
    sdk::fail(GPUPLUG_STATUS_LAUNCH_FAILED, "event_synchronize: a launch captured by event " +
                                                std::to_string(event) + " failed: " + failure);
}

bool Executor::query_event(std::uint64_t event) {
  const std::shared_ptr<Capture> c = capture_of(event, "event_query");
  return c == nullptr || c->done.load(std::memory_order_acquire);
}

float Executor::elapsed_ms(std::uint64_t start, std::uint64_t end) {
  const std::shared_ptr<Capture> a = capture_of(start, "event_elapsed_ms");
  const std::shared_ptr<Capture> b = capture_of(end, "event_elapsed_ms");
  for (const auto& [c, id] : {std::pair{a.get(), start}, std::pair{b.get(), end}}) {
    if (c == nullptr)
      sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
                "event_elapsed_ms: event " + std::to_string(id) + " was never recorded");
    if (!c->done.load(std::memory_order_acquire))
      sdk::fail(GPUPLUG_STATUS_UNAVAILABLE,
                "event_elapsed_ms: event " + std::to_string(id) + " has not completed (not ready)");
  }
  return std::chrono::duration<float, std::milli>(b->at - a->at).count();
}

void Executor::enqueue(std::uint64_t stream, const Item& item) {
  std::shared_ptr<Stream> s = find(stream);
  bool start = false;
  {
    std::lock_guard lock(s->mutex);
    s->queue.push_back(item);
    if (!s->active) s->active = start = true;
  }
  if (start) {
    try {
      pool_.post({&Executor::drain, s.get()});
    } catch (...) {
      drain(s.get());  // cannot queue the drain job: run the stream here instead
    }
  }
}

void Executor::acquire(Stream& s) {
  Handoff handoff;
  {
    std::lock_guard lock(s.mutex);
    if (!s.active) {  // idle (and so empty): take it directly, no trip through the pool
      s.active = true;
      return;
    }
    s.queue.push_back(Item{Item::Kind::handoff, nullptr, nullptr, 0, 0, &handoff});
  }
  std::unique_lock lock(handoff.mutex);
  handoff.turn.wait(lock, [&] { return handoff.ready; });
}

void Executor::release(Stream& s) noexcept {
  {
    std::lock_guard lock(s.mutex);
    if (s.queue.empty()) {
      s.active = false;
      s.idle.notify_all();
      return;
    }
  }
  try {
    pool_.post({&Executor::drain, &s});
  } catch (...) {
    drain(&s);
  }
}

void Executor::copy(std::uint64_t stream, void* dst, const void* src, std::size_t bytes) {
  if (stream == 0) {
    wait_all();
    std::memmove(dst, src, bytes);
    return;
  }
  enqueue(stream, Item{Item::Kind::copy, dst, src, bytes, 0, nullptr});
}

void Executor::fill(std::uint64_t stream, void* dst, std::uint8_t value, std::size_t bytes) {
  if (stream == 0) {
    wait_all();
    std::memset(dst, value, bytes);
    return;
  }
  enqueue(stream, Item{Item::Kind::fill, dst, nullptr, bytes, value, nullptr});
}

namespace {
[[noreturn, gnu::cold]] void fail_earlier(std::string_view name, std::string earlier) {
  sdk::fail(GPUPLUG_STATUS_LAUNCH_FAILED,
            "launch of " + std::string(name) + " not run: an earlier launch failed: " + earlier);
}
}  // namespace

void Executor::launch(std::uint64_t stream, gpuplug_host_kernel_fn kernel, const std::string& name,
                      gpuplug_dim3_t grid, gpuplug_dim3_t block, std::uint32_t shared_bytes,
                      void** params) {
  if (stream == 0) {
    wait_all();
    // One relaxed load on the hot path; the lock only when a failure is pending.
    if (default_fault_.pending.load(std::memory_order_relaxed)) {
      std::string earlier;
      {
        std::lock_guard lock(default_fault_mutex_);
        earlier = take(default_fault_, "the default stream");
      }
      if (!earlier.empty()) fail_earlier(name, std::move(earlier));
    }
    run_grid(kernel, name, grid, block, shared_bytes, params, default_fault_);
    return;
  }
  std::shared_ptr<Stream> s = find(stream);
  acquire(*s);  // from here this thread owns the stream: everything before it has run
  try {
    if (s->fault.pending.load(std::memory_order_relaxed)) {
      std::string earlier;
      {
        std::lock_guard lock(s->mutex);
        earlier = take(s->fault, "stream " + std::to_string(stream));
      }
      if (!earlier.empty()) fail_earlier(name, std::move(earlier));
    }
    run_grid(kernel, name, grid, block, shared_bytes, params, s->fault);
  } catch (...) {
    release(*s);
    throw;
  }
  release(*s);
}

}  // namespace gpuplug::host
