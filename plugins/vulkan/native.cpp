// SPDX-License-Identifier: Apache-2.0
// VulkanDevice's interop hooks: the Vulkan objects behind the backend (<gpuplug/vulkan_handles.h>)
// and the refusal of imports, which need external-memory extensions this plugin does not use.
#include "device.hpp"

namespace gpuplug::vulkan {
namespace {

void lock_queue(void* owner) { static_cast<std::mutex*>(owner)->lock(); }
void unlock_queue(void* owner) { static_cast<std::mutex*>(owner)->unlock(); }

}  // namespace

void VulkanDevice::fill_handles() noexcept {
  handles_.struct_size = sizeof handles_;
  handles_.api_version = api_.instance_version;
  handles_.queue_family = physical_.compute_family;
  handles_.instance = api_.instance;
  handles_.physical_device = physical_.handle;
  handles_.device = device_;
  handles_.queue_owner = &queue_mutex_;
  handles_.lock_queue = lock_queue;
  handles_.unlock_queue = unlock_queue;
}

// The stream's own copy of the handles, its queue and semaphore and the value its work queued so
// far reaches: the struct lives as long as the stream.
sdk::NativeStreamHandles VulkanDevice::vendor_native_handles(std::uint64_t stream) {
  std::lock_guard lock(queue_mutex_);
  const std::shared_ptr<Stream> s = stream_of(stream, "native");
  gpuplug_vulkan_handles_t& h = s->handles;
  h = handles_;
  h.queue_index = s->queue_index;
  h.queue = s->queue;
  h.semaphore = s->semaphore;
  h.semaphore_value = s->submitted;
  return {static_cast<std::int32_t>(config().ordinal), &h, s->queue};
}

void VulkanDevice::vendor_check_import(std::uint64_t /*address*/, std::uint64_t /*bytes*/) {
  sdk::fail(GPUPLUG_STATUS_UNSUPPORTED,
            "import_memory: the vulkan plugin imports no memory yet: a device address made "
            "outside it belongs to a VkBuffer it cannot find (importing would take "
            "VK_KHR_external_memory_fd or VK_EXT_external_memory_host)");
}

std::uint64_t VulkanDevice::vendor_import_stream(void* /*native*/) {
  sdk::fail(GPUPLUG_STATUS_UNSUPPORTED,
            "import_stream: the vulkan plugin imports no streams: its streams are timelines on "
            "its own VkDevice's queues, and a VkQueue of another VkDevice cannot join them");
}

}  // namespace gpuplug::vulkan
