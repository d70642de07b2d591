// SPDX-License-Identifier: Apache-2.0
// StagingRing: the regions of the staging buffer that queued copies still read or write, handed
// out in ring order and reused once the work that uses them has completed.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

namespace gpuplug::vulkan {

/// Regions of a buffer of `size` bytes, each taken with the fence after which its work no longer
/// touches it (`held` regions stay in use until release() too: a d2h copy reads its bytes after
/// the fence). Regions are freed oldest first, so a region taken is always contiguous. Not
/// thread-safe: the device calls it under its queue lock. `Fence` is anything `passed` takes.
template <class Fence>
class StagingRing {
 public:
  explicit StagingRing(std::uint64_t size) : size_(size) {}

  /// The offset of `bytes` (1 .. size) free bytes, 16-byte aligned, now in use until `fence` (and
  /// release(), when `held`); nullopt when the regions in use leave no room: wait for
  /// oldest_fence() and try again.
  template <class Passed>
  std::optional<std::uint64_t> take(std::uint64_t bytes, Fence fence, bool held, Passed&& passed) {
    while (!regions_.empty() && !regions_.front().held && passed(regions_.front().fence))
      regions_.pop_front();
    bytes = (bytes + 15) / 16 * 16;
    if (bytes > size_) return std::nullopt;
    std::uint64_t at = 0;
    if (!regions_.empty()) {
      const std::uint64_t tail = regions_.front().begin;  // the oldest region in use
      const std::uint64_t head = regions_.back().end;     // where the newest ends
      const bool wrapped = regions_.back().begin < tail;  // the newest lie before the oldest
      if (!wrapped && head + bytes <= size_) {
        at = head;
      } else if (!wrapped && bytes <= tail) {
        at = 0;
      } else if (wrapped && head + bytes <= tail) {
        at = head;
      } else {
        return std::nullopt;
      }
    }
    regions_.push_back({at, at + bytes, std::move(fence), held});
    return at;
  }

  /// The fence of the oldest region in use, if any, and whether it is held past it.
  const Fence* oldest_fence(bool* held = nullptr) const {
    if (regions_.empty()) return nullptr;
    if (held != nullptr) *held = regions_.front().held;
    return &regions_.front().fence;
  }

  /// The held region at `offset` may be freed once its fence has passed.
  void release(std::uint64_t offset) {
    for (Region& r : regions_)
      if (r.begin == offset && r.held) {
        r.held = false;
        return;
      }
  }

  std::uint64_t size() const { return size_; }
  std::size_t regions() const { return regions_.size(); }

 private:
  struct Region {
    std::uint64_t begin;
    std::uint64_t end;
    Fence fence;
    bool held;
  };
  std::uint64_t size_;
  std::deque<Region> regions_;
};

}  // namespace gpuplug::vulkan
