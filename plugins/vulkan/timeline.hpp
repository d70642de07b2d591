// SPDX-License-Identifier: Apache-2.0
// A stream as a logical queue: a timeline semaphore that each of its submissions signals one
// value further, the VkQueue they go to, and the points on other timelines (events) its next
// submission waits for. An event is one such point.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <gpuplug/vulkan_handles.h>

#include "driver.hpp"

namespace gpuplug::vulkan {

struct Stream;

/// A value on a stream's timeline: reached once the submission that signals it has completed.
/// Holds the stream, so that its semaphore outlives whatever waits on the point.
struct Point {
  std::shared_ptr<Stream> stream;
  std::uint64_t value = 0;
};

/// Work on stream `a` is ordered after earlier work on stream `b` without an event when they
/// are one stream, or when one of them is the legacy default stream (0) and the other is
/// ordered with it (`blocking`: not made non-blocking). Two streams other than 0 are never
/// ordered directly: through 0 their order follows from the rule applied twice.
constexpr bool ordered(std::uint64_t a, bool a_blocking, std::uint64_t b, bool b_blocking) {
  return a == b || (a == 0 && b_blocking) || (b == 0 && a_blocking);
}

/// One stream. The fields after `semaphore` are guarded by the device's queue lock, except
/// `completed`, a value the semaphore is known to have reached (a cache of
/// vkGetSemaphoreCounterValue, only ever raised).
struct Stream {
  /// Creates the timeline semaphore (at 0). Throws sdk::Failure on a driver error.
  Stream(const DeviceApi& vk, VkDevice device, std::uint64_t id, bool blocking, VkQueue queue,
         std::uint32_t queue_index);
  /// Destroys the semaphore: every submission that signals or waits on it holds the stream, so
  /// none is pending by then.
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  const DeviceApi& vk;
  const VkDevice device;
  const std::uint64_t id;  // 0: the legacy default stream
  const bool blocking;     // ordered with the default stream
  const VkQueue queue;
  const std::uint32_t queue_index;
  VkSemaphore semaphore = VK_NULL_HANDLE;

  std::uint64_t submitted = 0;  // the value the latest submission signals
  std::atomic<std::uint64_t> completed{0};
  std::vector<Point> waits;  // stream_wait_event's points, for the next submission
  gpuplug_vulkan_handles_t handles{};  // what native() last gave out for this stream

  /// The point the latest submission reaches (value 0: nothing submitted yet).
  Point last(const std::shared_ptr<Stream>& self) const { return {self, submitted}; }
};

/// Whether `p` has been reached, asking the driver only when the cache says no.
bool passed(const Point& p);

}  // namespace gpuplug::vulkan
