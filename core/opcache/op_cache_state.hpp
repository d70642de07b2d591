// SPDX-License-Identifier: Apache-2.0
// Internal: the state of an OpCache (its entries and tables); op_cache.cpp gives it meaning.
//
// Every field of an entry but its atomics is set before the entry is published and never
// changes after; docs/opcache.md has the argument for lock-free hits that this relies on.
#pragma once

#include <gpuplug/op_cache.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "opcache/hash.hpp"
#include "opcache/insert_only_table.hpp"

namespace gpuplug {
namespace op_cache_detail {


constexpr const char* kFallbackSite = "OpCache::alloc_with_fallback";

using detail::InsertOnlyTable;
using detail::StoredKey;

// ---- entries. Every field but the atomics is set before publication and never changes.

struct KernelEntry {
  mutable std::atomic<std::uint64_t> hash;  // ~hash once forgotten (forget_module)
  std::size_t module_len;
  KernelHandle handle;
  StoredKey key;  // module followed by func, not separated: compared with module_len

  bool matches(std::string_view module, std::string_view func) const noexcept {
    const std::size_t total = module.size() + func.size();
    return module_len == module.size() && key.size() == total &&
           key.part_equal(total, 0, module) && key.part_equal(total, module.size(), func);
  }
  std::string_view module() const noexcept { return key.view().substr(0, module_len); }
  std::string_view func() const noexcept { return key.view().substr(module_len); }
};

// What kernel() read from a module's symbols, or record_*() set, for one handle.
struct RecordEntry {
  static constexpr std::uint64_t kHasNTile = std::uint64_t{1} << 32;
  mutable std::atomic<std::uint64_t> hash;  // ~hash once forgotten (forget_module)
  std::uint64_t handle;
  // kHasNTile | value, or 0 for none: one store; read as detail::unpack_optional_u32 reads it.
  mutable std::atomic<std::uint64_t> n_tile{0};
  mutable std::atomic<bool> a_e4m3{false};
};

// A once/first_shape key. once(key) is (key, 0, 0, 0).
struct GateEntry {
  std::uint64_t hash;
  std::uint64_t m, n, k;
  StoredKey name;
};

// A first_n key. `count` is the number of times first_n returned true for it. It changes only
// under the counters mutex and only from c to c + 1 when c < n, so it never exceeds the largest
// n asked (<= 2^64 - 1) and cannot wrap.
struct CounterEntry {
  std::uint64_t hash;
  mutable std::atomic<std::uint64_t> count{0};
  StoredKey key;
};

// One scratch buffer.
struct ScratchRecord {
  DevicePtr ptr;
  std::size_t bytes;
};

// A tag's live buffer is the pair (ptr, bytes), kept in the entry itself and replaced as a pair
// by a bigger buffer, under the scratch mutex. Readers get a consistent pair without a lock or a
// read-modify-write through `version`, a sequence lock: a writer makes it odd, stores the pair,
// and makes it even again; a reader loads the version, the pair, and the version again, and
// trusts the pair only when both versions are the same even number. A reader that overlaps a
// writer does not retry: it takes the miss path, which locks. The replaced buffer moves to
// Impl::retired_scratch and stays allocated until release().
struct ScratchEntry {
  std::uint64_t hash;
  mutable std::atomic<std::uint64_t> version{0};
  mutable std::atomic<std::uint64_t> ptr{0};    // the live buffer's DevicePtr value
  mutable std::atomic<std::uint64_t> bytes{0};  // its size
  StoredKey tag;
  // The buffers this tag outgrew (in Impl::retired_scratch) and their bytes: written under the
  // scratch mutex, read without it by the memory views (never by a hit, hence after the tag).
  mutable std::atomic<std::uint64_t> retired_bytes{0};
  mutable std::atomic<std::uint64_t> retired_count{0};

