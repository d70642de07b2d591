// SPDX-License-Identifier: Apache-2.0
// VulkanDevice memory: device-address blocks, allocations carved from them, managed memory.
#include <algorithm>
#include <string>

#include "device.hpp"

namespace gpuplug::vulkan {
namespace {

std::uint64_t round_up(std::uint64_t value, std::uint64_t to) noexcept {
  return (value + to - 1) / to * to;
}

}  // namespace

Block VulkanDevice::make_block(std::uint64_t bytes, bool managed) {
  Block block;
  block.size = bytes;
  block.managed = managed;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  const std::string what = "(" + std::to_string(bytes) + " bytes)";
  check(vk_.create_buffer(device_, &info, nullptr, &block.buffer), "vkCreateBuffer" + what);
  try {
    VkMemoryRequirements need{};
    vk_.get_buffer_memory_requirements(device_, block.buffer, &need);
    std::uint32_t type = managed ? host_type_ : device_type_;
    if ((need.memoryTypeBits & (1u << type)) == 0) {
      // The buffer cannot live in the preferred type: the first allowed one with the flags.
      const VkMemoryPropertyFlags want =
          managed ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                  : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
      type = UINT32_MAX;
      for (std::uint32_t i = 0; i < memory_props_.memoryTypeCount && type == UINT32_MAX; ++i)
        if ((need.memoryTypeBits & (1u << i)) != 0 &&
            (memory_props_.memoryTypes[i].propertyFlags & want) == want)
          type = i;
      if (type == UINT32_MAX)
        sdk::fail(GPUPLUG_STATUS_UNSUPPORTED, std::string("no memory type holds a ") +
                                                  (managed ? "managed" : "device") + " buffer " +
                                                  what);
    }
    VkMemoryAllocateFlagsInfo flags{};
    flags.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO;
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    VkMemoryAllocateInfo alloc{};
    alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    alloc.pNext = &flags;
    alloc.allocationSize = need.size;
    alloc.memoryTypeIndex = type;
    check(vk_.allocate_memory(device_, &alloc, nullptr, &block.memory), "vkAllocateMemory" + what);
    check(vk_.bind_buffer_memory(device_, block.buffer, block.memory, 0), "vkBindBufferMemory");
    constexpr VkMemoryPropertyFlags kHostView =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    if (managed || (memory_props_.memoryTypes[type].propertyFlags & kHostView) == kHostView) {
      void* mapped = nullptr;
      check(vk_.map_memory(device_, block.memory, 0, VK_WHOLE_SIZE, 0, &mapped), "vkMapMemory");
      (managed ? block.mapped : block.host_view) = static_cast<std::byte*>(mapped);
    }
    VkBufferDeviceAddressInfo address{};
    address.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO;
    address.buffer = block.buffer;
    block.address = vk_.get_buffer_device_address(device_, &address);
    if (block.address == 0)
      sdk::fail(GPUPLUG_STATUS_DEVICE_ERROR, "vkGetBufferDeviceAddress returned 0");
  } catch (...) {
    destroy_block(block);
    throw;
  }
  block.free.emplace(0, bytes);
  return block;
}

void VulkanDevice::destroy_block(Block& block) noexcept {
  // vkFreeMemory unmaps a mapped allocation.
  if (block.buffer != VK_NULL_HANDLE) vk_.destroy_buffer(device_, block.buffer, nullptr);
  if (block.memory != VK_NULL_HANDLE) vk_.free_memory(device_, block.memory, nullptr);
  block.buffer = VK_NULL_HANDLE;
  block.memory = VK_NULL_HANDLE;
  block.mapped = nullptr;
  block.host_view = nullptr;
}

std::uint64_t VulkanDevice::carve(std::uint64_t bytes, bool managed) {
  const std::uint64_t need = round_up(bytes, kAlignment);
  if (bytes > max_allocation_ || need > max_allocation_)
    sdk::fail(GPUPLUG_STATUS_OUT_OF_MEMORY,
              std::string(managed ? "alloc_managed" : "alloc") + " of " + std::to_string(bytes) +
                  " bytes exceeds the device's largest buffer (" + std::to_string(max_allocation_) +
                  " bytes: the least of maxMemoryAllocationSize and maxBufferSize)");
  std::lock_guard lock(memory_mutex_);
  auto take = [&](Block& block) -> std::uint64_t {
    for (auto it = block.free.begin(); it != block.free.end(); ++it) {
      if (it->second < need) continue;
      const std::uint64_t offset = it->first;
      const std::uint64_t left = it->second - need;
      block.free.erase(it);
      if (left > 0) block.free.emplace(offset + need, left);
      block.used.emplace(offset, need);
      return block.address + offset;
    }
    return 0;
  };
  for (auto& block : blocks_)
    if (block->managed == managed)
      if (const std::uint64_t ptr = take(*block); ptr != 0) return ptr;
  const std::uint64_t size = std::min(std::max(need, kBlockBytes), max_allocation_);
  index_.reserve(index_.size() + 1);
  blocks_.reserve(blocks_.size() + 1);
  by_address_.reserve(by_address_.size() + 1);
  auto block = std::make_unique<Block>(make_block(size, managed));
  Block& b = *block;
  blocks_.push_back(std::move(block));
  by_address_.emplace(b.address, &b);
  index_.insert(sdk::detail::Interval{b.address, b.size,
                                      managed ? GPUPLUG_ALLOC_MANAGED : GPUPLUG_ALLOC_DEVICE});
  if (!managed) block_bytes_ += b.size;
  return take(b);
}

// alloc and free are the "potentially unsafe" calls of a global or thread-local capture
// (captures.hpp). A refused free has freed the memory already (the ledger forgot it before the
// hook ran), and only invalidates the capture.
std::uint64_t VulkanDevice::vendor_alloc(std::uint64_t bytes) {
  if (captures_.any()) [[unlikely]]
    captures_.check_unsafe_call("alloc");
  return carve(bytes, false);
}
std::uint64_t VulkanDevice::vendor_alloc_managed(std::uint64_t bytes) {
  if (captures_.any()) [[unlikely]]
    captures_.check_unsafe_call("alloc_managed");
  return carve(bytes, true);
}

Location VulkanDevice::locate(std::uint64_t address) {
  std::lock_guard lock(memory_mutex_);
  const auto found = index_.find(address);
  if (!found)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "device address " + std::to_string(address) + " is in no block");
  Block* block = by_address_.at(found->ptr);
  return Location{block, address - block->address};
}

