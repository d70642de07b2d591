// SPDX-License-Identifier: Apache-2.0
// FlatTable: the open-addressing hash table behind the AllocationLedger's indexes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace gpuplug::sdk::detail {

/// 64-bit multiplicative mixing (Fibonacci hashing): the table indexes by the *high* bits of
/// the product, so keys that differ only in high bits (pointers of one heap) or that share
/// their low bits (every pointer aligned to 256) still spread over the whole table.
inline constexpr std::uint64_t mix(std::uint64_t key) noexcept {
  return key * 0x9E3779B97F4A7C15ull;
}

/// An open-addressing hash table of small trivially copyable slots: linear probing,
/// backward-shift deletion, load factor at most 1/2.
///
/// `Traits` supplies `static bool empty(const Slot&)` (a value-initialised Slot must be empty),
/// `static void clear(Slot&)` (makes it empty, as cheaply as it can) and `static std::uint64_t
/// hash(const Slot&)` (a `mix`ed value that depends only on what the slot is looked up by). Several
/// slots may share a hash, or even a key: lookups take a predicate and see the whole run of slots
/// that follows the home position.
///
/// Invariants: every occupied slot lies on the unbroken run of occupied slots that starts at
/// its home position (deletion shifts later slots back instead of leaving tombstones, so runs
/// stay as short as the load allows however many inserts and erases ran); `size_ * 2 <=
/// capacity` after every insert. The capacity only grows (it follows the peak), so a steady
/// state of inserts and erases allocates nothing.
///
/// Not synchronized: the owner locks. Only `reserve_one` allocates (throwing std::bad_alloc with
/// the table unchanged); everything else is noexcept, so an owner can make room in every table
/// first and then change them all without a failure in between.
template <class Slot, class Traits>
class FlatTable {
 public:
  FlatTable() = default;
  FlatTable(const FlatTable&) = delete;
  FlatTable& operator=(const FlatTable&) = delete;
  FlatTable(FlatTable&& other) noexcept { swap(other); }
  FlatTable& operator=(FlatTable&& other) noexcept {
    FlatTable(std::move(other)).swap(*this);
    return *this;
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  /// The first slot of `hash`'s run that `match` accepts, or null.
  template <class Match>
  const Slot* find(std::uint64_t hash, Match&& match) const noexcept {
    if (size_ == 0) return nullptr;
    for (std::size_t i = home(hash);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (Traits::empty(s)) return nullptr;
      if (match(s)) return &s;
    }
  }

  /// As the const `find`, for changing a slot in place (never its key: the hash must not move).
  template <class Match>
  Slot* find(std::uint64_t hash, Match&& match) noexcept {
    return const_cast<Slot*>(std::as_const(*this).find(hash, match));
  }

  /// Makes room for `count` slots in all, so that inserts up to that size cannot throw. Throws
  /// std::bad_alloc, with the table unchanged, when it must grow and cannot.
  void reserve(std::size_t count) {
    while (count * 2 > capacity()) grow();
  }

  /// Makes room for one more slot, so that the next `insert` or `insert_unique` cannot throw.
  /// Throws std::bad_alloc, with the table unchanged, when it must grow and cannot.
  void reserve_one() {
    if ((size_ + 1) * 2 > capacity()) grow();
  }

  /// Adds `slot` (not empty) even if another slot has the same key. Call `reserve_one` first.
  void insert(const Slot& slot) noexcept {
    place(slot);
    ++size_;
  }

  /// Adds `slot` (not empty) unless a slot of its run is a duplicate by `same`; returns that
  /// duplicate, or null when `slot` was added. Call `reserve_one` first.
  template <class Same>
  const Slot* insert_unique(const Slot& slot, Same&& same) noexcept {
    std::size_t i = home(Traits::hash(slot));
    for (; !Traits::empty(slots_[i]); i = (i + 1) & mask_)
      if (same(slots_[i])) return &slots_[i];
    slots_[i] = slot;
    ++size_;
    return nullptr;
  }

  /// Removes the first slot of `hash`'s run that `match` accepts, copying it to `out`.
  /// Returns false, changing nothing, when there is none.
  template <class Match>
  bool erase(std::uint64_t hash, Match&& match, Slot& out) noexcept {
    if (size_ == 0) return false;
    std::size_t hole = home(hash);
    for (;; hole = (hole + 1) & mask_) {
      if (Traits::empty(slots_[hole])) return false;
      if (match(slots_[hole])) break;
    }
    out = slots_[hole];
    // Backward shift: pull each later slot of the run into the hole when the hole lies between
    // its home and where it sits now, so no slot ends up before a gap in its own run.
    for (std::size_t next = (hole + 1) & mask_;; next = (next + 1) & mask_) {
      const Slot& s = slots_[next];
      if (Traits::empty(s)) break;
      const std::size_t distance_from_home = (next - home(Traits::hash(s))) & mask_;
      if (distance_from_home >= ((next - hole) & mask_)) {
        slots_[hole] = s;
        hole = next;
      }
    }
    Traits::clear(slots_[hole]);
    --size_;
    return true;
  }

  /// Calls `fn(slot)` for every occupied slot, in no particular order.
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (std::size_t i = 0; i < capacity(); ++i)
      if (!Traits::empty(slots_[i])) fn(std::as_const(slots_[i]));
  }
  /// As the const `for_each`, for changing slots in place (never their keys).
  template <class Fn>
  void for_each(Fn&& fn) {
    for (std::size_t i = 0; i < capacity(); ++i)
      if (!Traits::empty(slots_[i])) fn(slots_[i]);
  }

  void swap(FlatTable& other) noexcept {
    std::swap(slots_, other.slots_);
    std::swap(mask_, other.mask_);
    std::swap(shift_, other.shift_);
    std::swap(size_, other.size_);
  }

  /// Empties the table, keeping its capacity.
  void clear() noexcept {
    for (std::size_t i = 0; i < capacity(); ++i) slots_[i] = Slot{};
    size_ = 0;
  }

 private:
  static constexpr unsigned kMinBits = 4;  // 16 slots on first use

  std::size_t capacity() const noexcept { return slots_ ? mask_ + 1 : 0; }
  std::size_t home(std::uint64_t hash) const noexcept {
    return static_cast<std::size_t>(hash >> shift_);
  }

  void place(const Slot& slot) noexcept {
    std::size_t i = home(Traits::hash(slot));
    while (!Traits::empty(slots_[i])) i = (i + 1) & mask_;
    slots_[i] = slot;
  }

  void grow() {  // doubles the capacity; strong guarantee
    const unsigned bits = slots_ ? 64 - shift_ + 1 : kMinBits;
    FlatTable bigger;
    bigger.slots_ = std::make_unique<Slot[]>(std::size_t{1} << bits);  // value-initialised
    bigger.mask_ = (std::size_t{1} << bits) - 1;
    bigger.shift_ = 64 - bits;
    for_each([&](const Slot& s) { bigger.place(s); });
    bigger.size_ = size_;
    swap(bigger);
  }

  std::unique_ptr<Slot[]> slots_;
  std::size_t mask_ = 0;  // capacity - 1; capacity is a power of two
  unsigned shift_ = 63;   // 64 - log2(capacity): home = hash >> shift_
  std::size_t size_ = 0;
};

}  // namespace gpuplug::sdk::detail
