// SPDX-License-Identifier: Apache-2.0
// IntervalIndex: which live allocation contains an address, filed lazily (the ledger's `find`).
#pragma once

#include <gpuplug/abi.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "flat_table.hpp"

namespace gpuplug::sdk::detail {

/// One allocation as the index files it.
struct Interval {
  std::uint64_t ptr = 0;    // never 0
  std::uint64_t bytes = 0;  // 0 for a zero-byte allocation, which contains its own pointer only
  gpuplug_alloc_kind_t kind = GPUPLUG_ALLOC_DEVICE;
};

/// Finds the filed interval that contains an address, in O(levels in use), never O(entries).
///
/// Levels: an interval whose extent e = max(bytes, 1) satisfies 2^(L-1) < e <= 2^L is filed
/// under level L and its start granule ptr >> L. It can then reach into the next granule but no
/// further, so an address `a` lies inside some level-L interval only if that interval starts in
/// granule a >> L or the one before; and since disjoint level-L intervals are longer than half a
/// granule, at most two start in any granule. `find` probes two granules per level in use (a
/// mask of the levels with filed intervals). Intervals must not overlap.
///
/// Lazy filing (for an owner such as the ledger, whose entries come and go on a hot path): an
/// owner files its entries only when a lookup needs them (`file_pending`), so an entry that dies
/// before such a lookup is never filed. The owner marks each of its entries with `filed` (0 or 1);
/// the first filing scans all of the owner's entries, and from then on the owner `note`s each new
/// entry, so each later filing examines only the entries made since the last: O(1) per entry,
/// amortised. The notes are compacted (dead and filed ones dropped) whenever they outgrow twice
/// the entries still unfiled, so they stay O(live entries) between filings.
///
/// Owner callbacks: `live(ptr)` returns the owner's entry for a live pointer (a pointer to a
/// slot with members ptr, bytes, kind and a std::uint32_t `filed`) or null; `for_each_live(fn)`
/// calls fn(slot&) for every live entry.
///
/// Not synchronized: the owner locks. Only `reserve`, `reserve_note` and `file_pending` allocate
/// (std::bad_alloc before anything changed); everything else is noexcept.
class IntervalIndex {
 public:
  /// The number of filed intervals.
  std::size_t size() const noexcept { return filed_.size(); }

  /// Makes room for `count` filed intervals in all.
  void reserve(std::size_t count) { filed_.reserve(count); }

  /// Files `interval` (not filed yet; room reserved).
  void insert(const Interval& interval) noexcept {
    const std::uint32_t level = level_of(interval.bytes);
    filed_.insert(Filed{interval.ptr, interval.ptr >> level, interval.bytes, level, interval.kind});
    if (level_count_[level]++ == 0) level_mask_ |= std::uint64_t{1} << level;
  }

  /// Unfiles the interval filed for (ptr, bytes). Does nothing when there is none.
  void erase(std::uint64_t ptr, std::uint64_t bytes) noexcept {
    const std::uint32_t level = level_of(bytes);
    Filed gone;
    if (!filed_.erase(
            key_hash(ptr >> level, level), [&](const Filed& f) { return f.ptr == ptr; }, gone))
      return;
    if (--level_count_[level] == 0) level_mask_ &= ~(std::uint64_t{1} << level);
  }

  /// The filed interval containing `address`, if any.
  std::optional<Interval> find(std::uint64_t address) const noexcept {
    for (std::uint64_t levels = level_mask_; levels != 0; levels &= levels - 1) {
      const auto level = static_cast<std::uint32_t>(std::countr_zero(levels));
      const std::uint64_t granule = address >> level;
      // An interval containing `address` starts in its granule or in the one before.
      for (const std::uint64_t g : {granule, granule - 1}) {
        if (g > granule) break;  // granule 0 has none before it
        const Filed* f = filed_.find(key_hash(g, level), [&](const Filed& s) {
          return s.granule == g && s.level == level && address - s.ptr < extent_of(s.bytes);
        });
        if (f != nullptr) return Interval{f->ptr, f->bytes, f->kind};
      }
    }
    return std::nullopt;
  }

  /// Forgets every filed interval and note, and stops noting (as new), releasing the memory.
  void clear() noexcept {
    FlatTable<Filed, FiledTraits>().swap(filed_);
    std::vector<std::uint64_t>().swap(unfiled_);
    noting_ = false;
    compact_at_ = kMinCompactAt;
    level_count_.fill(0);
    level_mask_ = 0;
  }

  // ---- lazy filing -----------------------------------------------------------------------------

