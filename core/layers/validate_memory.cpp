// SPDX-License-Identifier: Apache-2.0
// MemoryRecord: the validate layer's allocations, module globals and recently freed ranges, and
// what it says about a pointer that none of them holds.
#include "layers/validate_memory.hpp"

#include <limits>

#include <gpuplug/support/text.hpp>
#include <mutex>
#include <new>
#include <utility>

namespace gpuplug::detail::layers {

using support::hex;

namespace {

/// The entry of `ranges` (by start, each with .bytes) that holds `ptr`: the last one starting at
/// or before it, when `ptr` is below its end (or at its end with `or_end`). A zero-byte range
/// holds its own start only.
template <class Map>
const typename Map::value_type* range_at(const Map& ranges, std::uint64_t ptr, bool or_end) {
  auto it = ranges.upper_bound(ptr);
  if (it == ranges.begin()) return nullptr;
  --it;
  const std::uint64_t offset = ptr - it->first;
  const std::uint64_t size = it->second.bytes;
  if (offset < size || offset == 0 || (or_end && offset == size)) return &*it;
  return nullptr;
}

/// "0x1008 + 300 bytes runs past the end of its allocation: offset 8, length 300, 256 bytes at
/// 0x1000": the range starts in the object (`what`) and ends beyond it.
std::string past_end(std::string_view role, std::uint64_t ptr, std::uint64_t bytes,
                     std::uint64_t start, std::uint64_t size, const std::string& what) {
  return std::string(role) + hex(ptr) + " + " + std::to_string(bytes) +
         " bytes runs past the end of " + what + ": offset " + std::to_string(ptr - start) +
         ", length " + std::to_string(bytes) + ", " + std::to_string(size) + " bytes at " +
         hex(start);
}

}  // namespace

std::string describe_allocation(const MemoryRecord::Allocation& a) {
  return std::string("(") + (a.managed ? "managed, " : "") + "allocated by " + a.site + ", " +
         std::to_string(a.bytes) + " bytes)";
}

void MemoryRecord::allocated(std::uint64_t ptr, std::uint64_t bytes, const char* site,
                             bool managed) {
  Allocation a{bytes, site != nullptr ? site : "an unnamed site", managed};
  std::unique_lock lock(mutex_);
  live_.insert_or_assign(ptr, std::move(a));
}

void MemoryRecord::global(std::uint64_t address, std::uint64_t bytes, std::string_view module,
                          std::string_view symbol) {
  Global g{bytes, std::string(module) + "::" + std::string(symbol), module.size()};
  std::unique_lock lock(mutex_);
  globals_.insert_or_assign(address, std::move(g));
}

void MemoryRecord::module_unloaded(std::string_view module) {
  std::unique_lock lock(mutex_);
  std::erase_if(globals_, [&](const auto& entry) {
    const Global& g = entry.second;
    return g.module_len == module.size() &&
           std::string_view(g.name).substr(0, g.module_len) == module;
  });
}

const std::pair<const std::uint64_t, MemoryRecord::Allocation>* MemoryRecord::live_at(
    std::uint64_t ptr, bool or_end) const {
  return range_at(live_, ptr, or_end);
}

const std::pair<const std::uint64_t, MemoryRecord::Global>* MemoryRecord::global_at(
    std::uint64_t ptr, bool or_end) const {
  return range_at(globals_, ptr, or_end);
}

std::string MemoryRecord::check_range(std::uint64_t ptr, std::uint64_t bytes,
                                      std::string_view role) const {
  if (ptr == 0) return std::string(role) + "null device pointer";
  std::shared_lock lock(mutex_);
  // Live allocations first: an address given out again after a free is live, not freed. What
  // holds the address comes before what merely ends there (an allocation may end where a
  // global starts).
  const auto* a = live_at(ptr, false);
  const auto* g = a != nullptr ? nullptr : global_at(ptr, false);
  if (a == nullptr && g == nullptr) {
    a = live_at(ptr, true);
    if (a == nullptr) g = global_at(ptr, true);
  }
  if (a != nullptr) {
    const std::uint64_t offset = ptr - a->first;
    if (bytes <= a->second.bytes - offset) return {};
    const Allocation& found = a->second;
    return past_end(role, ptr, bytes, a->first, found.bytes,
                    found.managed ? "its managed allocation" : "its allocation") +
           " allocated by " + found.site;
  }
  if (g != nullptr) {
    const std::uint64_t offset = ptr - g->first;
    if (bytes <= g->second.bytes - offset) return {};
    return past_end(role, ptr, bytes, g->first, g->second.bytes, "module global " + g->second.name);
  }
  return not_live(ptr, role);
}

std::string MemoryRecord::check_pitched(std::uint64_t ptr, std::uint64_t pitch,
                                        std::uint64_t width, std::uint64_t height,
                                        std::string_view role) const {
  if (width == 0 || height == 0 || pitch < width) return {};
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t rows = height - 1;
  if ((rows != 0 && pitch > (max - width) / rows) || pitch * rows + width > max - ptr)
    return std::string(role) + std::to_string(height) + " rows of pitch " + std::to_string(pitch) +
           " from " + support::hex(ptr) + " wrap around the address space";
  return check_range(ptr, pitch * rows + width, role);
}

std::string MemoryRecord::not_live(std::uint64_t ptr, std::string_view role) const {
  // Newest first: the last allocation freed at an address is the one a stale pointer meant.
  for (auto it = freed_.rbegin(); it != freed_.rend(); ++it) {
    const std::uint64_t offset = ptr - it->ptr;
    if (ptr < it->ptr || (offset >= it->allocation.bytes && offset != 0)) continue;
    if (offset == 0)
      return std::string(role) + hex(ptr) + " was freed " + describe_allocation(it->allocation);
    return std::string(role) + hex(ptr) + " is inside " + hex(it->ptr) + " (offset " +
           std::to_string(offset) + "), which was freed " + describe_allocation(it->allocation);
  }
  return std::string(role) + hex(ptr) +
         " is not memory of this backend: no live allocation or module global holds it (never "
         "allocated here, freed long ago, or another backend's)";
}

std::optional<MemoryRecord::Taken> MemoryRecord::take(std::uint64_t ptr, std::string& why) {
  std::unique_lock lock(mutex_);
  if (auto it = live_.find(ptr); it != live_.end()) {
    Taken taken{ptr, std::move(it->second)};
    live_.erase(it);
    return taken;
  }
  if (const auto* a = live_at(ptr, false)) {
    why = hex(ptr) + " is inside the allocation at " + hex(a->first) + " (offset " +
          std::to_string(ptr - a->first) + ") " + describe_allocation(a->second) +
          ": free takes the pointer alloc returned";
  } else if (const auto* g = global_at(ptr, false)) {
    why = hex(ptr) + " is in module global " + g->second.name + ", not an allocation";
  } else {
    why = not_live(ptr, "");
    if (why.find(" was freed ") != std::string::npos) why = "double free: " + why;
  }
  return std::nullopt;
}

void MemoryRecord::freed(Taken taken) noexcept {
  std::unique_lock lock(mutex_);
  remember_freed(taken.ptr, std::move(taken.allocation));
}

void MemoryRecord::restore(Taken taken) {
  std::unique_lock lock(mutex_);
  live_.insert_or_assign(taken.ptr, std::move(taken.allocation));
}

void MemoryRecord::swept() noexcept {
  std::unique_lock lock(mutex_);
  for (auto& [ptr, allocation] : live_) remember_freed(ptr, std::move(allocation));
  live_.clear();
}

void MemoryRecord::remember_freed(std::uint64_t ptr, Allocation allocation) noexcept {
  // Only messages read the freed list: without memory for one more entry it is simply not
  // remembered (the free itself has happened and must not be reported as failed).
  try {
    freed_.push_back(Freed{ptr, std::move(allocation)});
  } catch (const std::bad_alloc&) {
  }
  while (freed_.size() > freed_capacity_) freed_.pop_front();
}

}  // namespace gpuplug::detail::layers
