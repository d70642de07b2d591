// SPDX-License-Identifier: Apache-2.0
// AllocationLedger: one device instance's record of live allocations (pointer, bytes, kind, site).
#pragma once

#include <gpuplug/abi.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flat_table.hpp"
#include "interval_index.hpp"
#include "spin_mutex.hpp"

namespace gpuplug::sdk {

/// GPUPLUG_ALLOC_EXTERNAL (ABI 1.2, interop handles): memory someone else allocated, wrapped by
/// import_memory. The ledger counts and range-checks it like any allocation, never against
/// device_memory_limit, and the SDK never hands it to vendor_free. Spelled out here because the
/// SDK also compiles against the frozen 1.0 and 1.1 headers, which lack the macro (no table of
/// theirs has an import slot, so no such entry ever exists there).
inline constexpr gpuplug_alloc_kind_t alloc_external = 2;
#ifdef GPUPLUG_ALLOC_EXTERNAL
static_assert(alloc_external == GPUPLUG_ALLOC_EXTERNAL);
#endif
/// GPUPLUG_ALLOC_PINNED (ABI 1.3, mapped host memory): page-locked host memory mapped into the
/// device's address space, recorded at its device address. Counted in live_count and
/// live_pinned_bytes (and its site's live_count), never in live_bytes, a site's bytes, the peaks
/// or device_memory_limit: it is host memory, not the device's budget. Spelled out for the same
/// reason as alloc_external (no table of an older header has the slot that makes it).
inline constexpr gpuplug_alloc_kind_t alloc_kind_pinned = 3;
#ifdef GPUPLUG_ALLOC_PINNED
static_assert(alloc_kind_pinned == GPUPLUG_ALLOC_PINNED);
#endif
/// GPUPLUG_ALLOC_ARENA (ABI 1.3, arenas): long-lived device memory (a model's weights). Counted in
/// live_count, arena_bytes and against device_memory_limit (it is device memory), never in
/// live_bytes, a site's bytes nor the peaks: those measure the transient memory a budget is for.
/// Only release_arena removes it; a sweep names every arena it finds. Spelled out as above.
inline constexpr gpuplug_alloc_kind_t alloc_kind_arena = 4;
#ifdef GPUPLUG_ALLOC_ARENA
static_assert(alloc_kind_arena == GPUPLUG_ALLOC_ARENA);
#endif

/// One live allocation. `bytes` is what the caller asked for (0 for a zero-byte allocation,
/// even though the vendor was asked for 1 byte so the pointer is distinct and freeable).
struct LedgerEntry {
  std::uint64_t ptr = 0;
  std::uint64_t bytes = 0;
  gpuplug_alloc_kind_t kind = GPUPLUG_ALLOC_DEVICE;
  std::string site;  // call-site tag; "" when the caller gave none
};

/// Counters of one ledger (the C ABI's gpuplug_ledger_stats_t without the header).
struct LedgerCounters {
  std::uint64_t live_bytes = 0;  // device + managed + external
  std::uint64_t live_count = 0;
  std::uint64_t peak_bytes = 0;  // highest live_bytes seen
  std::uint64_t live_managed_bytes = 0;
  std::uint64_t total_allocs = 0;  // successful allocations
  std::uint64_t total_frees = 0;   // frees, sweeps included
  std::uint64_t live_pinned_bytes = 0;  // mapped host memory (alloc_kind_pinned), not in live_bytes
  std::uint64_t arena_bytes = 0;        // arenas (alloc_kind_arena), not in live_bytes
};

/// One live allocation as a snapshot reports it.
struct SnapshotAllocation {
  std::uint64_t ptr = 0;
  std::uint64_t bytes = 0;
  gpuplug_alloc_kind_t kind = GPUPLUG_ALLOC_DEVICE;
  std::string site;
  std::uint64_t sequence = 0;  // the ledger's event number of the allocation
  std::uint64_t time_ns = 0;   // since the ledger was made; 0 when memory_history is off
};

/// One call site's totals: live now, and the highest its live bytes have been (since the ledger
/// was made or `reset_peak`; a site with nothing live and no history event is forgotten, and
/// its peak with it).
struct SiteTotals {
  std::string site;
  std::uint64_t live_bytes = 0;
  std::uint64_t live_count = 0;
  std::uint64_t peak_bytes = 0;
};

/// One alloc or free of the history ring (`memory_history`).
struct HistoryEvent {
  std::uint64_t sequence = 0;
  std::uint64_t time_ns = 0;  // since the ledger was made
  std::uint64_t ptr = 0;
  std::uint64_t bytes = 0;
  gpuplug_alloc_kind_t kind = GPUPLUG_ALLOC_DEVICE;
  bool is_free = false;
  std::string site;
};

/// What `snapshot` copies out of the ledger, under one lock: consistent with itself.
struct LedgerSnapshot {
  std::string owner;
  LedgerCounters counters;
  std::optional<std::uint64_t> device_memory_limit;
  std::vector<SiteTotals> sites;                // largest live bytes first, then by peak, name
  std::vector<SnapshotAllocation> allocations;  // by sequence
  std::size_t history_capacity = 0;             // 0: memory_history is off
  std::uint64_t history_dropped = 0;            // events overwritten by newer ones
  std::vector<HistoryEvent> history;            // oldest first
};

/// The snapshot as JSON, schema 1 (ledger_json.cpp): the part of a memory snapshot the plugin
/// knows, which the core completes (share/gpuplug/memory.schema.json, docs/memory.md).
std::string to_json(const LedgerSnapshot& snapshot);

/// What a scope saw: the highest the live bytes rose above where they were at its start, and
/// where they ended relative to it.
struct ScopeResult {
  std::uint64_t peak_bytes = 0;
  std::int64_t net_bytes = 0;
};

/// Live allocations of one call site.
struct SiteUsage {
  std::string site;
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;
};

/// What `sweep` freed.
struct SweepResult {
  std::uint64_t count = 0;  // entries removed from the ledger
  std::uint64_t bytes = 0;
  std::uint64_t managed_bytes = 0;
  std::uint64_t pinned_bytes = 0;    // mapped host memory among them (not in `bytes`)
  std::uint64_t arena_bytes = 0;     // arenas among them (not in `bytes`)
  std::vector<LedgerEntry> arenas;   // each arena swept, with its site (largest first)
  std::uint64_t failed = 0;          // entries whose vendor free threw (logged, still removed)
  std::vector<SiteUsage> top_sites;  // the largest sites among the swept allocations
};

/// The allocation ledger of one device instance (DESIGN.md, "Per-backend state").
///
/// Ordering rule: an entry is added only after the vendor allocation succeeded and removed
/// before the vendor free, each under the ledger's lock, so an address the vendor reuses after
/// a free is never mistaken for the old allocation. `device_memory_limit` is enforced by
/// reserving the bytes under the lock before the vendor allocation, so concurrent allocations
/// cannot overshoot it; a failed vendor allocation gives its reservation back.
///
/// Cost: alloc and free are on an application's hot path, so each takes the lock once (a
/// SpinMutex) and does O(1) work there: the exact index (a hash table by pointer) gains or loses
/// one slot, and nothing is allocated once the tables have grown to the peak number of live
/// entries. A device_memory_limit adds one lock for the reservation. docs/PERFORMANCE.md has the
/// measured cost against a bare aligned_alloc + free.
///
/// Interior pointers (`find`, for the range checks of copies) are looked up in an
/// IntervalIndex (interval_index.hpp), filed lazily: an allocation freed before the first
/// `find` that misses the exact index is never filed, and a program that never looks up interior
/// pointers never files anything.
///
/// Thread-safety: every member may be called concurrently. Errors are sdk::Failure:
/// OUT_OF_MEMORY past the limit, INVALID_ARGUMENT for an unknown or already-freed pointer.
class AllocationLedger {
 public:
  /// Receives warnings (the sweep's). Must be thread-safe and must not throw.
  using LogSink = std::function<void(gpuplug_log_level_t, std::string_view)>;

