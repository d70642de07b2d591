// SPDX-License-Identifier: Apache-2.0
// The validate layer's record of a backend's streams, events and kernel handles (core-private):
// the live handles, and the recently destroyed ones to name in a message.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <gpuplug/abi.h>
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

/// A kernel handle get_function returned on this backend.
struct Function {
  std::string module;
  std::string func;
  bool unloaded = false;  // its module was unloaded since
};

/// The kernel handles get_function returned on one backend, and whether their module was
/// unloaded since (the most recent kRecentCapacity of those are remembered). Not thread-safe:
/// the layer holds its handles mutex.
class FunctionSet {
 public:
  void resolved(std::uint64_t handle, std::string_view module, std::string_view func) {
    functions_.insert_or_assign(handle, Function{std::string(module), std::string(func), false});
  }
  void unloaded(std::string_view module) {
    for (auto& [handle, f] : functions_) {
      if (f.unloaded || f.module != module) continue;
      f.unloaded = true;
      unloaded_order_.push_back(handle);
    }
    // Bounded: a program that reloads modules forever forgets the oldest unloaded handles.
    while (unloaded_order_.size() > kRecentCapacity) {
      auto it = functions_.find(unloaded_order_.front());
      if (it != functions_.end() && it->second.unloaded) functions_.erase(it);
      unloaded_order_.pop_front();
    }
  }
  /// Why `handle` may not be launched; empty when it may.
  std::string check(std::uint64_t handle) const {
    auto it = functions_.find(handle);
    if (it == functions_.end())
      return "function " + support::hex(handle) +
             " was not resolved on this backend (get_function of another backend, or never "
             "resolved)";
    if (it->second.unloaded)
      return "function " + support::hex(handle) + " is " + it->second.module +
             "::" + it->second.func + ", whose module " + it->second.module + " was unloaded";
    return {};
  }
  /// "axpy::axpy_f32", or the handle in hex when it is not known.
  std::string describe(std::uint64_t handle) const {
    auto it = functions_.find(handle);
    if (it == functions_.end()) return support::hex(handle);
    return it->second.module + "::" + it->second.func;
  }

 private:
  std::unordered_map<std::uint64_t, Function> functions_;  // by handle
  std::deque<std::uint64_t> unloaded_order_;               // handles marked unloaded, oldest first
};

/// "(1, 2, 1)": a grid or block, for messages.
inline std::string dims(gpuplug_dim3_t d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

/// "1, 2, 7": handles in order, for the destroy warning.
inline std::string list_handles(const std::unordered_set<std::uint64_t>& handles) {
  std::vector<std::uint64_t> sorted(handles.begin(), handles.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> names;
  for (std::uint64_t h : sorted) names.push_back(std::to_string(h));
  return support::join(names);
}

/// "2 streams (1, 4) and 1 event (3)": the live streams and events, for the destroy warning;
/// empty when there are none.
inline std::string describe_live(const HandleSet& streams, const HandleSet& events) {
  std::string what;
  const auto& s = streams.live();
  const auto& e = events.live();
  if (!s.empty())
    what += std::to_string(s.size()) + (s.size() == 1 ? " stream" : " streams") + " (" +
            list_handles(s) + ")";
  if (!e.empty())
    what += std::string(what.empty() ? "" : " and ") + std::to_string(e.size()) +
            (e.size() == 1 ? " event" : " events") + " (" + list_handles(e) + ")";
  return what;
}

}  // namespace gpuplug::detail::layers
