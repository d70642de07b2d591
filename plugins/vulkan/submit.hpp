// SPDX-License-Identifier: Apache-2.0
// VulkanDevice::submit_and_wait: one command buffer recorded, submitted and waited for, its
// stream's work in flight meanwhile (in_flight.hpp).
#pragma once

#include <string>

#include "device.hpp"

namespace gpuplug::vulkan {

// The recording opens with a barrier from everything earlier submissions did (complete by then:
// their fence was waited for) to everything this one does, and closes with one to the host, which
// reads what it wrote (d2h through the staging buffer, managed memory) once the fence signals.
template <class Record>
void VulkanDevice::submit_and_wait(const char* op, std::uint64_t stream, Record&& record) {
  const InFlight::Scope busy(in_flight_, stream, blocks_with_default(stream));
  check(vk_.reset_command_buffer(cmd_, 0), std::string(op) + ": vkResetCommandBuffer");
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vk_.begin_command_buffer(cmd_, &begin), std::string(op) + ": vkBeginCommandBuffer");
  VkMemoryBarrier before{};
  before.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  before.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  before.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
  vk_.cmd_pipeline_barrier(cmd_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                           VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &before, 0, nullptr, 0,
                           nullptr);
  record(cmd_);
  VkMemoryBarrier after{};
  after.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  after.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  after.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vk_.cmd_pipeline_barrier(cmd_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                           1, &after, 0, nullptr, 0, nullptr);
  check(vk_.end_command_buffer(cmd_), std::string(op) + ": vkEndCommandBuffer");
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd_;
  check(vk_.queue_submit(queue_, 1, &submit, fence_), std::string(op) + ": vkQueueSubmit");
  const VkResult waited = vk_.wait_for_fences(device_, 1, &fence_, VK_TRUE, UINT64_MAX);
  check(vk_.reset_fences(device_, 1, &fence_), std::string(op) + ": vkResetFences");
  check(waited, std::string(op) + ": vkWaitForFences");
}

}  // namespace gpuplug::vulkan
