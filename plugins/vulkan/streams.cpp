// SPDX-License-Identifier: Apache-2.0
// VulkanDevice streams and events. Every copy and memset has completed when its call returns
// (device.hpp), so a stream orders nothing that is still pending and an event is complete once
// recorded: its time is the host's clock when event_record ran, after the work before it ended.
#include <atomic>
#include <string>

#include "device.hpp"

namespace gpuplug::vulkan {
namespace {

// Stream and event values are unique in the process, so that one backend's value is never live
// in another (the SDK then refuses a foreign stream or event by name). Trivially destructible.
constinit std::atomic<std::uint64_t> g_next_value{1};

std::uint64_t next_value() noexcept { return g_next_value.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

std::uint64_t VulkanDevice::vendor_stream_create() { return next_value(); }
std::uint64_t VulkanDevice::vendor_stream_create_flags(std::uint32_t /*flags*/) {
  // Blocking and non-blocking alike: work on no stream is ever left pending.
  return vendor_stream_create();
}
void VulkanDevice::vendor_stream_destroy(std::uint64_t /*stream*/) {}
void VulkanDevice::vendor_stream_synchronize(std::uint64_t /*stream*/) {}
void VulkanDevice::vendor_synchronize() {}

std::uint64_t VulkanDevice::vendor_event_create() { return next_value(); }
void VulkanDevice::vendor_event_destroy(std::uint64_t event) {
  std::lock_guard lock(stream_mutex_);
  recorded_.erase(event);
}
void VulkanDevice::vendor_event_record(std::uint64_t event, std::uint64_t /*stream*/) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(stream_mutex_);
  recorded_[event] = now;
}
void VulkanDevice::vendor_stream_wait_event(std::uint64_t /*stream*/, std::uint64_t /*event*/) {}
void VulkanDevice::vendor_event_synchronize(std::uint64_t /*event*/) {}
bool VulkanDevice::vendor_event_query(std::uint64_t /*event*/) { return true; }

float VulkanDevice::vendor_event_elapsed_ms(std::uint64_t start, std::uint64_t end) {
  std::lock_guard lock(stream_mutex_);
  const auto a = recorded_.find(start);
  const auto b = recorded_.find(end);
  if (a == recorded_.end() || b == recorded_.end())
    sdk::fail(
        GPUPLUG_STATUS_UNAVAILABLE,
        "event " + std::to_string(a == recorded_.end() ? start : end) + " has not been recorded");
  return std::chrono::duration<float, std::milli>(b->second - a->second).count();
}

}  // namespace gpuplug::vulkan
