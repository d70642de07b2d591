// SPDX-License-Identifier: Apache-2.0
// The lock-free insert-only hash table under OpCache (core-private), and the key storage its
// entries use. Why reads need no lock: the invariants below and docs/opcache.md.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>
#include <utility>

#include "opcache/hash.hpp"

namespace gpuplug::detail {

/// InsertOnlyTable: open addressing (linear probing) over pointers to heap-allocated entries.
///
/// Invariants (the lock-free reads rely on each one):
///  1. Readers (`find`) take no lock. Writers (`reserve_one`, `insert`) hold the owner's mutex,
///     so there is one writer at a time; `clear`/`drop_retired`/the destructor need exclusive use.
///  2. An entry is fully constructed before its pointer is stored into a slot with a release
///     store; readers load slots with acquire, so they see the finished entry. A published entry
///     is never changed afterwards (only its own atomic members are) and never freed before
///     `clear` or destruction.
///  3. A slot goes from null to an entry once and never changes again (until `clear`).
///  4. Growth builds a twice-as-big slot array completely, then publishes it with a release store
///     to `current_`. The outgrown array is retired (kept, chained through `previous`), not
///     freed, so a reader still probing it stays valid; it only misses newer keys, and a miss
///     goes to the locked path, which looks again in the current array.
///  5. The load factor stays <= 1/2, so every probe sequence reaches a null slot: `find`
///     terminates without a bound check.
///  6. The current array holds every entry (growth copies all pointers), so `clear` deletes
///     each entry exactly once by walking it.
///  7. `forget` (a tombstone) keeps the entry in its slot, so probe sequences through it stay
///     intact, and changes only its hash, once, to ~hash: no lookup of the entry's key can match
///     it again (one key always has one hash), and a lookup of another key with that hash
///     compares keys and fails. Forgotten entries are deleted by `clear` like the others.
/// Entry needs a `hash` member: `std::uint64_t`, or `std::atomic<std::uint64_t>` for entries
/// that may be forgotten (read with relaxed loads: a plain load on x86-64 and AArch64); the
/// table owns its entries.
/// A cache line per table: an insert into one must not slow the hits of another.
template <class Entry>
class alignas(64) InsertOnlyTable {
 public:
  InsertOnlyTable() : current_(Slots::make(kInitialCapacity, nullptr)) {}
  ~InsertOnlyTable() {
    clear();
    Slots::destroy(current_.load(std::memory_order_relaxed));
  }
  InsertOnlyTable(const InsertOnlyTable&) = delete;
  InsertOnlyTable& operator=(const InsertOnlyTable&) = delete;

  /// Lock-free lookup: the entry with `hash` for which match(entry) holds, or null.
  template <class Match>
  const Entry* find(std::uint64_t hash, const Match& match) const noexcept {
    const Slots* t = current_.load(std::memory_order_acquire);
    const std::atomic<const Entry*>* slots = t->slots();
    std::size_t i = static_cast<std::size_t>(hash) & t->mask;
    for (;;) {
      const Entry* e = slots[i].load(std::memory_order_acquire);
      if (e == nullptr) return nullptr;
      if (hash_of(*e) == hash && match(*e)) return e;
      i = (i + 1) & t->mask;
    }
  }

  /// Under the owner's mutex: makes room so that the next `insert` cannot fail. May throw
  /// std::bad_alloc, leaving the table as it was.
  void reserve_one() {
    Slots* t = current_.load(std::memory_order_relaxed);
    const std::size_t capacity = t->mask + 1;
    if ((used_.load(std::memory_order_relaxed) + 1) * 2 <= capacity) return;
    Slots* bigger = Slots::make(capacity * 2, t);  // t is retired: kept until clear/destruction
    for (std::size_t i = 0; i < capacity; ++i) {
      if (const Entry* e = t->slots()[i].load(std::memory_order_relaxed)) bigger->place(e);
    }
    current_.store(bigger, std::memory_order_release);  // publishes the filled array
  }

