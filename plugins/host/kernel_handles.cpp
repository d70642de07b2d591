// SPDX-License-Identifier: Apache-2.0
// KernelHandles: handles of one host instance, checked without dereferencing them.
#include "kernel_handles.hpp"

#include "failure.hpp"

namespace gpuplug::host {

namespace {

/// Serials start at 1 and only grow: 2^32 instances in one process before one would repeat.
/// Trivially destructible, as plugins need.
std::atomic<std::uint32_t> next_serial{1};

}  // namespace

KernelHandles::KernelHandles() : serial_(next_serial.fetch_add(1, std::memory_order_relaxed)) {}

KernelHandles::~KernelHandles() {
  for (auto& chunk : chunks_) delete chunk.load(std::memory_order_relaxed);
}

std::uint64_t KernelHandles::add(const KernelRecord* record) {
  std::lock_guard lock(mutex_);
  const std::uint64_t slot = count_.load(std::memory_order_relaxed);
  if (slot >= kChunk * kMaxChunks)
    sdk::fail(GPUPLUG_STATUS_OUT_OF_MEMORY,
              "get_function: this host instance has handed out " + std::to_string(slot) +
                  " kernel handles, its table's limit");
  Chunk* chunk = chunks_[slot / kChunk].load(std::memory_order_relaxed);
  if (chunk == nullptr) {
    chunk = new Chunk{};  // value-initialised: every entry null
    chunks_[slot / kChunk].store(chunk, std::memory_order_release);
  }
  (*chunk)[slot % kChunk].store(record, std::memory_order_release);
  count_.store(slot + 1, std::memory_order_release);
  return (static_cast<std::uint64_t>(serial_) << 32) | (slot + 1);
}

void KernelHandles::remove(std::uint64_t handle) noexcept {
  if ((handle >> 32) != serial_) return;
  std::lock_guard lock(mutex_);
  const std::uint64_t slot = (handle & 0xffffffffu) - 1;
  if (slot >= count_.load(std::memory_order_relaxed)) return;
  chunks_[slot / kChunk].load(std::memory_order_relaxed)->at(slot % kChunk).store(
      nullptr, std::memory_order_release);
}

}  // namespace gpuplug::host