  /// `owner` names the instance in messages ("host:0"). `device_memory_limit` caps live device
  /// bytes; managed allocations are never limited.
  /// `history_capacity` > 0 keeps a ring of the last that many alloc and free events (the
  /// `memory_history` option); 0 keeps none and costs nothing on alloc and free.
  explicit AllocationLedger(std::string owner,
                            std::optional<std::uint64_t> device_memory_limit = {}, LogSink log = {},
                            std::size_t history_capacity = 0);
  AllocationLedger(const AllocationLedger&) = delete;
  AllocationLedger& operator=(const AllocationLedger&) = delete;
  ~AllocationLedger();

  /// Bytes of `kind` on their way into the ledger, between `reserve` and `commit`. When a
  /// device_memory_limit applies they are reserved against it, and destroying an uncommitted
  /// reservation gives them back (the vendor allocation failed).
  class Reservation {
   public:
    Reservation(Reservation&& other) noexcept
        : ledger_(std::exchange(other.ledger_, nullptr)),
          bytes_(other.bytes_),
          kind_(other.kind_) {}
    Reservation& operator=(Reservation&&) = delete;
    ~Reservation() {
      if (ledger_ != nullptr) ledger_->unreserve(bytes_);
    }

   private:
    friend class AllocationLedger;
    Reservation(AllocationLedger* holder, std::uint64_t bytes, gpuplug_alloc_kind_t kind) noexcept
        : ledger_(holder), bytes_(bytes), kind_(kind) {}
    AllocationLedger* ledger_;  // non-null while bytes are held against the limit
    std::uint64_t bytes_;
    gpuplug_alloc_kind_t kind_;
  };