  /// Under the owner's mutex, after `reserve_one`: publishes `e` (the table takes ownership).
  void insert(const Entry* e) noexcept {
    current_.load(std::memory_order_relaxed)->place(e);
    used_.store(used_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  /// Under the owner's mutex, for an entry of this table not forgotten before (the owner tells
  /// by recomputing its hash): makes it unfindable for good (invariant 7). A reader that loaded
  /// the old hash a moment earlier may still return the entry; one that synchronises with the
  /// caller afterwards cannot. Only for entries whose `hash` is atomic.
  void forget(const Entry& e) noexcept {
    e.hash.store(~e.hash.load(std::memory_order_relaxed), std::memory_order_relaxed);
    forgotten_.store(forgotten_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  /// Entries that can still be found (inserted and not forgotten).
  std::size_t size() const noexcept {
    return used_.load(std::memory_order_relaxed) - forgotten_.load(std::memory_order_relaxed);
  }

  /// Under the owner's mutex or with exclusive use: calls f(entry) for every entry.
  template <class F>
  void for_each(F&& f) const {
    const Slots* t = current_.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i <= t->mask; ++i) {
      if (const Entry* e = t->slots()[i].load(std::memory_order_relaxed)) f(*e);
    }
  }

  /// Lock-free, as a lookup is (invariants 2 and 4): calls f(entry) for every entry published
  /// before the current array was loaded; entries inserted meanwhile may be missed. Needs only
  /// that no `clear` runs concurrently.
  template <class F>
  void for_each_published(F&& f) const {
    const Slots* t = current_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i <= t->mask; ++i) {
      if (const Entry* e = t->slots()[i].load(std::memory_order_acquire)) f(*e);
    }
  }

  /// Exclusive use: deletes every entry and every retired array; keeps the current array, empty.
  void clear() noexcept {
    drop_retired();
    Slots* t = current_.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i <= t->mask; ++i) {
      delete t->slots()[i].load(std::memory_order_relaxed);
      t->slots()[i].store(nullptr, std::memory_order_relaxed);
    }
    used_.store(0, std::memory_order_relaxed);
    forgotten_.store(0, std::memory_order_relaxed);
  }

  /// Exclusive use: frees the outgrown arrays (no reader can be probing them any more).
  void drop_retired() noexcept {
    Slots* t = current_.load(std::memory_order_relaxed);
    Slots* old = std::exchange(t->previous, nullptr);
    while (old != nullptr) Slots::destroy(std::exchange(old, old->previous));
  }

 private:
  static constexpr std::size_t kInitialCapacity = 16;

  using Slot = std::atomic<const Entry*>;

  static std::uint64_t hash_of(const Entry& e) noexcept {
    if constexpr (requires { e.hash.load(); }) {
      return e.hash.load(std::memory_order_relaxed);
    } else {
      return e.hash;
    }
  }

  // A slot array: this header followed in the same allocation by mask + 1 slots (a lookup
  // reaches both through one pointer).
  struct Slots {
    std::size_t mask;  // capacity - 1; capacity is a power of two
    Slots* previous;   // the array this one replaced (retired), or null

    Slot* slots() noexcept {
      return std::launder(
          reinterpret_cast<Slot*>(reinterpret_cast<std::byte*>(this) + sizeof(Slots)));
    }
    const Slot* slots() const noexcept { return const_cast<Slots*>(this)->slots(); }

    // Writer only: stores e into the first free slot of its probe sequence (release, so a reader
    // that sees the pointer sees the entry; for a not yet published array it is merely harmless).
    void place(const Entry* e) noexcept {
      std::size_t i = static_cast<std::size_t>(hash_of(*e)) & mask;
      while (slots()[i].load(std::memory_order_relaxed) != nullptr) i = (i + 1) & mask;
      slots()[i].store(e, std::memory_order_release);
    }

    static Slots* make(std::size_t capacity, Slots* previous) {
      static_assert(sizeof(Slots) % alignof(Slot) == 0);
      void* raw = ::operator new(sizeof(Slots) + capacity * sizeof(Slot));
      auto* s = new (raw) Slots{capacity - 1, previous};
      auto* first = reinterpret_cast<std::byte*>(s) + sizeof(Slots);
      for (std::size_t i = 0; i < capacity; ++i) new (first + i * sizeof(Slot)) Slot(nullptr);
      return s;
    }
    static void destroy(Slots* s) noexcept {
      s->~Slots();  // trivial, as are the atomics
      ::operator delete(s);
    }
  };

  std::atomic<Slots*> current_;
  // Written under the mutex; atomic so that counts can be read anywhere. used_ counts occupied
  // slots (forgotten entries included: they keep theirs), forgotten_ the tombstones among them.
  std::atomic<std::size_t> used_{0};
  std::atomic<std::size_t> forgotten_{0};
};

/// A key's bytes, inside the object when they are short (every op name we have seen), else on
/// the heap. Comparisons choose the place from the caller's key length, so a hit reads the bytes
/// at a fixed offset without first loading the stored size (docs/PERFORMANCE.md).
class StoredKey {
 public:
  static constexpr std::size_t kInline = 32;

  /// The concatenation of a and b (b may be empty). May throw std::bad_alloc (long keys).
  void assign(std::string_view a, std::string_view b = {}) {
    const std::size_t n = a.size() + b.size();
    char* d = inline_;
    if (n > kInline) {
      heap_ = std::make_unique<char[]>(n);
      d = heap_.get();
    }
    if (!a.empty()) std::memcpy(d, a.data(), a.size());
    if (!b.empty()) std::memcpy(d + a.size(), b.data(), b.size());
    size_ = n;
  }

  std::size_t size() const noexcept { return size_; }
  std::string_view view() const noexcept {
    return {size_ <= kInline ? inline_ : heap_.get(), size_};
  }
  /// Bytes [offset, offset + part.size()) equal part; the caller has checked size().
  /// `total` is the caller's full key length (selects the storage without reading size_).
  bool part_equal(std::size_t total, std::size_t offset, std::string_view part) const noexcept {
    const char* d = total <= kInline ? inline_ : heap_.get();
    return bytes_equal(d + offset, part.data(), part.size());
  }
  bool equals(std::string_view key) const noexcept {
    return size_ == key.size() && part_equal(key.size(), 0, key);
  }

 private:
  std::size_t size_ = 0;
  char inline_[kInline];
  std::unique_ptr<char[]> heap_;  // when size_ > kInline
};

}  // namespace gpuplug::detail
