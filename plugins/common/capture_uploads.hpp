// SPDX-License-Identifier: Apache-2.0
// CaptureUploads: the upload sources a GPU plugin stages while a stream captures, kept for the
// graph the capture becomes (ABI 1.3; the CUDA and HIP plugins).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace gpuplug::sdk {

/// The ABI promises that copy_h2d_async's source may be reused as soon as the call returns, and
/// that a replay uploads what the source held at capture. CUDA's and HIP's drivers record the
/// source pointer in the graph and read it at every replay, so a plugin of theirs copies the
/// bytes while a stream captures and keeps the copy here: first under the capture's id (the
/// driver's), then under the graph the capture became, and once that graph is destroyed until
/// every replay has completed (release_retired, after a device-wide synchronize, or with the
/// device). A capture that is discarded drops its copies at once (nothing replays them).
///
/// Thread-safety: every member may be called concurrently (one mutex; any_active is one relaxed
/// atomic load, so that uploads outside any capture pay nothing more).
class CaptureUploads {
 public:
  /// A capture was begun through the plugin; uploads look for a capture until it ends.
  void begun() noexcept { active_.fetch_add(1, std::memory_order_relaxed); }
  /// Whether a capture begun through the plugin may still be active.
  bool any_active() const noexcept { return active_.load(std::memory_order_relaxed) > 0; }
  /// A copy of `bytes` bytes of `src` (bytes > 0) kept for capture `capture`. Throws
  /// std::bad_alloc.
  const void* stage(std::uint64_t capture, const void* src, std::uint64_t bytes);
  /// Capture `capture` ended: its copies go to `graph`, or are dropped when graph is 0 (the
  /// capture was discarded). Never throws (dropped when there is no memory to move them).
  void ended(std::uint64_t capture, std::uint64_t graph) noexcept;
  /// `graph` was destroyed: its copies wait for release_retired. Never throws.
  void retire(std::uint64_t graph) noexcept;
  /// Frees the copies of destroyed graphs: call it when every replay has completed.
  void release_retired() noexcept;
  /// Copies held: staged for captures, kept for graphs and retired (for tests).
  std::size_t held() const;

 private:
  using Copies = std::vector<std::unique_ptr<std::byte[]>>;
  std::atomic<int> active_{0};
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, Copies> captures_;  // by capture id; guarded by mutex_
  std::unordered_map<std::uint64_t, Copies> graphs_;    // by graph value; guarded by mutex_
  Copies retired_;                                      // guarded by mutex_
};

}  // namespace gpuplug::sdk
