// SPDX-License-Identifier: Apache-2.0
// Captures: stream captures, their invalidation, and the live graphs (captures.hpp).
#include "captures.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <exception>
#include <string>
#include <utility>

#include "failure.hpp"

#if GPUPLUG_ABI_VERSION_MINOR >= 3
namespace gpuplug::sdk {

namespace {
std::string stream_name(std::uint64_t stream) { return "stream " + std::to_string(stream); }

const char* mode_name(std::int32_t mode) noexcept {
  switch (mode) {
    case GPUPLUG_CAPTURE_MODE_GLOBAL: return "global";
    case GPUPLUG_CAPTURE_MODE_THREAD_LOCAL: return "thread-local";
    default: return "relaxed";
  }
}
}  // namespace

CapturedOp CapturedOp::copy(Kind kind, void* dst, const void* src, std::size_t bytes,
                            bool stage) {
  CapturedOp c;
  c.kind = kind;
  c.dst = dst;
  c.src = src;
  c.bytes = bytes;
  if (stage && bytes != 0) {
    std::shared_ptr<std::byte[]> copy = std::make_shared_for_overwrite<std::byte[]>(bytes);
    std::memcpy(copy.get(), src, bytes);
    c.src = copy.get();
    c.staged = std::move(copy);
  }
  return c;
}

CapturedOp CapturedOp::fill(void* dst, std::uint8_t value, std::size_t bytes) {
  CapturedOp c;
  c.kind = Kind::fill;
  c.dst = dst;
  c.value = value;
  c.bytes = bytes;
  return c;
}

void Captures::begin(std::uint64_t stream, std::int32_t mode, bool blocking) {
  std::lock_guard lock(mutex_);
  if (const auto it = by_stream_.find(stream); it != by_stream_.end()) {
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "stream_begin_capture: " + stream_name(stream) +
                  (it->second->origin == stream
                       ? " captures already (end_capture or abort it first)"
                       : " is part of the capture of " + stream_name(it->second->origin) +
                             " already (a fork of it)"));
  }
  auto c = std::make_shared<Capture>();
  c->origin = stream;
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  c->members.insert(stream);
  if (blocking) c->blocking.insert(stream);
  by_stream_.emplace(stream, std::move(c));
  active_.store(by_stream_.size(), std::memory_order_relaxed);
}

std::uint64_t Captures::end(std::uint64_t stream) {
  std::lock_guard lock(mutex_);
  const auto it = by_stream_.find(stream);
  if (it == by_stream_.end())
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "stream_end_capture: " + stream_name(stream) + " began no capture");
  if (it->second->origin != stream)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "stream_end_capture: " + stream_name(stream) + " joined the capture of " +
                  stream_name(it->second->origin) + "; end it on that stream");
  const std::shared_ptr<Capture> c = it->second;
  remove(c);  // ended either way: the streams run work again
  if (!c->poisoned.empty())
    fail(GPUPLUG_STATUS_CAPTURE_INVALIDATED,
              "stream_end_capture: the capture of " + stream_name(stream) +
                  " was invalidated: " + c->poisoned);
  if (!c->unjoined.empty())
    fail(GPUPLUG_STATUS_CAPTURE_INVALIDATED,
              "stream_end_capture: " + stream_name(*c->unjoined.begin()) +
                  " forked from the capture of " + stream_name(stream) +
                  " and was not joined back (record an event on it after its work and wait on "
                  "that event on " + stream_name(stream) + " before end_capture)");
  auto data = std::make_shared<GraphData>();
  data->ops = std::move(c->ops);
  const std::uint64_t value = next_graph_++;
  graphs_.emplace(value, std::move(data));
  return value;
}

void Captures::abort(std::uint64_t stream) noexcept {
  std::lock_guard lock(mutex_);
  const auto it = by_stream_.find(stream);
  if (it == by_stream_.end()) return;
  const std::shared_ptr<Capture> c = it->second;
  remove(c);
}

bool Captures::is_capturing(std::uint64_t stream) const {
  std::lock_guard lock(mutex_);
  return by_stream_.contains(stream);
}

