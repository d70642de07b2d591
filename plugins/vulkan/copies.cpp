// SPDX-License-Identifier: Apache-2.0
// VulkanDevice copies and memset: vkCmdCopyBuffer through the staging ring, vkCmdFillBuffer;
// on the host through a mapping where on_host says so (device.hpp).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "device.hpp"
#include "submit.hpp"

namespace gpuplug::vulkan {
namespace {

// Orders the transfers recorded before it with those after it (one command buffer).
void transfer_barrier(const DeviceApi& vk, VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vk.cmd_pipeline_barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                          &barrier, 0, nullptr, 0, nullptr);
}

void copy(const DeviceApi& vk, VkCommandBuffer cmd, VkBuffer src, std::uint64_t src_offset,
          VkBuffer dst, std::uint64_t dst_offset, std::uint64_t bytes) {
  const VkBufferCopy region{src_offset, dst_offset, bytes};
  vk.cmd_copy_buffer(cmd, src, dst, 1, &region);
}

}  // namespace

bool VulkanDevice::on_host(std::uint64_t stream, std::initializer_list<Location> at) {
  bool managed = true;
  for (const Location& l : at) {
    if (l.block->mapped == nullptr && l.block->host_view == nullptr) return false;
    managed = managed && l.block->mapped != nullptr;
  }
  std::vector<Point> before;
  {
    std::lock_guard lock(queue_mutex_);
    const std::shared_ptr<Stream> s = stream_of(stream, "copy");
    if (!managed && !busy_unordered(*s)) return false;
    before = ordered_points(s);
  }
  wait(before, "copy");
  return true;
}

namespace {

std::byte* host_bytes(const Location& at) {
  return (at.block->mapped != nullptr ? at.block->mapped : at.block->host_view) + at.offset;
}

}  // namespace

// A host-side copy or memset has completed at return: the stream's latest point stands for it.
Point VulkanDevice::copy_h2d_now(std::uint64_t dst, const void* src, std::uint64_t bytes,
                                 std::uint64_t stream) {
  const Location to = locate(dst);
  const auto* from = static_cast<const std::byte*>(src);
  if (on_host(stream, {to})) {  // coherent memory: the next submission sees the bytes
    std::memcpy(host_bytes(to), from, bytes);
    return {};
  }
  std::unique_lock lock(queue_mutex_);
  const std::shared_ptr<Stream> s = stream_of(stream, "copy_h2d");
  Point last;
  for (std::uint64_t done = 0; done < bytes;) {
    const std::uint64_t n = std::min(bytes - done, kStagingChunk);
    const std::uint64_t at = stage(lock, s, n, false, "copy_h2d");
    std::memcpy(staging_.mapped + at, from + done, n);  // staged now: src is free at return
    last = submit("copy_h2d", s, [&](VkCommandBuffer cmd) {
      copy(vk_, cmd, staging_.buffer, at, to.block->buffer, to.offset + done, n);
    });
    done += n;
  }
  return last;
}

void VulkanDevice::copy_d2h_now(void* dst, std::uint64_t src, std::uint64_t bytes,
                                std::uint64_t stream) {
  const Location from = locate(src);
  auto* to = static_cast<std::byte*>(dst);
  if (on_host(stream, {from})) {  // what completed submissions wrote is visible to the host
    std::memcpy(to, host_bytes(from), bytes);
    return;
  }
  std::unique_lock lock(queue_mutex_);
  const std::shared_ptr<Stream> s = stream_of(stream, "copy_d2h");
  for (std::uint64_t done = 0; done < bytes;) {
    const std::uint64_t n = std::min(bytes - done, kStagingChunk);
    const std::uint64_t at = stage(lock, s, n, true, "copy_d2h");
    Point copied;
    try {
      copied = submit("copy_d2h", s, [&](VkCommandBuffer cmd) {
        copy(vk_, cmd, from.block->buffer, from.offset + done, staging_.buffer, at, n);
      });
      lock.unlock();
      wait({copied}, "copy_d2h");
      std::memcpy(to + done, staging_.mapped + at, n);
      lock.lock();
    } catch (...) {
      if (!lock.owns_lock()) lock.lock();
      ring_.release(at);
      throw;
    }
    ring_.release(at);
    done += n;
  }
}

Point VulkanDevice::copy_d2d_now(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                                 std::uint64_t stream) {
  const Location to = locate(dst);
  const Location from = locate(src);
  if (on_host(stream, {to, from})) {
    std::memmove(host_bytes(to), host_bytes(from), bytes);
    return {};
  }
  std::unique_lock lock(queue_mutex_);
  const std::shared_ptr<Stream> s = stream_of(stream, "copy_d2d");
  const bool overlap =
      to.block == from.block && to.offset < from.offset + bytes && from.offset < to.offset + bytes;
  if (!overlap) {
    return submit("copy_d2d", s, [&](VkCommandBuffer cmd) {
      copy(vk_, cmd, from.block->buffer, from.offset, to.block->buffer, to.offset, bytes);
    });
  }
  // Overlapping regions of one buffer are not allowed in one vkCmdCopyBuffer: through the
  // staging ring, in chunks ordered like memmove (backwards when the destination is later).
  const bool backwards = to.offset > from.offset;
  Point last;
  for (std::uint64_t done = 0; done < bytes;) {
    const std::uint64_t n = std::min(bytes - done, kStagingChunk);
    const std::uint64_t at = backwards ? bytes - done - n : done;
    const std::uint64_t staged = stage(lock, s, n, false, "copy_d2d");
    last = submit("copy_d2d", s, [&](VkCommandBuffer cmd) {
      copy(vk_, cmd, from.block->buffer, from.offset + at, staging_.buffer, staged, n);
      transfer_barrier(vk_, cmd);
      copy(vk_, cmd, staging_.buffer, staged, to.block->buffer, to.offset + at, n);
    });
    done += n;
  }
  return last;
}

