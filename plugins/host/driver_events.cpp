// SPDX-License-Identifier: Apache-2.0
// The host executor's events: captures of the work queued on a stream, the marks that complete
// them, the waits parked on them, and the failures they report.
#include "driver.hpp"

#include <chrono>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "failure.hpp"

namespace gpuplug::host {

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
    // The legacy default stream: the capture covers the work queued on every blocking stream so
    // far (a non-blocking stream is not ordered with it).
    std::shared_lock streams_lock(streams_mutex_);
    {
      std::lock_guard lock(default_fault_mutex_);
      note_failure(*c, default_fault_, 0);
    }
    for (const auto& [id, s] : streams_) {
      if (!s->blocking) continue;
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

}  // namespace gpuplug::host