  /// Reserves `bytes` of `kind`. Throws Failure(OUT_OF_MEMORY) naming the limit, the live bytes
  /// and the request when a device allocation would pass device_memory_limit, and
  /// Failure(INVALID_ARGUMENT) for a kind that is neither device, managed, external nor pinned.
  /// Without a limit (or for memory other than device memory) it takes no lock.
  Reservation reserve(std::uint64_t bytes, gpuplug_alloc_kind_t kind) {
    if (kind == GPUPLUG_ALLOC_DEVICE || kind == alloc_kind_arena) {
      if (limit_) return reserve_against_limit(bytes, kind);
    } else if (kind != GPUPLUG_ALLOC_MANAGED && kind != alloc_external && kind != alloc_kind_pinned) {
      fail_unknown_kind(kind);
    }
    return Reservation(nullptr, bytes, kind);
  }
  /// Records `ptr` for a reservation, tagged with `site` (a NUL-terminated call-site tag, copied
  /// when new; null means none). Throws Failure(INTERNAL) if `ptr` is null or already live (the
  /// vendor handed out an address twice); the reservation is then given back.
  void commit(Reservation&& reservation, std::uint64_t ptr, const char* site);
  /// Removes `ptr` and returns its entry; the caller frees it at the vendor afterwards.
  /// Throws Failure(INVALID_ARGUMENT) "free of 0x..: not allocated by <owner> (or already freed)".
  LedgerEntry release(std::uint64_t ptr);
  /// As `release`, but returns only the kind, so it copies no site and allocates nothing (the
  /// SDK's free slot, a hot path). Same errors.
  /// Neither removes an alloc_kind_pinned entry (its free is `release_pinned`) nor an
  /// alloc_kind_arena one (`release_arena`): either is refused, naming it and the free to use.
  gpuplug_alloc_kind_t release_kind(std::uint64_t ptr);
  /// Removes the alloc_kind_pinned entry at `ptr` and returns its bytes; Failure(INVALID_ARGUMENT)
  /// when there is none.
  std::uint64_t release_pinned(std::uint64_t ptr);
  /// Removes the alloc_kind_arena entry at `ptr`; Failure(INVALID_ARGUMENT) when there is none
  /// ("free_arena of 0x..: ..." naming what it is instead, when it is another live allocation).
  void release_arena(std::uint64_t ptr);