void Captures::remove(const std::shared_ptr<Capture>& c) noexcept {
  for (const std::uint64_t member : c->members) by_stream_.erase(member);
  active_.store(by_stream_.size(), std::memory_order_relaxed);
}

void Captures::poison_and_fail(Capture& c, std::string why) {
  if (c.poisoned.empty()) c.poisoned = why;
  fail(GPUPLUG_STATUS_CAPTURE_INVALIDATED, std::move(why));
}

void Captures::poison_current(Capture& c) noexcept {
  try {
    throw;
  } catch (const std::exception& e) {
    try {
      if (c.poisoned.empty()) c.poisoned = e.what();
    } catch (...) {
      c.poisoned = "?";
    }
  } catch (...) {
    c.poisoned = "an unknown exception";
  }
}

Captures::Capture* Captures::capture_for_work(std::uint64_t stream, const char* op) {
  if (stream == 0) {
    // Only a blocking capturing stream is ordered with the legacy default stream.
    const auto waited = std::find_if(by_stream_.begin(), by_stream_.end(), [](const auto& m) {
      return m.second->blocking.contains(m.first);
    });
    if (waited == by_stream_.end()) return nullptr;
    const std::string why =
        std::string(op) + ": work on the default stream 0 while blocking " +
        stream_name(waited->first) +
        " captures (the legacy default stream would wait for it; capture on a non-blocking "
        "stream to allow this); the capture is invalidated";
    for (auto& [member, c] : by_stream_)
      if (!c->blocking.empty() && c->poisoned.empty()) c->poisoned = why;
    fail(GPUPLUG_STATUS_CAPTURE_INVALIDATED, why);
  }
  const auto it = by_stream_.find(stream);
  if (it == by_stream_.end()) return nullptr;
  Capture& c = *it->second;
  if (!c.poisoned.empty())
    fail(GPUPLUG_STATUS_CAPTURE_INVALIDATED,
              std::string(op) + ": the capture of " + stream_name(c.origin) +
                  " was invalidated (" + c.poisoned +
                  "); abort it (abort_capture_if_active) to use the stream again");
  return &c;
}

bool Captures::record_graph(std::uint64_t stream, const GraphData& graph) {
  std::lock_guard lock(mutex_);
  Capture* c = capture_for_work(stream, "graph_launch");
  if (c == nullptr) return false;
  try {
    c->ops.insert(c->ops.end(), graph.ops.begin(), graph.ops.end());
  } catch (...) {
    poison_current(*c);
    throw;
  }
  return true;
}

void Captures::check_synchronize(std::uint64_t stream, const char* op) {
  std::lock_guard lock(mutex_);
  if (stream == 0) {
    capture_for_work(0, op);
    return;
  }
  const auto it = by_stream_.find(stream);
  if (it == by_stream_.end()) return;
  poison_and_fail(*it->second, std::string(op) + ": " + stream_name(stream) +
                                   " was synchronized while it captures; the capture of " +
                                   stream_name(it->second->origin) + " is invalidated");
}

void Captures::check_device_synchronize(const char* op) {
  std::lock_guard lock(mutex_);
  if (by_stream_.empty()) return;
  const std::string why = std::string(op) + ": the device was synchronized while " +
                          stream_name(by_stream_.begin()->second->origin) +
                          " captures; the capture is invalidated";
  for (auto& [member, c] : by_stream_)
    if (c->poisoned.empty()) c->poisoned = why;
  fail(GPUPLUG_STATUS_CAPTURE_INVALIDATED, why);
}

void Captures::check_unsafe_call(const char* op) {
  std::lock_guard lock(mutex_);
  const std::thread::id self = std::this_thread::get_id();
  for (auto& [member, c] : by_stream_) {
    if (member != c->origin) continue;
    const bool refused = c->mode == GPUPLUG_CAPTURE_MODE_GLOBAL ||
                         (c->mode == GPUPLUG_CAPTURE_MODE_THREAD_LOCAL && c->thread == self);
    if (!refused) continue;
    poison_and_fail(*c, std::string(op) + " is not allowed while " + stream_name(c->origin) +
                            " captures in " + mode_name(c->mode) +
                            " mode (capture in relaxed mode to allow it); the capture is "
                            "invalidated");
  }
}

