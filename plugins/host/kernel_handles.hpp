// SPDX-License-Identifier: Apache-2.0
// The kernel handles of one host instance: a handle names its instance and a slot of the
// instance's own table, so launch refuses another instance's handle, or one whose module was
// unloaded, without reading any memory the handle points at.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

namespace gpuplug::host {

struct KernelRecord;

/// Handle layout: (instance serial << 32) | slot + 1. Serials are process-wide and never reused
/// (a handle of a destroyed instance never names a later one); slot 0 is no handle, so no handle
/// is 0. Thread-safety: find is lock-free (acquire loads of a table whose chunks never move);
/// add and remove take the table's mutex.
class KernelHandles {
 public:
  KernelHandles();
  ~KernelHandles();
  KernelHandles(const KernelHandles&) = delete;
  KernelHandles& operator=(const KernelHandles&) = delete;

  /// A new handle for `record` (which outlives it: remove it before freeing the record).
  /// Throws sdk::Failure(OUT_OF_MEMORY) when the table is full (2^20 handles).
  std::uint64_t add(const KernelRecord* record);
  /// Forgets `handle`: find then says "unloaded". A handle not of this table is ignored.
  void remove(std::uint64_t handle) noexcept;

  enum class Verdict { ok, foreign, unknown, unloaded };
  struct Found {
    const KernelRecord* record = nullptr;  // non-null only for Verdict::ok
    Verdict verdict = Verdict::unknown;
  };
  /// What `handle` names in this table: the hot path of launch (one compare for the serial, then
  /// three acquire loads).
  Found find(std::uint64_t handle) const noexcept {
    if ((handle >> 32) != serial_) [[unlikely]]
      return {nullptr, Verdict::foreign};
    const std::uint64_t slot = (handle & 0xffffffffu) - 1;  // slot 0 wraps: past every count
    if (slot >= count_.load(std::memory_order_acquire)) [[unlikely]]
      return {nullptr, Verdict::unknown};
    const Chunk* chunk = chunks_[slot / kChunk].load(std::memory_order_acquire);
    const KernelRecord* r = (*chunk)[slot % kChunk].load(std::memory_order_acquire);
    if (r == nullptr) [[unlikely]]
      return {nullptr, Verdict::unloaded};
    return {r, Verdict::ok};
  }

  /// This instance's serial: what a handle's high half must be.
  std::uint32_t serial() const noexcept { return serial_; }

 private:
  static constexpr std::size_t kChunk = 1024;
  static constexpr std::size_t kMaxChunks = 1024;
  using Chunk = std::array<std::atomic<const KernelRecord*>, kChunk>;

  const std::uint32_t serial_;
  std::atomic<std::uint64_t> count_{0};  // slots handed out; a slot below it is readable
  std::array<std::atomic<Chunk*>, kMaxChunks> chunks_{};
  std::mutex mutex_;  // add and remove
};

}  // namespace gpuplug::host
