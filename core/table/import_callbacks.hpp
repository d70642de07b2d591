// SPDX-License-Identifier: Apache-2.0
// ImportCallbacks (core-private): the on_release callbacks of one backend's imported ranges.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpuplug::detail {

/// The plugin only forgets an imported range (ABI 1.2 import_memory: it never calls back into
/// C++); the core keeps the range's on_release here and runs it after the plugin forgot it:
/// after `free`, or after the sweep of sweep_unreleased or destroy. Each callback is taken out
/// under the lock before it runs, so it runs exactly once, on the thread that took it.
///
/// Cost: `free` of an ordinary allocation pays one relaxed load (`maybe_any`) while no import
/// is pending. The load is ordered after the plugin's free through the plugin's ledger lock,
/// which the import's commit also took: a free that forgot an imported range sees the count the
/// import raised before it called the plugin.
///
/// Thread-safety: every member may be called concurrently.
class ImportCallbacks {
 public:
  /// Runs `import` (the plugin's slot: returns the pointer, or throws) and records `on_release`
  /// for that pointer, all under the lock, so that a concurrent free of the new pointer waits
  /// and then finds it. An empty `on_release` records nothing. When recording fails (no memory),
  /// `forget(ptr)` undoes the import and the failure propagates: nothing stays imported.
  template <class Import, class Forget>
  std::uint64_t add(std::function<void()> on_release, Import&& import, Forget&& forget) {
    std::lock_guard lock(mutex_);
    pending_.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t ptr = 0;
    try {
      ptr = import();
      if (on_release) {
        callbacks_.emplace(ptr, std::move(on_release));
        return ptr;
      }
    } catch (...) {
      pending_.fetch_sub(1, std::memory_order_relaxed);
      if (ptr != 0) forget(ptr);
      throw;
    }
    pending_.fetch_sub(1, std::memory_order_relaxed);
    return ptr;
  }

  /// False when no import is recorded or in flight: `take` would find nothing.
  bool maybe_any() const noexcept { return pending_.load(std::memory_order_relaxed) != 0; }

  /// After the plugin forgot `ptr`: its callback, removed (empty when it has none).
  std::function<void()> take(std::uint64_t ptr) {
    std::lock_guard lock(mutex_);
    const auto it = callbacks_.find(ptr);
    if (it == callbacks_.end()) return {};
    std::function<void()> callback = std::move(it->second);
    callbacks_.erase(it);
    pending_.fetch_sub(1, std::memory_order_relaxed);
    return callback;
  }

  /// After the plugin forgot every range (sweep, destroy): every callback still recorded.
  std::vector<std::pair<std::uint64_t, std::function<void()>>> take_all() {
    std::lock_guard lock(mutex_);
    std::vector<std::pair<std::uint64_t, std::function<void()>>> out;
    out.reserve(callbacks_.size());
    for (auto& [ptr, callback] : callbacks_) out.emplace_back(ptr, std::move(callback));
    pending_.fetch_sub(callbacks_.size(), std::memory_order_relaxed);
    callbacks_.clear();
    return out;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::function<void()>> callbacks_;  // guarded by mutex_
  std::atomic<std::size_t> pending_{0};  // callbacks_.size() plus imports in flight
};

}  // namespace gpuplug::detail
