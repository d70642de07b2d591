// SPDX-License-Identifier: Apache-2.0
// VulkanDevice streams and events. Every operation has completed when its call returns
// (device.hpp), so a stream orders nothing that is still pending and an event is complete once
// recorded: its time is a timestamp written on the queue after the work before it, or, on a
// queue family without timestamps, the host's clock when event_record ran.
#include <atomic>
#include <chrono>
#include <string>

#include "device.hpp"
#include "submit.hpp"

namespace gpuplug::vulkan {
namespace {

// Stream and event values are unique in the process, so that one backend's value is never live
// in another (the SDK then refuses a foreign stream or event by name). Trivially destructible.
constinit std::atomic<std::uint64_t> g_next_value{1};

std::uint64_t next_value() noexcept { return g_next_value.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

std::uint64_t VulkanDevice::vendor_stream_create() { return next_value(); }
std::uint64_t VulkanDevice::vendor_stream_create_flags(std::uint32_t flags) {
  // Blocking and non-blocking run alike (work on no stream is ever left pending); the flag
  // decides only whether default-stream work invalidates the stream's capture.
  const std::uint64_t stream = vendor_stream_create();
  if (flags == GPUPLUG_STREAM_NON_BLOCKING) {
    std::lock_guard lock(stream_mutex_);
    non_blocking_.insert(stream);
  }
  return stream;
}
void VulkanDevice::vendor_stream_destroy(std::uint64_t stream) {
  if (captures_.any()) [[unlikely]]
    captures_.forget_stream(stream);
  std::lock_guard lock(stream_mutex_);
  non_blocking_.erase(stream);
}
void VulkanDevice::vendor_stream_synchronize(std::uint64_t stream) {
  if (captures_.any()) [[unlikely]]
    captures_.check_synchronize(stream, "stream_synchronize");
}
void VulkanDevice::vendor_synchronize() {
  if (captures_.any()) [[unlikely]]
    captures_.check_device_synchronize("synchronize");
}

std::uint64_t VulkanDevice::vendor_event_create() { return next_value(); }
void VulkanDevice::vendor_event_destroy(std::uint64_t event) {
  std::lock_guard lock(stream_mutex_);
  recorded_.erase(event);
}
std::uint64_t VulkanDevice::event_time_ns(std::uint64_t stream) {
  if (query_pool_ == VK_NULL_HANDLE)
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
  std::lock_guard lock(queue_mutex_);
  submit_and_wait("event_record", stream, [&](VkCommandBuffer cmd) {
    vk_.cmd_reset_query_pool(cmd, query_pool_, 0, 1);
    vk_.cmd_write_timestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, query_pool_, 0);
  });
  std::uint64_t ticks = 0;
  check(vk_.get_query_pool_results(device_, query_pool_, 0, 1, sizeof ticks, &ticks, sizeof ticks,
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "event_record: vkGetQueryPoolResults");
  return static_cast<std::uint64_t>(static_cast<double>(ticks & timestamp_mask_) *
                                    timestamp_period_ns_);
}

void VulkanDevice::vendor_event_record(std::uint64_t event, std::uint64_t stream) {
  if (captures_.any() && captures_.record_event(event, stream)) [[unlikely]]
    return;
  const std::uint64_t now = event_time_ns(stream);
  std::lock_guard lock(stream_mutex_);
  recorded_[event] = now;
}
void VulkanDevice::vendor_stream_wait_event(std::uint64_t stream, std::uint64_t event) {
  // Every event has completed when recorded: a wait orders nothing, except in a capture (a fork
  // or a join).
  if (captures_.any()) [[unlikely]]
    captures_.wait_event(stream, event, blocks_with_default(stream));
}
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
  // An end recorded before its start (as the ABI allows) gives a negative time.
  const double ns = b->second >= a->second ? static_cast<double>(b->second - a->second)
                                           : -static_cast<double>(a->second - b->second);
  return static_cast<float>(ns / 1e6);
}

}  // namespace gpuplug::vulkan