bool Captures::record_event(std::uint64_t event, std::uint64_t stream) {
  std::lock_guard lock(mutex_);
  for (auto& [member, c] : by_stream_) c->events.erase(event);  // recording again replaces it
  Capture* c = capture_for_work(stream, "event_record");
  if (c == nullptr) return false;
  c->events[event] = stream;
  return true;
}

bool Captures::wait_event(std::uint64_t stream, std::uint64_t event, bool blocking) {
  std::lock_guard lock(mutex_);
  std::shared_ptr<Capture> recorded_in;
  std::uint64_t recorded_on = 0;
  for (auto& [member, c] : by_stream_) {
    if (const auto e = c->events.find(event); e != c->events.end()) {
      recorded_in = c;
      recorded_on = e->second;
      break;
    }
  }
  Capture* waiting_in = capture_for_work(stream, "stream_wait_event");
  if (recorded_in == nullptr) {
    if (waiting_in == nullptr) return false;  // an ordinary wait
    poison_and_fail(*waiting_in, "stream_wait_event: event " + std::to_string(event) +
                                     " was recorded outside the capture of " +
                                     stream_name(waiting_in->origin) +
                                     " (the wait would cross the capture's boundary); the "
                                     "capture is invalidated");
  }
  if (waiting_in == nullptr) {  // a fork: the stream joins the capture
    if (!recorded_in->poisoned.empty())
      fail(GPUPLUG_STATUS_CAPTURE_INVALIDATED,
                "stream_wait_event: the capture of " + stream_name(recorded_in->origin) +
                    " was invalidated (" + recorded_in->poisoned + ")");
    recorded_in->members.insert(stream);
    if (blocking) recorded_in->blocking.insert(stream);
    recorded_in->unjoined.insert(stream);
    by_stream_.emplace(stream, recorded_in);
    active_.store(by_stream_.size(), std::memory_order_relaxed);
    return true;
  }
  if (waiting_in != recorded_in.get())
    poison_and_fail(*waiting_in, "stream_wait_event: event " + std::to_string(event) +
                                     " was recorded in the capture of " +
                                     stream_name(recorded_in->origin) + ", not in that of " +
                                     stream_name(waiting_in->origin) +
                                     "; the capture is invalidated");
  if (stream == waiting_in->origin) waiting_in->unjoined.erase(recorded_on);  // a join
  return true;
}

void Captures::forget_stream(std::uint64_t stream) noexcept {
  std::lock_guard lock(mutex_);
  const auto it = by_stream_.find(stream);
  if (it == by_stream_.end()) return;
  const std::shared_ptr<Capture> c = it->second;
  if (c->origin == stream) {
    remove(c);
    return;
  }
  try {
    if (c->poisoned.empty())
      c->poisoned = stream_name(stream) + ", forked from the capture, was destroyed";
  } catch (...) {
    c->poisoned = "?";
  }
  c->members.erase(stream);
  c->blocking.erase(stream);
  c->unjoined.erase(stream);
  by_stream_.erase(it);
  active_.store(by_stream_.size(), std::memory_order_relaxed);
}

std::shared_ptr<const GraphData> Captures::graph(std::uint64_t graph) const {
  std::lock_guard lock(mutex_);
  const auto it = graphs_.find(graph);
  if (it == graphs_.end())
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "graph_launch: unknown graph " + std::to_string(graph) + " (destroyed)");
  return it->second;
}

void Captures::destroy_graph(std::uint64_t graph) {
  std::shared_ptr<const GraphData> last;  // freed outside the lock
  std::lock_guard lock(mutex_);
  const auto it = graphs_.find(graph);
  if (it == graphs_.end())
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "graph_destroy: unknown graph " + std::to_string(graph) + " (destroyed)");
  last = std::move(it->second);
  graphs_.erase(it);
}

}  // namespace gpuplug::sdk
#endif