  /// Lock-free: the live buffer when it has at least `want` bytes and no writer interfered.
  std::optional<DevicePtr> fits(std::size_t want) const noexcept {
    // Acquire loads of the pair keep the second version load after them (no fence needed, so
    // ThreadSanitizer follows it too).
    const std::uint64_t v = version.load(std::memory_order_acquire);
    const std::uint64_t b = bytes.load(std::memory_order_acquire);
    const std::uint64_t p = ptr.load(std::memory_order_acquire);
    if (b < want || (v & 1) != 0 || version.load(std::memory_order_relaxed) != v)
      return std::nullopt;
    return DevicePtr{p};
  }
  /// Under the scratch mutex (or before publication): the pair, no version check needed.
  ScratchRecord live() const noexcept {
    return {DevicePtr{ptr.load(std::memory_order_relaxed)},
            static_cast<std::size_t>(bytes.load(std::memory_order_relaxed))};
  }
  /// Under the scratch mutex: replaces the pair.
  void replace(DevicePtr p, std::size_t n) const noexcept {
    // A reader that acquire-loads a new half of the pair also sees the odd version stored
    // before it (release), so its second version load cannot match its first.
    const std::uint64_t v = version.load(std::memory_order_relaxed);
    version.store(v + 1, std::memory_order_relaxed);
    ptr.store(p.value, std::memory_order_release);
    bytes.store(n, std::memory_order_release);
    version.store(v + 2, std::memory_order_release);  // the new pair before the even version
  }
};

struct RetiredScratch {
  const ScratchEntry* entry;  // for the tag in error messages
  ScratchRecord record;
};

// The two names are hashed apart and combined (detail::hash_pair): a hit never concatenates them.
inline std::uint64_t kernel_hash(std::string_view module, std::string_view func) noexcept {
  return detail::hash_pair(module, func);
}

// The name's hash, mixed with the shape when there is one. m ^ (k << 32) is injective for
// m, k < 2^32 (every real shape), so shapes rarely collide; a collision would only cost a probe.
// once(key) is (key, 0, 0, 0): inlined with constant zeros, its hash is the name's alone.
inline std::uint64_t gate_hash(std::string_view name, std::uint64_t m, std::uint64_t n,
                               std::uint64_t k) noexcept {
  std::uint64_t h = detail::hash_string(name);
  if ((m | n | k) != 0) {
    h ^= detail::hash_mum(m ^ ((k << 32) | (k >> 32)) ^ detail::kHashSecret0,
                          n ^ detail::kHashSecret1);
  }
  return h;
}

}  // namespace op_cache_detail

using namespace op_cache_detail;  // NOLINT(google-build-using-namespace): one internal header


// The kernel memo: handles and what their modules publish about them. A standalone cache (the
// backend's own) owns one; the model caches made for that backend share it (shared_ptr: a model
// cache that outlives its backend, against the rules, still frees only memory that is alive).
struct OpCache::Kernels {
  // Read by hits. Written only on misses.
  InsertOnlyTable<KernelEntry> kernels;
  InsertOnlyTable<RecordEntry> records;  // keyed by KernelHandle

  alignas(64) std::mutex kernels_mutex;  // held across the backend's resolution: one per key
  std::mutex records_mutex;
  // Live model caches sharing this memo. Changed only by their construction and destruction
  // (never on a hit); read by the owner's release, which refuses to clear the memo while any
  // exist.
  std::atomic<std::size_t> model_caches{0};

  // Every cache that reads this memo, for the memory views (snapshots, out-of-memory reports):
  // the owner (the backend's own cache) and the live model caches, in order of construction.
  // `caches_mutex` guards both lists and is also held by each of those caches' `release` while
  // it empties its scratch table, so a reader holding it may walk any of them without their
  // own locks. It is a leaf lock: nothing else is taken under it (the readers are lock-free),
  // so an out-of-memory report made while a scratch mutex is held cannot deadlock on it.
  std::mutex caches_mutex;
  const Impl* owner = nullptr;
  std::vector<const Impl*> models;

  const RecordEntry* find_record(KernelHandle h) const noexcept {
    return records.find(detail::hash_u64(h.value),
                        [&](const RecordEntry& e) { return e.handle == h.value; });
  }

  const RecordEntry& record_for(KernelHandle h) {
    if (const RecordEntry* e = find_record(h)) return *e;
    std::lock_guard lock(records_mutex);
    if (const RecordEntry* e = find_record(h)) return *e;
    auto fresh = std::make_unique<RecordEntry>();
    fresh->hash.store(detail::hash_u64(h.value), std::memory_order_relaxed);
    fresh->handle = h.value;
    records.reserve_one();
    const RecordEntry& ref = *fresh;
    records.insert(fresh.release());
    return ref;
  }

  // The kernels' miss path, for the cache `cache` that reads this memo (it binds that cache),
  // out of line and cold so that the hit stays small.
  [[gnu::noinline, gnu::cold]] KernelHandle miss(OpCache& cache, GpuBackend& gpu,
                                                 std::string_view module, std::string_view func,
                                                 std::uint64_t hash);
};

struct OpCache::Impl {
  // Read by hits: the tables (one cache line each) and the latch. Written only on misses.
  InsertOnlyTable<ScratchEntry> scratch;   // keyed by tag
  InsertOnlyTable<GateEntry> gates;        // once / first_shape
  InsertOnlyTable<CounterEntry> counters;  // first_n
  std::atomic<bool> fell_back{false};

