// SPDX-License-Identifier: Apache-2.0
// AllocationLedger: one device instance's record of live allocations (pointer, bytes, kind, site).
#pragma once

#include <gpuplug/abi.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpuplug::sdk {

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
  std::uint64_t live_bytes = 0;  // device + managed
  std::uint64_t live_count = 0;
  std::uint64_t peak_bytes = 0;  // highest live_bytes seen
  std::uint64_t live_managed_bytes = 0;
  std::uint64_t total_allocs = 0;  // successful allocations
  std::uint64_t total_frees = 0;   // frees, sweeps included
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
/// Thread-safety: every member may be called concurrently. Errors are sdk::Failure:
/// OUT_OF_MEMORY past the limit, INVALID_ARGUMENT for an unknown or already-freed pointer.
class AllocationLedger {
 public:
  /// Receives warnings (the sweep's). Must be thread-safe and must not throw.
  using LogSink = std::function<void(gpuplug_log_level_t, std::string_view)>;

  /// `owner` names the instance in messages ("host:0"). `device_memory_limit` caps live device
  /// bytes; managed allocations are never limited.
  explicit AllocationLedger(std::string owner,
                            std::optional<std::uint64_t> device_memory_limit = {},
                            LogSink log = {});
  AllocationLedger(const AllocationLedger&) = delete;
  AllocationLedger& operator=(const AllocationLedger&) = delete;
  ~AllocationLedger();

  /// Bytes reserved against the limit between `reserve` and `commit`. Destroying an uncommitted
  /// reservation gives the bytes back (the vendor allocation failed).
  class Reservation {
   public:
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&&) = delete;
    ~Reservation();

