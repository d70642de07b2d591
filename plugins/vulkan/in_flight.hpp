// SPDX-License-Identifier: Apache-2.0
// InFlight: which stream's work holds the device's queue now, for the copies and memsets that
// run on the host through a mapping instead of on the queue.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace gpuplug::vulkan {

/// Every submission is waited for under the queue lock, so at most one stream's work is in
/// flight. An operation on stream S is ordered with work in flight on stream R when S is R, or
/// when both are ordered with the default stream (stream 0, or a stream not made non-blocking):
/// the legacy default stream's order. Thread-safe.
class InFlight {
 public:
  /// Marks `stream`'s work in flight for its life (taken under the queue lock).
  class Scope {
   public:
    Scope(InFlight& f, std::uint64_t stream, bool blocking) : f_(f) {
      std::lock_guard lock(f_.mutex_);
      f_.busy_ = true;
      f_.stream_ = stream;
      f_.blocking_ = blocking;
    }
    ~Scope() {
      {
        std::lock_guard lock(f_.mutex_);
        f_.busy_ = false;
      }
      f_.done_.notify_all();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    InFlight& f_;
  };

  /// Returns once no work in flight is ordered with an operation on `stream`.
  void wait_ordered(std::uint64_t stream, bool blocking) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return !busy_ || !ordered(stream, blocking); });
  }

  /// Work is in flight and an operation on `stream` is not ordered with it: that operation
  /// must not wait for the queue.
  bool busy_unordered(std::uint64_t stream, bool blocking) {
    std::lock_guard lock(mutex_);
    return busy_ && !ordered(stream, blocking);
  }

 private:
  bool ordered(std::uint64_t stream, bool blocking) const {
    return stream == stream_ || (blocking && blocking_);
  }

  std::mutex mutex_;
  std::condition_variable done_;
  bool busy_ = false;
  std::uint64_t stream_ = 0;
  bool blocking_ = false;
};

}  // namespace gpuplug::vulkan
