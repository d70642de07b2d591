// SPDX-License-Identifier: Apache-2.0
// VulkanDevice::submit: one command buffer recorded and submitted on a stream's queue, waiting
// for the points the stream's work is ordered after and signalling the stream's next value.
#pragma once

#include <string>
#include <vector>

#include "device.hpp"

namespace gpuplug::vulkan {

// The semaphore waits make what the awaited work wrote visible to this submission; the closing
// barrier makes what this one writes visible to the host (d2h through the staging ring, managed
// memory), which reads it once the signalled value is reached.
template <class Record>
Point VulkanDevice::submit(const char* op, const std::shared_ptr<Stream>& s, Record&& record) {
  VkCommandBuffer cmd = idle_command_buffer(op);
  try {
    VkCommandBufferBeginInfo begin{};
    begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vk_.begin_command_buffer(cmd, &begin), std::string(op) + ": vkBeginCommandBuffer");
    record(cmd);
    VkMemoryBarrier after{};
    after.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    after.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
    after.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vk_.cmd_pipeline_barrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                             0, 1, &after, 0, nullptr, 0, nullptr);
    check(vk_.end_command_buffer(cmd), std::string(op) + ": vkEndCommandBuffer");

    const std::vector<Point> after_points = ordered_points(s);
    std::vector<VkSemaphore> semaphores;
    std::vector<std::uint64_t> values;
    std::vector<std::shared_ptr<Stream>> waited;
    for (const Point& p : after_points) {
      semaphores.push_back(p.stream->semaphore);
      values.push_back(p.value);
      if (p.stream != s) waited.push_back(p.stream);
    }
    const std::vector<VkPipelineStageFlags> stages(semaphores.size(),
                                                   VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
    const std::uint64_t value = s->submitted + 1;
    VkTimelineSemaphoreSubmitInfo timeline{};
    timeline.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO;
    timeline.waitSemaphoreValueCount = static_cast<std::uint32_t>(values.size());
    timeline.pWaitSemaphoreValues = values.data();
    timeline.signalSemaphoreValueCount = 1;
    timeline.pSignalSemaphoreValues = &value;
    VkSubmitInfo info{};
    info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    info.pNext = &timeline;
    info.waitSemaphoreCount = static_cast<std::uint32_t>(semaphores.size());
    info.pWaitSemaphores = semaphores.data();
    info.pWaitDstStageMask = stages.data();
    info.commandBufferCount = 1;
    info.pCommandBuffers = &cmd;
    info.signalSemaphoreCount = 1;
    info.pSignalSemaphores = &s->semaphore;
    check(vk_.queue_submit(s->queue, 1, &info, VK_NULL_HANDLE),
          std::string(op) + ": vkQueueSubmit");
    s->submitted = value;
    s->waits.clear();
    submissions_.push_back({cmd, {s, value}, std::move(waited)});
    return {s, value};
  } catch (...) {
    idle_.push_back(cmd);
    throw;
  }
}

}  // namespace gpuplug::vulkan