   private:
    friend class AllocationLedger;
    Reservation(AllocationLedger* ledger, std::uint64_t bytes, gpuplug_alloc_kind_t kind) noexcept
        : ledger_(ledger), bytes_(bytes), kind_(kind) {}
    AllocationLedger* ledger_;  // null once committed or moved from
    std::uint64_t bytes_;
    gpuplug_alloc_kind_t kind_;
  };

  /// Reserves `bytes` of `kind`. Throws Failure(OUT_OF_MEMORY) naming the limit, the live bytes
  /// and the request when a device allocation would pass device_memory_limit.
  Reservation reserve(std::uint64_t bytes, gpuplug_alloc_kind_t kind);
  /// Records `ptr` for a reservation. Throws Failure(INTERNAL) if `ptr` is already live (the
  /// vendor handed out an address twice); the reservation is then given back.
  void commit(Reservation&& reservation, std::uint64_t ptr, std::string_view site);
  /// Removes `ptr` and returns its entry; the caller frees it at the vendor afterwards.
  /// Throws Failure(INVALID_ARGUMENT) "free of 0x..: not allocated by <owner> (or already freed)".
  LedgerEntry release(std::uint64_t ptr);
  /// As `release`, but returns only the kind, so it copies no site and allocates nothing (the
  /// SDK's free slot, a hot path). Same errors.
  gpuplug_alloc_kind_t release_kind(std::uint64_t ptr);

  /// reserve, vendor_alloc(), commit; frees the vendor pointer with vendor_free(ptr) if the
  /// commit fails. Returns the pointer. vendor_alloc throws on failure.
  template <class Alloc, class Free>
  std::uint64_t allocate(std::uint64_t bytes, gpuplug_alloc_kind_t kind, std::string_view site,
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

  /// The live allocation containing `address` ({ptr, bytes}, site left empty), if any. A
  /// zero-byte allocation contains its own pointer only.
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

  /// Removes every live entry and frees each with vendor_free (which may throw: that entry is
  /// counted in `failed`, logged, and the sweep goes on). Logs one warning with the count, the
  /// bytes and the top call sites when anything was swept. Never throws.
  SweepResult sweep(
      const std::function<void(std::uint64_t ptr, gpuplug_alloc_kind_t kind)>& vendor_free,
      std::size_t top_n = 5) noexcept;

 private:
  // Call sites, interned: an entry points at its site's string instead of owning a copy, so
  // commit and release allocate nothing for the site (the hot path). `live` counts the entries
  // that point at the site; sites with none are pruned when the table grows past
  // `prune_at_`, so callers that pass ever-new site strings cannot grow it without bound.
  struct SiteHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  using Sites = std::unordered_map<std::string, std::uint64_t, SiteHash, std::equal_to<>>;

  struct Live {
    std::uint64_t bytes;
    gpuplug_alloc_kind_t kind;
    Sites::value_type* site;  // interned; never null; its `second` counts this entry
  };

  // Recycles the map's nodes (one size: a tree node of Entries): commit and release run under
  // the exclusive lock and would otherwise call malloc and free for every allocation. Used only
  // under `mutex_` held exclusively (or with exclusive use of the ledger). Keeps at most the
  // peak number of live entries; freed with the ledger.
  class NodePool {
   public:
    NodePool() = default;
    NodePool(const NodePool&) = delete;
    NodePool& operator=(const NodePool&) = delete;
    ~NodePool();
    void* allocate(std::size_t bytes);
    void deallocate(void* p, std::size_t bytes) noexcept;

   private:
    struct Free {
      Free* next;
    };
    Free* free_ = nullptr;
    std::size_t node_bytes_ = 0;  // the one size pooled; other sizes go to operator new
  };

  template <class T>
  struct PoolAllocator {
    using value_type = T;
    NodePool* pool;
    explicit PoolAllocator(NodePool* p) noexcept : pool(p) {}
    template <class U>
    PoolAllocator(const PoolAllocator<U>& other) noexcept : pool(other.pool) {}
    T* allocate(std::size_t n) { return static_cast<T*>(pool->allocate(n * sizeof(T))); }
    void deallocate(T* p, std::size_t n) noexcept { pool->deallocate(p, n * sizeof(T)); }
    template <class U>
    bool operator==(const PoolAllocator<U>& other) const noexcept {
      return pool == other.pool;
    }
  };

  using Entries = std::map<std::uint64_t, Live, std::less<>,
                           PoolAllocator<std::pair<const std::uint64_t, Live>>>;

  void unreserve(std::uint64_t bytes, gpuplug_alloc_kind_t kind) noexcept;
  /// Under the exclusive lock: the interned site (inserted when new), its count not yet raised.
  Sites::value_type* intern(std::string_view site);
  /// Under the exclusive lock: removes `ptr`'s entry and updates the counters; the site's count
  /// is dropped by the caller once it is done with the site.
  Live remove(std::uint64_t ptr, std::unique_lock<std::shared_mutex>& lock);
  void log(gpuplug_log_level_t level, std::string_view message) const noexcept;
  void note_sweep_failure(std::uint64_t ptr, const std::exception_ptr& error) const noexcept;

  const std::string owner_;
  const std::optional<std::uint64_t> limit_;
  const LogSink log_;

  mutable std::shared_mutex mutex_;
  // Guarded by mutex_. Invariants: live_device_bytes_ + reserved_device_bytes_ <= *limit_ when a
  // limit is set; counters_.live_* are the sums over entries_; each site's count is the number
  // of entries (in entries_, or being swept) that point at it. pool_ is declared before
  // entries_ so that it outlives every node.
  NodePool pool_;
  Entries entries_{Entries::allocator_type(&pool_)};  // ordered: `find` locates interior pointers
  Sites sites_;
  Sites::value_type* last_site_ = nullptr;  // the last site interned: most calls repeat it
  std::size_t prune_at_ = 1024;
  LedgerCounters counters_;
  std::uint64_t live_device_bytes_ = 0;
  std::uint64_t reserved_device_bytes_ = 0;
};

/// "67108864 bytes (64.0 MiB)": exact count plus a readable size. Used in messages.
std::string describe_bytes(std::uint64_t bytes);

}  // namespace gpuplug::sdk