using Kind = sdk::CapturedOp::Kind;

// The synchronous copies are work on the default stream: while a blocking stream captures they
// invalidate it (captured_copy throws); they are never recorded.
void VulkanDevice::vendor_copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) {
  if (captures_.any()) [[unlikely]]
    captured_copy(0, "copy_h2d", Kind::copy_h2d, dst, src, bytes, false);
  wait({copy_h2d_now(dst, src, bytes, 0)}, "copy_h2d");
}
void VulkanDevice::vendor_copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) {
  if (captures_.any()) [[unlikely]]
    captured_copy(0, "copy_d2h", Kind::copy_d2h, reinterpret_cast<std::uintptr_t>(dst),
                  reinterpret_cast<const void*>(src), bytes, false);
  copy_d2h_now(dst, src, bytes, 0);
}
void VulkanDevice::vendor_copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) {
  if (captures_.any()) [[unlikely]]
    captured_copy(0, "copy_d2d", Kind::copy_d2d, dst, reinterpret_cast<const void*>(src), bytes,
                  false);
  wait({copy_d2d_now(dst, src, bytes, 0)}, "copy_d2d");
}

// copy_h2d_async stages its source at call time, so it is free at return, as the ABI asks (a
// capture keeps a copy of it); copy_d2h_async returns once its bytes are in `dst`.
void VulkanDevice::vendor_copy_h2d_async(std::uint64_t dst, const void* src, std::uint64_t bytes,
                                         std::uint64_t stream) {
  if (captures_.any() &&
      captured_copy(stream, "copy_h2d_async", Kind::copy_h2d, dst, src, bytes, true)) [[unlikely]]
    return;
  copy_h2d_now(dst, src, bytes, stream);
}
void VulkanDevice::vendor_copy_d2h_async(void* dst, std::uint64_t src, std::uint64_t bytes,
                                         std::uint64_t stream) {
  if (captures_.any() &&
      captured_copy(stream, "copy_d2h_async", Kind::copy_d2h,
                    reinterpret_cast<std::uintptr_t>(dst), reinterpret_cast<const void*>(src),
                    bytes, false)) [[unlikely]]
    return;
  copy_d2h_now(dst, src, bytes, stream);
}
void VulkanDevice::vendor_copy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                                         std::uint64_t stream) {
  if (captures_.any() &&
      captured_copy(stream, "copy_d2d_async", Kind::copy_d2d, dst,
                    reinterpret_cast<const void*>(src), bytes, false)) [[unlikely]]
    return;
  copy_d2d_now(dst, src, bytes, stream);
}

void VulkanDevice::vendor_memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                                    std::uint64_t stream) {
  if (captures_.any() && captures_.record(stream, "memset_d8", [&] {
        return sdk::CapturedOp::fill(reinterpret_cast<void*>(dst), value,
                                     static_cast<std::size_t>(bytes));
      })) [[unlikely]]
    return;
  memset_now(dst, value, bytes, stream);
}

Point VulkanDevice::memset_now(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                               std::uint64_t stream) {
  const Location to = locate(dst);
  if (on_host(stream, {to})) {
    std::memset(host_bytes(to), value, bytes);
    return {};
  }
  // vkCmdFillBuffer needs a 4-byte-aligned offset and size: it fills the aligned middle; the
  // ragged ends (at most 3 bytes each) are copied from the staging ring.
  const std::uint64_t head = std::min<std::uint64_t>(bytes, (4 - to.offset % 4) % 4);
  const std::uint64_t middle = (bytes - head) / 4 * 4;
  const std::uint64_t tail = bytes - head - middle;
  const std::uint32_t word = 0x01010101u * value;
  std::unique_lock lock(queue_mutex_);
  const std::shared_ptr<Stream> s = stream_of(stream, "memset_d8");
  std::uint64_t at = 0;
  if (head + tail > 0) {
    at = stage(lock, s, 8, false, "memset_d8");
    std::memset(staging_.mapped + at, value, 8);
  }
  return submit("memset_d8", s, [&](VkCommandBuffer cmd) {
    if (head > 0) copy(vk_, cmd, staging_.buffer, at, to.block->buffer, to.offset, head);
    if (middle > 0) vk_.cmd_fill_buffer(cmd, to.block->buffer, to.offset + head, middle, word);
    if (tail > 0)
      copy(vk_, cmd, staging_.buffer, at, to.block->buffer, to.offset + head + middle, tail);
  });
}

}  // namespace gpuplug::vulkan
