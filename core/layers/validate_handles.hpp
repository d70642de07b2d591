// SPDX-License-Identifier: Apache-2.0
// The validate layer's record of a backend's streams and events (core-private): the live handles,
// and the recently destroyed ones to name in a message.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_set>
#include <vector>

#include <gpuplug/support/text.hpp>

namespace gpuplug::detail::layers {

/// How many destroyed streams and events, and functions of unloaded modules, each backend
/// remembers to name in a message (the oldest are forgotten: then "not created on this backend").
constexpr std::size_t kRecentCapacity = 4096;

/// A set of handles that remembers only the last kRecentCapacity inserted.
class RecentHandles {
 public:
  void insert(std::uint64_t h) {
    if (!set_.insert(h).second) return;
    order_.push_back(h);
    if (order_.size() > kRecentCapacity) {
      set_.erase(order_.front());
      order_.pop_front();
    }
  }
  /// A handle made again (the plugin reuses values) is no longer "destroyed".
  void erase(std::uint64_t h) {
    if (set_.erase(h) != 0) std::erase(order_, h);
  }
  bool contains(std::uint64_t h) const { return set_.contains(h); }

 private:
  std::unordered_set<std::uint64_t> set_;
  std::deque<std::uint64_t> order_;  // oldest first; the same handles as set_
};

/// The streams, the events or the graphs of one backend: the live ones, and the recently
/// destroyed ones to name in a message. Not thread-safe: the layer holds its handles mutex.
class HandleSet {
 public:
  explicit HandleSet(const char* kind) : kind_(kind) {}
  void created(std::uint64_t h) {
    live_.insert(h);
    destroyed_.erase(h);
  }
  void destroyed(std::uint64_t h) {
    if (live_.erase(h) != 0) destroyed_.insert(h);
  }
  /// Why `h` is no live handle of this backend; empty when it is.
  std::string check(std::uint64_t h) const {
    if (live_.contains(h)) return {};
    const std::string name = std::string(kind_) + " " + std::to_string(h);
    if (destroyed_.contains(h)) return name + " was destroyed";
    return name + " was not created on this backend (another backend's, or never created)";
  }
  const std::unordered_set<std::uint64_t>& live() const noexcept { return live_; }

 private:
  const char* kind_;  // "stream", "event", "graph"
  std::unordered_set<std::uint64_t> live_;
  RecentHandles destroyed_;
};

/// "1, 2, 7": handles in order, for the destroy warning.
inline std::string list_handles(const std::unordered_set<std::uint64_t>& handles) {
  std::vector<std::uint64_t> sorted(handles.begin(), handles.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> names;
  for (std::uint64_t h : sorted) names.push_back(std::to_string(h));
  return support::join(names);
}

}  // namespace gpuplug::detail::layers
