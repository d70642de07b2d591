// SPDX-License-Identifier: Apache-2.0
// VulkanDevice mapped host memory: carved from the host-visible, coherent, mapped blocks that
// managed memory uses, so the host pointer and the buffer device address name the same bytes.
#include <cstring>
#include <string>

#include "device.hpp"

namespace gpuplug::vulkan {

std::uint64_t VulkanDevice::mapped_address(const void* host) {
  const auto* p = static_cast<const std::byte*>(host);
  std::lock_guard lock(memory_mutex_);
  for (const auto& block : blocks_)
    if (block->mapped != nullptr && p >= block->mapped && p < block->mapped + block->size)
      return block->address + static_cast<std::uint64_t>(p - block->mapped);
  sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
            "host pointer " + std::to_string(reinterpret_cast<std::uintptr_t>(host)) +
                " is in no mapped block of this device");
}

sdk::MappedHost VulkanDevice::vendor_alloc_host_mapped(std::uint64_t bytes) {
  const std::uint64_t device = carve(bytes, true);
  try {
    void* host = vendor_host_address(device);
    std::memset(host, 0, bytes);  // blocks are reused: the ABI promises zeroed memory
    return {host, device};
  } catch (...) {
    vendor_free(device, GPUPLUG_ALLOC_PINNED);
    throw;
  }
}

void VulkanDevice::vendor_free_host_mapped(void* host) {
  vendor_free(mapped_address(host), GPUPLUG_ALLOC_PINNED);
}

std::uint64_t VulkanDevice::vendor_host_ptr_to_device(void* host) { return mapped_address(host); }

}  // namespace gpuplug::vulkan