  /// reserve, vendor_alloc(), commit; frees the vendor pointer with vendor_free(ptr) if the
  /// commit fails. Returns the pointer. vendor_alloc throws on failure.
  template <class Alloc, class Free>
  std::uint64_t allocate(std::uint64_t bytes, gpuplug_alloc_kind_t kind, const char* site,
                         Alloc&& vendor_alloc, Free&& vendor_free) {
    Reservation r = reserve(bytes, kind);
    const std::uint64_t ptr = vendor_alloc();
    try {
      commit(std::move(r), ptr, site);
    } catch (...) {
      vendor_free(ptr);
      throw;
    }
    return ptr;
  }

  /// The live allocation containing `address` ({ptr, bytes, kind}, site left empty), if any.
  /// A zero-byte allocation contains its own pointer only. O(levels in use) (interval_index.hpp).
  std::optional<LedgerEntry> find(std::uint64_t address) const;

  LedgerCounters counters() const;
  std::uint64_t live_device_bytes() const;
  const std::optional<std::uint64_t>& device_memory_limit() const noexcept { return limit_; }
  const std::string& owner() const noexcept { return owner_; }

  /// Live allocations grouped by call site, largest total first (ties: more allocations first,
  /// then by site name), at most `top_n` of them.
  std::vector<SiteUsage> top_sites(std::size_t top_n) const;
  /// A human-readable report: totals, then the top `top_n` call sites.
  std::string report(std::size_t top_n) const;

  /// Everything the ledger knows, copied under one lock (ledger_json.cpp writes it as JSON).
  LedgerSnapshot snapshot() const;
  /// Starts the peaks again from now: the ledger's peak becomes its live bytes, and each site's
  /// peak that site's live bytes. Open scopes are not affected.
  void reset_peak();
  /// Opens a scope: from now on the ledger tracks how high live bytes rise above their current
  /// value, for every thread's allocations, until `end_scope`. Scopes nest and overlap freely;
  /// each open scope adds one compare to alloc. Returns the scope's id (never 0).
  std::uint64_t begin_scope();
  /// Closes scope `id` and returns what it saw. Throws Failure(INVALID_ARGUMENT) naming the id
  /// when it is not open.
  ScopeResult end_scope(std::uint64_t id);

  /// Removes every live entry and frees each with vendor_free (which may throw: that entry is
  /// counted in `failed`, logged, and the sweep goes on). Logs one warning with the count, the
  /// bytes and the top call sites when anything was swept. Never throws.
  SweepResult sweep(
      const std::function<void(std::uint64_t ptr, gpuplug_alloc_kind_t kind)>& vendor_free,
      std::size_t top_n = 5) noexcept;

 private:
  // Call sites, interned: an entry points at its site's string instead of owning a copy, so
  // commit and release allocate nothing for the site (the hot path), and write nothing to it
  // either. The mapped value is scratch for pruning: when the table grows past `prune_at_`,
  // the sites no live entry points at are forgotten, so callers that pass ever-new site strings
  // cannot grow it without bound. Only members that hold the lock read a site's string.
  struct SiteHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  // Per site: what is live, its peak, and how many history events name it (a site is pruned
  // only when both counts are 0, so a history event's site pointer stays valid).
  struct SiteState {
    std::uint64_t live_bytes = 0;
    std::uint64_t live_count = 0;
    std::uint64_t peak_bytes = 0;
    std::uint64_t history_refs = 0;
  };
  using Sites = std::unordered_map<std::string, SiteState, SiteHash, std::equal_to<>>;
  using Site = Sites::value_type;  // node-based: a Site never moves while it is in the map