  /// Whether the owner must `note` its new entries (true after the first filing).
  bool noting() const noexcept { return noting_; }

  /// Makes room for one `note`, compacting the notes first when they are due.
  template <class Lookup>
  void reserve_note(Lookup&& live) {
    if (!noting_) return;
    if (unfiled_.size() >= compact_at_) compact(live);
    if (unfiled_.size() == unfiled_.capacity()) unfiled_.reserve(2 * unfiled_.size() + 16);
  }

  /// Notes a new, unfiled entry of the owner (room reserved by `reserve_note`).
  void note(std::uint64_t ptr) noexcept {
    if (noting_) unfiled_.push_back(ptr);
  }

  /// Files every live unfiled entry (from the notes, or by a scan of all of them the first time,
  /// which also starts the noting), then forgets the notes. `live_count` is the owner's number
  /// of live entries. May throw bad_alloc before it changes anything.
  template <class ForEachLive, class Lookup>
  void file_pending(std::size_t live_count, ForEachLive&& for_each_live, Lookup&& live) {
    reserve(live_count);  // the one step that may throw
    const auto file = [&](auto& entry) {
      entry.filed = 1;
      insert(Interval{entry.ptr, entry.bytes, entry.kind});
    };
    if (!noting_) {
      for_each_live([&](auto& entry) {
        if (entry.filed == 0) file(entry);
      });
      noting_ = true;
    } else {
      for (const std::uint64_t ptr : unfiled_) {
        auto* entry = live(ptr);
        if (entry != nullptr && entry->filed == 0)
          file(*entry);  // else freed since, or noted twice
      }
    }
    unfiled_.clear();
    compact_at_ = kMinCompactAt;
  }

 private:
  struct Filed {
    std::uint64_t ptr;  // 0 = empty slot
    std::uint64_t granule;
    std::uint64_t bytes;
    std::uint32_t level;
    gpuplug_alloc_kind_t kind;
  };
  static std::uint64_t key_hash(std::uint64_t granule, std::uint32_t level) noexcept {
    return mix(granule ^ (std::uint64_t{level} << 57 | std::uint64_t{level}));
  }
  struct FiledTraits {
    static bool empty(const Filed& s) noexcept { return s.ptr == 0; }
    static void clear(Filed& s) noexcept { s.ptr = 0; }
    static std::uint64_t hash(const Filed& s) noexcept { return key_hash(s.granule, s.level); }
  };
  static constexpr unsigned kLevels = 64;  // level 63 also takes every extent above 2^63
  static constexpr std::size_t kMinCompactAt = 64;

  static std::uint64_t extent_of(std::uint64_t bytes) noexcept {
    return std::max<std::uint64_t>(bytes, 1);
  }
  /// The smallest L with extent <= 2^L, capped at 63 (an extent above 2^63 then spans at most
  /// granules 0 and 1 of level 63, still two probes).
  static std::uint32_t level_of(std::uint64_t bytes) noexcept {
    return std::min<std::uint32_t>(static_cast<std::uint32_t>(std::bit_width(extent_of(bytes) - 1)),
                                   kLevels - 1);
  }

  /// Keeps one note per live unfiled entry: marks each kept entry (filed = 2) so a second note of
  /// the same pointer is dropped, then clears the marks. Compacts again only after the notes
  /// double, so each note is examined O(1) times, amortised.
  template <class Lookup>
  void compact(Lookup&& live) noexcept {
    constexpr std::uint32_t kKept = 2;
    std::size_t kept = 0;
    for (const std::uint64_t ptr : unfiled_) {
      auto* entry = live(ptr);
      if (entry == nullptr || entry->filed != 0) continue;
      entry->filed = kKept;
      unfiled_[kept++] = ptr;
    }
    unfiled_.resize(kept);
    for (const std::uint64_t ptr : unfiled_) live(ptr)->filed = 0;
    compact_at_ = std::max<std::size_t>(kMinCompactAt, 2 * kept);
  }

  // Invariants: `filed_` holds no two intervals that overlap; level_count_[L] is the number of
  // filed intervals at level L, and bit L of level_mask_ is set exactly when it is non-zero;
  // before the first filing `unfiled_` is empty and `noting_` false. The notes come first: they
  // are what an allocation touches.
  bool noting_ = false;
  std::vector<std::uint64_t> unfiled_;
  std::size_t compact_at_ = kMinCompactAt;  // unfiled_.size() that triggers compact
  FlatTable<Filed, FiledTraits> filed_;
  std::uint64_t level_mask_ = 0;
  std::array<std::uint64_t, kLevels> level_count_{};
};

}  // namespace gpuplug::sdk::detail