// Waits for every stream first (as cuMemFree does), so queued work never touches a range after
// it is freed and carved again.
void VulkanDevice::vendor_free(std::uint64_t ptr, gpuplug_alloc_kind_t /*kind*/) {
  std::vector<Point> all;
  {
    std::lock_guard lock(queue_mutex_);
    all = every_stream();
  }
  wait(all, "free");
  release_range(ptr);
  if (captures_.any()) [[unlikely]]
    captures_.check_unsafe_call("free");
}

void VulkanDevice::release_range(std::uint64_t ptr) {
  std::lock_guard lock(memory_mutex_);
  const auto found = index_.find(ptr);
  if (!found) return;  // the SDK's ledger knew it; nothing here holds it
  Block& block = *by_address_.at(found->ptr);
  const auto used = block.used.find(ptr - block.address);
  if (used == block.used.end()) return;
  std::uint64_t offset = used->first;
  std::uint64_t size = used->second;
  block.used.erase(used);
  // Coalesce with the free neighbours. Work on it has completed: every call waits for its work.
  auto next = block.free.lower_bound(offset);
  if (next != block.free.end() && next->first == offset + size) {
    size += next->second;
    next = block.free.erase(next);
  }
  if (next != block.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      block.free.erase(prev);
    }
  }
  block.free.emplace(offset, size);
  if (!block.used.empty()) return;
  // An empty block is released unless it is the only one of its kind (kept for reuse).
  const auto same_kind = std::count_if(blocks_.begin(), blocks_.end(),
                                       [&](const auto& b) { return b->managed == block.managed; });
  if (same_kind <= 1) return;
  index_.erase(block.address, block.size);
  by_address_.erase(block.address);
  if (!block.managed) block_bytes_ -= block.size;
  destroy_block(block);
  std::erase_if(blocks_, [&](const auto& b) { return b.get() == &block; });
}

void VulkanDevice::vendor_memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) {
  total_bytes = 0;
  for (std::uint32_t i = 0; i < memory_props_.memoryHeapCount; ++i)
    if ((memory_props_.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0)
      total_bytes += memory_props_.memoryHeaps[i].size;
  std::lock_guard lock(memory_mutex_);
  std::uint64_t used = 0;
  for (const auto& block : blocks_)
    for (const auto& [offset, bytes] : block->used) used += bytes;
  free_bytes = total_bytes > used ? total_bytes - used : 0;
}

void* VulkanDevice::vendor_host_address(std::uint64_t ptr) {
  const Location at = locate(ptr);
  if (at.block->mapped == nullptr)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "device memory has no host address (pointer " + std::to_string(ptr) + ")");
  return at.block->mapped + at.offset;
}

}  // namespace gpuplug::vulkan