  // The exact index: one slot per live allocation, keyed by its pointer (0 = empty slot, which
  // is why a null vendor pointer is refused).
  struct Live {
    std::uint64_t ptr;
    std::uint64_t bytes;
    Site* site;  // interned; never null in an occupied slot; read only under the lock
    gpuplug_alloc_kind_t kind;
    std::uint32_t filed;  // 1 once the allocation is in the interval index
    std::uint64_t sequence;
    std::uint64_t time_ns;  // 0 when the history is off (no clock read on the hot path)
  };
  // One slot of the history ring; `site` is kept alive by its history_refs.
  struct Event {
    std::uint64_t sequence;
    std::uint64_t time_ns;
    std::uint64_t ptr;
    std::uint64_t bytes;
    Site* site;  // null in a slot never written
    gpuplug_alloc_kind_t kind;
    std::uint32_t is_free;
  };
  struct OpenScope {
    std::uint64_t id;
    std::uint64_t base;  // live bytes at begin
    std::uint64_t high;  // highest live bytes since
  };
  struct LiveTraits {
    static bool empty(const Live& s) noexcept { return s.ptr == 0; }
    static void clear(Live& s) noexcept { s.ptr = 0; }
    static std::uint64_t hash(const Live& s) noexcept { return detail::mix(s.ptr); }
  };

  Reservation reserve_against_limit(std::uint64_t bytes, gpuplug_alloc_kind_t kind);
  void unreserve(std::uint64_t bytes) noexcept;
  [[noreturn]] static void fail_unknown_kind(gpuplug_alloc_kind_t kind);
  /// Under the lock: the interned site (inserted when new, after pruning when the table is
  /// due). Callers try `last_site_` first: allocations come in runs from one call site.
  Site* intern(const char* site);
  /// Under the lock: removes `ptr` from the indexes and the counters, its entry into `out`;
  /// false, changing nothing, when it is not live.
  // Which free removes an entry: free (device, managed, external), release_pinned, release_arena.
  enum class FreeBy : std::uint8_t { free, pinned, arena };
  static FreeBy free_by(gpuplug_alloc_kind_t kind) noexcept {
    return kind == alloc_kind_pinned  ? FreeBy::pinned
           : kind == alloc_kind_arena ? FreeBy::arena
                                      : FreeBy::free;
  }
  bool remove(std::uint64_t ptr, Live& out, FreeBy by) noexcept;
  [[noreturn]] void fail_not_live(std::uint64_t ptr) const;
  /// Under the lock: the live entry of `ptr`, or null.
  Live* live(std::uint64_t ptr) const noexcept;
  /// Under the lock, when the history is on: records one event in the ring (no allocation).
  void record_event(const Live& live, bool is_free) noexcept;
  std::uint64_t now_ns() const noexcept;
  void log(gpuplug_log_level_t level, std::string_view message) const noexcept;
  void note_sweep_failure(std::uint64_t ptr, const std::exception_ptr& error) const noexcept;

  const std::string owner_;
  const std::optional<std::uint64_t> limit_;
  const LogSink log_;

  // Guarded by mutex_. Invariants: the interval index holds exactly the entries of `exact_`
  // whose `filed` is 1, and every entry whose `filed` is 0 is noted in it once it is noting;
  // live_device_bytes_ + reserved_device_bytes_ <= *limit_ when a limit is set; counters_.live_*
  // are the sums over the entries; every entry's site is in `sites_`. The interval index is
  // filed by `find`, a const member, hence `mutable`.
  // What alloc and free touch comes first, from a cache line of its own (docs/PERFORMANCE.md).
  alignas(64) mutable detail::SpinMutex mutex_;
  mutable detail::FlatTable<Live, LiveTraits> exact_;  // `find` sets `filed` in place
  Site* last_site_ = nullptr;                          // the last site interned: most repeat it
  LedgerCounters counters_;
  std::uint64_t live_device_bytes_ = 0;
  std::uint64_t reserved_device_bytes_ = 0;
  mutable detail::IntervalIndex index_;  // its notes first: commit touches them
  std::uint64_t sequence_ = 0;           // the last event number given out (alloc and free)
  std::vector<OpenScope> scopes_;        // empty but for MemoryScopes: one test on alloc
  // The history ring: empty (capacity 0) unless memory_history is set; sized once at
  // construction so recording never allocates. history_next_ is the slot written next.
  std::vector<Event> history_;
  std::size_t history_next_ = 0;
  std::uint64_t history_written_ = 0;
  std::uint64_t next_scope_id_ = 0;
  // Colder: new sites.
  Sites sites_;
  std::size_t prune_at_ = 1024;
  const std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
};

}  // namespace gpuplug::sdk
