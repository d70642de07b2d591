// SPDX-License-Identifier: Apache-2.0
// The host backend's driver: the executor's streams (queues drained on the worker pool, with
// ownership handed to a launching thread), synchronization, copies, fills and launches.
#include "driver.hpp"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>

#include "failure.hpp"
#include "gpuplug/support/escape.hpp"

namespace gpuplug::host {

std::string bounded_text(std::string_view text, std::size_t max) {
  if (text.size() <= max) return support::escape_text(text);
  // Cutting may split a UTF-8 sequence; escape_text then shows its bytes as \xNN, never raw.
  return support::escape_text(text.substr(0, max)) + "... (" + std::to_string(text.size()) +
         " bytes in all)";
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

std::uint64_t Executor::create_stream(bool blocking) {
  auto s = std::make_shared<Stream>();
  s->owner = this;
  s->blocking = blocking;
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

bool Executor::blocks_with_default(std::uint64_t stream) const {
  return stream == 0 || find(stream)->blocking;
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

void Executor::wait_blocking() {
  std::shared_lock lock(streams_mutex_);  // as wait_all
  for (const auto& [id, s] : streams_)
    if (s->blocking) wait_idle(*s);
}

void Executor::run(const Item& item) noexcept {
  switch (item.kind) {
    case Item::Kind::copy:
      std::memmove(item.dst, item.src, item.bytes);
      break;
    case Item::Kind::fill:
      std::memset(item.dst, item.value, item.bytes);
      break;
    case Item::Kind::copy_2d:
      run_2d(*item.pitched);
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
    wait_blocking();
    std::memmove(dst, src, bytes);
    return;
  }
  enqueue(stream, Item{Item::Kind::copy, dst, src, bytes, 0, nullptr});
}

void Executor::copy_staged(std::uint64_t stream, void* dst, const void* src, std::size_t bytes) {
  if (stream == 0) return copy(stream, dst, src, bytes);
  std::shared_ptr<std::byte[]> staged = std::make_shared_for_overwrite<std::byte[]>(bytes);
  std::memcpy(staged.get(), src, bytes);
  const void* from = staged.get();
  enqueue(stream, Item{Item::Kind::copy, dst, from, bytes, 0, nullptr, {}, std::move(staged)});
}

void Executor::copy_owned(std::uint64_t stream, void* dst, std::shared_ptr<const std::byte[]> keep,
                          std::size_t bytes) {
  const void* from = keep.get();
  if (stream == 0) return copy(stream, dst, from, bytes);
  enqueue(stream, Item{Item::Kind::copy, dst, from, bytes, 0, nullptr, {}, std::move(keep)});
}

void Executor::fill(std::uint64_t stream, void* dst, std::uint8_t value, std::size_t bytes) {
  if (stream == 0) {
    wait_blocking();
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
    wait_blocking();
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