// SPDX-License-Identifier: Apache-2.0
// MemoryRecord (core-private): the validate layer's own record of one backend's memory, and the
// words it uses to say why a pointer or a range is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>

namespace gpuplug::detail::layers {

/// What the validate layer knows of the device memory of one backend: the live allocations
/// (pointer, size, call site), the module globals get_global handed out (valid copy targets
/// until their module is unloaded), and a bounded list of recently freed allocations, so that a
/// use after free names what was freed and where it was made.
///
/// Invariants: live allocations never overlap each other (the plugin's allocator gives out
/// disjoint ranges); a zero-byte allocation is the range [ptr, ptr) and contains only ptr
/// itself (for a zero-byte operation). Freed entries are only consulted for pointers no live
/// allocation or global covers, so an address the allocator gave out again is never
/// misreported as freed.
/// Thread-safety: every member may run concurrently with every other.
class MemoryRecord {
 public:
  /// What one allocation was: for free (take/restore) and messages.
  struct Allocation {
    std::uint64_t bytes = 0;
    std::string site;  // the alloc `site` argument; "an unnamed site" when it was null
    bool managed = false;
  };
  /// An allocation taken out of the live set by take(), on its way to the plugin's free.
  struct Taken {
    std::uint64_t ptr = 0;
    Allocation allocation;
  };

  /// `freed_capacity`: how many freed allocations are remembered (the oldest are forgotten).
  explicit MemoryRecord(std::size_t freed_capacity = 4096) : freed_capacity_(freed_capacity) {}

  /// After a successful alloc / alloc_managed of `bytes` at `ptr`.
  void allocated(std::uint64_t ptr, std::uint64_t bytes, const char* site, bool managed);
  /// After a successful get_global: [address, address + bytes) is module::symbol.
  void global(std::uint64_t address, std::uint64_t bytes, std::string_view module,
              std::string_view symbol);
  /// After a successful unload_module: its globals are no longer memory of the backend.
  void module_unloaded(std::string_view module);

  /// Why the operation may not touch [ptr, ptr + bytes): a null pointer, a freed allocation, a
  /// range past the end of its allocation or global, or memory this backend does not know.
  /// Empty when the range is fine. `role` ("", "source ", "destination ") starts the message.
  std::string check_range(std::uint64_t ptr, std::uint64_t bytes, std::string_view role) const;
  /// check_range for the span of a pitched 2D copy's side, [ptr, ptr + pitch * (height - 1) +
  /// width), which covers every row. Empty (the plugin's to judge) when width or height is 0 or
  /// pitch < width; a span that wraps is refused.
  std::string check_pitched(std::uint64_t ptr, std::uint64_t pitch, std::uint64_t width,
                            std::uint64_t height, std::string_view role) const;

  /// Before the plugin's free: takes the allocation that starts at `ptr` out of the live set,
  /// so that no other thread can see it as live once the plugin may hand the address out again.
  /// nullopt with `why` set when `ptr` is no live allocation's start (double free, an interior
  /// pointer, a global, an unknown pointer).
  std::optional<Taken> take(std::uint64_t ptr, std::string& why);
  /// The plugin freed what take() returned: remember it among the recently freed. Never throws
  /// (the free has happened; without memory the entry is not remembered).
  void freed(Taken taken) noexcept;
  /// The plugin refused to free it: it is live again.
  void restore(Taken taken);
  /// After sweep_unreleased: every live allocation was freed.
  void swept() noexcept;

 private:
  struct Global {
    std::uint64_t bytes = 0;
    std::string name;  // "module::symbol"
    std::size_t module_len = 0;
  };
  struct Freed {
    std::uint64_t ptr = 0;
    Allocation allocation;
  };

  /// The live allocation or global whose range holds `ptr`, or null (lock held). With
  /// `or_end`, also the one that ends at `ptr` (for a range check to name what it runs past).
  const std::pair<const std::uint64_t, Allocation>* live_at(std::uint64_t ptr, bool or_end) const;
  const std::pair<const std::uint64_t, Global>* global_at(std::uint64_t ptr, bool or_end) const;
  /// Why `ptr` is not live memory: freed, or unknown (shared lock held).
  std::string not_live(std::uint64_t ptr, std::string_view role) const;
  void remember_freed(std::uint64_t ptr, Allocation allocation) noexcept;  // unique lock held

  mutable std::shared_mutex mutex_;
  std::map<std::uint64_t, Allocation> live_;  // by start address
  std::map<std::uint64_t, Global> globals_;   // by start address
  std::deque<Freed> freed_;                   // oldest first, at most freed_capacity_
  std::size_t freed_capacity_;
};

/// "(allocated by load_weights, 4096 bytes)": where an allocation was made, and its size.
std::string describe_allocation(const MemoryRecord::Allocation& a);

}  // namespace gpuplug::detail::layers