  // Touched by misses only, on cache lines apart from what hits read. One mutex per table:
  // misses on different tables do not wait on each other.
  alignas(64) mutable std::mutex scratch_mutex;  // mutable: scratch_memory() reads under it
  std::mutex gates_mutex;
  std::mutex counters_mutex;
  std::atomic<bool> fallback_warned{false};
  std::mutex bind_mutex;  // bind's slow path: binding happens once, on a miss
  // A checked cache (bound to a backend that runs the validate layer: backend_ then holds the
  // backend's address with its low bit set, which no hit's compare matches, so every call that
  // takes a backend comes through a slow path). Those calls count themselves in `in_use` while
  // they run (Use); release sets `releasing`, then refuses if any is inside, and a call that
  // starts while it runs refuses too. Both sides write then read (seq_cst): at least one sees
  // the other. An unchecked cache never touches either.
  std::atomic<std::uint64_t> in_use{0};
  std::atomic<bool> releasing{false};
  std::vector<RetiredScratch> retired_scratch;  // under scratch_mutex
  // A model cache its Teardown released: scratch and alloc_with_fallback refuse until rearm()
  // (a released model's memory must not come back unseen). Written by release and rearm
  // (exclusive), read by those misses.
  std::atomic<bool> released{false};

  // The kernel memo: this cache's own, or (model cache) its backend cache's. Never null.
  std::shared_ptr<Kernels> kernels = std::make_shared<Kernels>();
  // Set at construction, then constant.
  bool model = false;                        // made by OpCache(gpu, name)
  std::string model_name;                    // "model A"; empty when unnamed
  // "op scratch (model A)"; also the start of each scratch buffer's ledger site, "<label>: <tag>"
  std::string label_text = "op scratch";

  void drop_retired_scratch() noexcept { retired_scratch.clear(); }

  /// Throws Error(invalid_argument) naming the cache and `operation` when it was released and
  /// not re-armed.
  void check_not_released(const GpuBackend& gpu, std::string_view operation) const;

  /// The scratch buffers held (live and retired) and their bytes: what release would free.
  std::pair<std::size_t, std::uint64_t> scratch_held() const;

  /// Appends what each scratch tag holds, live and retired, without the scratch mutex (so an
  /// out-of-memory report made inside scratch's own miss can say it). Needs `caches_mutex` of
  /// the memo or exclusive use (release empties the table under that mutex).
  void scratch_into(std::vector<ScratchMemory>& out) const;

  /// One call of kernel, scratch or alloc_with_fallback on a checked cache (`bound` has the
  /// low bit set), counted in in_use for its duration; nothing on an unchecked cache. Throws
  /// Error(invalid_argument) naming the cache and `operation` while release runs.
  class Use {
   public:
    Use(Impl& s, const GpuBackend* bound, const GpuBackend& gpu, std::string_view operation);
    ~Use() {
      if (s_ != nullptr) s_->in_use.fetch_sub(1, std::memory_order_seq_cst);
    }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    Impl* s_ = nullptr;
  };

  // Shared by first_shape and once; inline so that once's constant zeros fold into the hash.
  bool first_shape(std::string_view name, std::uint64_t m, std::uint64_t n, std::uint64_t k) {
    const std::uint64_t hash = gate_hash(name, m, n, k);
    const auto match = [&](const GateEntry& e) {
      return e.m == m && e.n == n && e.k == k && e.name.equals(name);
    };
    if (gates.find(hash, match) != nullptr) return false;  // hit: seen
    return first_sight(name, m, n, k, hash);
  }

  // The gates' miss path: true for exactly one of the threads that see the tuple first.
  [[gnu::noinline]] bool first_sight(std::string_view name, std::uint64_t m, std::uint64_t n,
                                     std::uint64_t k, std::uint64_t hash) {
    const auto match = [&](const GateEntry& e) {
      return e.m == m && e.n == n && e.k == k && e.name.equals(name);
    };
    std::lock_guard lock(gates_mutex);
    if (gates.find(hash, match) != nullptr) return false;  // another thread was first
    auto fresh = std::make_unique<GateEntry>();
    fresh->hash = hash;
    fresh->name.assign(name);
    fresh->m = m;
    fresh->n = n;
    fresh->k = k;
    gates.reserve_one();
    gates.insert(fresh.release());
    return true;
  }

  // The other misses, out of line and cold, so that the hit paths stay small
  // (docs/PERFORMANCE.md, "Notes from the code").
  [[gnu::noinline, gnu::cold]] DevicePtr scratch_miss(GpuBackend& gpu, std::string_view tag,
                                                      std::size_t bytes);
  [[gnu::noinline, gnu::cold]] bool first_n_miss(std::string_view key, std::uint64_t n,
                                                 std::uint64_t hash);
};

}  // namespace gpuplug
