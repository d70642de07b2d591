// SPDX-License-Identifier: Apache-2.0
// OpCache: insert-only tables of immutable entries, read without locks; misses lock per table.
//
// The design and the argument for why hits are safe without locks are in docs/opcache.md; the
// comments here state the invariants that argument relies on.
#include <gpuplug/op_cache.hpp>
#include <gpuplug/backend.hpp>
#include <gpuplug/log.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hash.hpp"

namespace gpuplug {
namespace {

constexpr const char* kScratchSite = "OpCache::scratch";
constexpr const char* kFallbackSite = "OpCache::alloc_with_fallback";

// ---------------------------------------------------------------------------------------------
// InsertOnlyTable: open addressing (linear probing) over pointers to heap-allocated entries.
//
// Invariants (the lock-free reads rely on each one):
//  1. Readers (`find`) take no lock. Writers (`reserve_one`, `insert`) hold the owner's mutex,
//     so there is one writer at a time; `clear`/`drop_retired`/the destructor need exclusive use.
//  2. An entry is fully constructed before its pointer is stored into a slot with a release
//     store; readers load slots with acquire, so they see the finished entry. A published entry
//     is never changed afterwards (only its own atomic members are) and never freed before
//     `clear` or destruction.
//  3. A slot goes from null to an entry once and never changes again (until `clear`).
//  4. Growth builds a twice-as-big slot array completely, then publishes it with a release store
//     to `current_`. The outgrown array is retired (kept, chained through `previous`), not
//     freed, so a reader still probing it stays valid; it only misses newer keys, and a miss
//     goes to the locked path, which looks again in the current array.
//  5. The load factor stays <= 1/2, so every probe sequence reaches a null slot: `find`
//     terminates without a bound check.
//  6. The current array holds every entry (growth copies all pointers), so `clear` deletes
//     each entry exactly once by walking it.
// Entry needs a `std::uint64_t hash` member; the table owns its entries.
// Each table has a cache line of its own: an insert writes `size_` and, rarely, `current_`,
// and that must not disturb the hits of the other tables.
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
      if (e->hash == hash && match(*e)) return e;
      i = (i + 1) & t->mask;
    }
  }

  /// Under the owner's mutex: makes room so that the next `insert` cannot fail. May throw
  /// std::bad_alloc, leaving the table as it was.
  void reserve_one() {
    Slots* t = current_.load(std::memory_order_relaxed);
    const std::size_t capacity = t->mask + 1;
    if ((size_.load(std::memory_order_relaxed) + 1) * 2 <= capacity) return;
    Slots* bigger = Slots::make(capacity * 2, t);  // t is retired: kept until clear/destruction
    for (std::size_t i = 0; i < capacity; ++i) {
      if (const Entry* e = t->slots()[i].load(std::memory_order_relaxed)) bigger->place(e);
    }
    current_.store(bigger, std::memory_order_release);  // publishes the filled array
  }

  /// Under the owner's mutex, after `reserve_one`: publishes `e` (the table takes ownership).
  void insert(const Entry* e) noexcept {
    current_.load(std::memory_order_relaxed)->place(e);
    size_.store(size_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }

  /// Under the owner's mutex or with exclusive use: calls f(entry) for every entry.
  template <class F>
  void for_each(F&& f) const {
    const Slots* t = current_.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i <= t->mask; ++i) {
      if (const Entry* e = t->slots()[i].load(std::memory_order_relaxed)) f(*e);
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
    size_.store(0, std::memory_order_relaxed);
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

  // A slot array: this header followed in the same allocation by mask + 1 slots, so that a
  // lookup reads the mask and the slots without an extra pointer hop.
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
      std::size_t i = static_cast<std::size_t>(e->hash) & mask;
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
  std::atomic<std::size_t> size_{0};  // written under the mutex; atomic so counts read anywhere
};

// ---- entries. Every field but the atomics is set before publication and never changes.

// A key's bytes, inside the entry when they are short (every op name we have seen), else on the
// heap. A lookup picks the place from the *caller's* key length, which it knows before the entry
// is loaded, so the comparison reads the bytes at a fixed offset from the entry: one dependent
// load fewer than following a std::string's data pointer.
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
    return detail::bytes_equal(d + offset, part.data(), part.size());
  }
  bool equals(std::string_view key) const noexcept {
    return size_ == key.size() && part_equal(key.size(), 0, key);
  }

 private:
  std::size_t size_ = 0;
  char inline_[kInline];
  std::unique_ptr<char[]> heap_;  // when size_ > kInline
};

struct KernelEntry {
  std::uint64_t hash;
  std::size_t module_len;
  KernelHandle handle;
  StoredKey key;  // module followed by func, not separated: compared with module_len

  bool matches(std::string_view module, std::string_view func) const noexcept {
    const std::size_t total = module.size() + func.size();
    return module_len == module.size() && key.size() == total &&
           key.part_equal(total, 0, module) && key.part_equal(total, module.size(), func);
  }
};

// What kernel() read from a module's symbols, or record_*() set, for one handle.
struct RecordEntry {
  static constexpr std::uint64_t kHasNTile = std::uint64_t{1} << 32;
  std::uint64_t hash;
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

  /// Lock-free: the live buffer when it has at least `want` bytes and no writer interfered.
  std::optional<DevicePtr> fits(std::size_t want) const noexcept {
    // Acquire loads of the pair keep the second version load after them (no fence needed, so
    // ThreadSanitizer follows it too); on x86-64 all four are plain moves.
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

// The two names are hashed independently and combined (detail::hash_pair): the pair is never
// concatenated on a hit, and the two hashes' multiplies overlap instead of forming one chain.
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

std::string hex(std::uint64_t v) {
  char buf[2 + 16 + 1];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

struct OpCache::Impl {
  // Read by hits: the tables (one cache line each) and the latch. Written only on misses.
  InsertOnlyTable<KernelEntry> kernels;
  InsertOnlyTable<RecordEntry> records;    // keyed by KernelHandle
  InsertOnlyTable<ScratchEntry> scratch;   // keyed by tag
  InsertOnlyTable<GateEntry> gates;        // once / first_shape
  InsertOnlyTable<CounterEntry> counters;  // first_n
  std::atomic<bool> fell_back{false};

  // Touched by misses only, on cache lines of their own so a miss does not evict what other
  // threads' hits read. One mutex per table: misses on different tables do not wait on each other.
  alignas(64) std::mutex kernels_mutex;  // held across the backend's resolution: one per key
  std::mutex records_mutex;
  std::mutex scratch_mutex;
  std::mutex gates_mutex;
  std::mutex counters_mutex;
  std::atomic<bool> fallback_warned{false};
  std::vector<RetiredScratch> retired_scratch;  // under scratch_mutex

  void drop_retired_scratch() noexcept { retired_scratch.clear(); }

  const RecordEntry* find_record(KernelHandle h) const noexcept {
    return records.find(detail::hash_u64(h.value),
                        [&](const RecordEntry& e) { return e.handle == h.value; });
  }

  const RecordEntry& record_for(KernelHandle h) {
    if (const RecordEntry* e = find_record(h)) return *e;
    std::lock_guard lock(records_mutex);
    if (const RecordEntry* e = find_record(h)) return *e;
    auto fresh = std::make_unique<RecordEntry>();
    fresh->hash = detail::hash_u64(h.value);
    fresh->handle = h.value;
    records.reserve_one();
    const RecordEntry& ref = *fresh;
    records.insert(fresh.release());
    return ref;
  }

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

  // The other misses, out of line (and cold) so that the hit paths stay small leaf code: no
  // registers to save for the lock, the backend calls and the exception edges of a miss.
  [[gnu::noinline, gnu::cold]] KernelHandle kernel_miss(OpCache& cache, GpuBackend& gpu,
                                                        std::string_view module,
                                                        std::string_view func, std::uint64_t hash);
  [[gnu::noinline, gnu::cold]] DevicePtr scratch_miss(GpuBackend& gpu, std::string_view tag,
                                                      std::size_t bytes);
  [[gnu::noinline, gnu::cold]] bool first_n_miss(std::string_view key, std::uint64_t n,
                                                 std::uint64_t hash);
};

OpCache::OpCache() : impl_(new Impl) {}

OpCache::~OpCache() { delete impl_; }

// ---- kernels

namespace {

// Reads the 4-byte symbol `symbol` of `module`: nullopt when absent, Error naming module and
// symbol when it has another size or cannot be read.
std::optional<std::uint32_t> read_u32_symbol(GpuBackend& gpu, std::string_view module,
                                             const std::string& symbol) {
  std::optional<DeviceSymbol> sym;
  try {
    sym = gpu.device_symbol(module, symbol);
  } catch (const Error& e) {
    throw Error(e.status(), std::string(gpu.name()),
                "module " + std::string(module) + " symbol " + symbol +
                    " could not be looked up: " + e.message());
  }
  if (!sym) return std::nullopt;
  if (sym->bytes != sizeof(std::uint32_t)) {
    throw Error(Status::invalid_argument, std::string(gpu.name()),
                "module " + std::string(module) + " symbol " + symbol + " is " +
                    std::to_string(sym->bytes) + " bytes, expected 4");
  }
  std::uint32_t value = 0;
  try {
    gpu.copy_d2h(&value, sym->address, sizeof value);
  } catch (const Error& e) {
    throw Error(e.status(), std::string(gpu.name()),
                "module " + std::string(module) + " symbol " + symbol +
                    " could not be read: " + e.message());
  }
  return value;
}

}  // namespace

KernelHandle OpCache::kernel(GpuBackend& gpu, std::string_view module, std::string_view func) {
  const std::uint64_t hash = kernel_hash(module, func);
  const auto match = [&](const KernelEntry& e) { return e.matches(module, func); };
  if (const KernelEntry* e = impl_->kernels.find(hash, match)) return e->handle;  // hit
  return impl_->kernel_miss(*this, gpu, module, func, hash);
}

KernelHandle OpCache::Impl::kernel_miss(OpCache& cache, GpuBackend& gpu, std::string_view module,
                                        std::string_view func, std::uint64_t hash) {
  // The mutex is held across the backend calls so that each key is resolved once, even when
  // many threads miss it together; other keys' misses wait, which only happens at warm-up.
  const auto match = [&](const KernelEntry& e) { return e.matches(module, func); };
  std::lock_guard lock(kernels_mutex);
  if (const KernelEntry* e = kernels.find(hash, match)) return e->handle;
  const KernelHandle handle = gpu.kernel(module, func);
  const std::string name(func);
  const std::optional<std::uint32_t> n_tile = read_u32_symbol(gpu, module, name + "_n_tile");
  const std::optional<std::uint32_t> a_e4m3 = read_u32_symbol(gpu, module, name + "_a_e4m3");

  auto entry = std::make_unique<KernelEntry>();
  entry->hash = hash;
  entry->key.assign(module, func);
  entry->module_len = module.size();
  entry->handle = handle;
  kernels.reserve_one();
  // Records first, the handle last: whoever sees the handle also finds its records.
  if (n_tile) cache.record_n_tile(handle, *n_tile);
  if (a_e4m3 && *a_e4m3 != 0) cache.record_a_e4m3(handle);
  kernels.insert(entry.release());
  return handle;
}

void OpCache::record_n_tile(KernelHandle h, std::uint32_t n) {
  impl_->record_for(h).n_tile.store(RecordEntry::kHasNTile | n, std::memory_order_release);
}

std::optional<std::uint32_t> OpCache::n_tile(KernelHandle h) const noexcept {
  const RecordEntry* e = impl_->find_record(h);
  if (e == nullptr) return std::nullopt;
  return detail::unpack_optional_u32(e->n_tile.load(std::memory_order_acquire));
}

void OpCache::record_a_e4m3(KernelHandle h) {
  impl_->record_for(h).a_e4m3.store(true, std::memory_order_release);
}

bool OpCache::a_e4m3(KernelHandle h) const noexcept {
  const RecordEntry* e = impl_->find_record(h);
  return e != nullptr && e->a_e4m3.load(std::memory_order_acquire);
}

// ---- scratch

DevicePtr OpCache::scratch(GpuBackend& gpu, std::string_view tag, std::size_t bytes) {
  const std::uint64_t hash = detail::hash_string(tag);
  const auto match = [&](const ScratchEntry& e) { return e.tag.equals(tag); };
  if (const ScratchEntry* e = impl_->scratch.find(hash, match)) {
    if (const std::optional<DevicePtr> p = e->fits(bytes)) return *p;  // hit
  }
  // The miss path hashes again rather than keeping the hash alive through the hit path: fewer
  // live values, so the hit needs no callee-saved registers.
  return impl_->scratch_miss(gpu, tag, bytes);
}

DevicePtr OpCache::Impl::scratch_miss(GpuBackend& gpu, std::string_view tag, std::size_t bytes) {
  const std::uint64_t hash = detail::hash_string(tag);
  // A new tag or a bigger request. Everything that can throw happens before the device
  // allocation, and nothing after it can, so a failure leaves the cache as it was and leaks
  // nothing.
  const auto match = [&](const ScratchEntry& e) { return e.tag.equals(tag); };
  Impl& s = *this;
  std::lock_guard lock(s.scratch_mutex);
  const ScratchEntry* entry = s.scratch.find(hash, match);
  if (entry != nullptr) {
    const ScratchRecord r = entry->live();
    if (r.bytes >= bytes) return r.ptr;  // another thread grew it meanwhile (or a reader raced)
  }
  std::unique_ptr<ScratchEntry> fresh;
  if (entry == nullptr) {
    fresh = std::make_unique<ScratchEntry>();
    fresh->hash = hash;
    fresh->tag.assign(tag);
    s.scratch.reserve_one();
  } else {
    s.retired_scratch.reserve(s.retired_scratch.size() + 1);
  }
  const DevicePtr ptr = gpu.alloc(bytes, kScratchSite);

  // Commit; nothing below throws.
  if (fresh) {
    fresh->ptr.store(ptr.value, std::memory_order_relaxed);  // published with the entry
    fresh->bytes.store(bytes, std::memory_order_relaxed);
    s.scratch.insert(fresh.release());
  } else {
    // The old buffer stays valid for whoever holds it; release() frees it.
    s.retired_scratch.push_back({entry, entry->live()});
    entry->replace(ptr, bytes);
  }
  return ptr;
}

// ---- the allocation latch

bool OpCache::alloc_fell_back() const noexcept {
  return impl_->fell_back.load(std::memory_order_acquire);
}

void OpCache::note_alloc_fallback() noexcept {
  impl_->fell_back.store(true, std::memory_order_release);
}

DevicePtr OpCache::alloc_with_fallback(GpuBackend& gpu, std::size_t bytes) {
  if (alloc_fell_back()) return gpu.alloc_managed(bytes, kFallbackSite);
  std::string reason;
  try {
    return gpu.alloc(bytes, kFallbackSite);
  } catch (const Error& e) {
    if (e.status() != Status::out_of_memory) throw;
    reason = e.message();
  }
  note_alloc_fallback();
  // Once per backend, however many threads fall back together (an RMW, but on the miss path).
  if (!impl_->fallback_warned.exchange(true, std::memory_order_relaxed)) {
    log(LogLevel::warning, gpu.name(),
        "device memory exhausted allocating " + std::to_string(bytes) + " bytes (" + reason +
            "); this backend now allocates model memory as managed memory");
  }
  return gpu.alloc_managed(bytes, kFallbackSite);
}

// ---- gates

bool OpCache::first_n(std::string_view key, std::uint64_t n) {
  if (n == 0) return false;
  const std::uint64_t hash = detail::hash_string(key);
  const auto match = [&](const CounterEntry& e) { return e.key.equals(key); };
  const CounterEntry* e = impl_->counters.find(hash, match);
  // Hit: count only grows, so once it reached n it stays >= n.
  if (e != nullptr && e->count.load(std::memory_order_acquire) >= n) return false;
  return impl_->first_n_miss(key, n, hash);
}

bool OpCache::Impl::first_n_miss(std::string_view key, std::uint64_t n, std::uint64_t hash) {
  const auto match = [&](const CounterEntry& e) { return e.key.equals(key); };
  Impl& s = *this;
  std::lock_guard lock(s.counters_mutex);
  const CounterEntry* e = s.counters.find(hash, match);
  if (e == nullptr) {
    auto fresh = std::make_unique<CounterEntry>();
    fresh->hash = hash;
    fresh->key.assign(key);
    s.counters.reserve_one();
    e = fresh.get();
    s.counters.insert(fresh.release());
  }
  // The only write of count: from c to c + 1, under the mutex, only when c < n. Hence count <= n
  // <= 2^64 - 1 afterwards: it saturates and never wraps, whatever the number of calls.
  const std::uint64_t c = e->count.load(std::memory_order_relaxed);
  if (c >= n) return false;
  e->count.store(c + 1, std::memory_order_release);
  return true;
}

bool OpCache::once(std::string_view key) { return impl_->first_shape(key, 0, 0, 0); }

bool OpCache::first_shape(std::string_view name, std::uint64_t m, std::uint64_t n,
                          std::uint64_t k) {
  return impl_->first_shape(name, m, n, k);
}

// ---- counts, label, release

std::size_t OpCache::kernel_count() const noexcept { return impl_->kernels.size(); }

std::size_t OpCache::scratch_count() const noexcept { return impl_->scratch.size(); }

std::string_view OpCache::label() const { return "op scratch"; }

void OpCache::release(GpuBackend& gpu) {
  // Exclusive use (documented contract): no reader can be inside a table, so entries, records
  // and retired arrays may be freed now.
  Impl& s = *impl_;
  std::vector<std::string> failures;
  std::size_t buffers = 0;
  Status status = Status::success;
  const auto free_one = [&](std::string_view tag, const ScratchRecord& r, bool retired) {
    ++buffers;
    std::string why;
    try {
      gpu.free(r.ptr);
      return;
    } catch (const Error& e) {
      if (status == Status::success) status = e.status();
      why = e.message();
    } catch (const std::exception& e) {
      if (status == Status::success) status = Status::internal;
      why = e.what();
    } catch (...) {
      if (status == Status::success) status = Status::internal;
      why = "unknown exception";
    }
    failures.push_back("scratch '" + std::string(tag) + "'" + (retired ? " (retired)" : "") + " " +
                       std::to_string(r.bytes) + " bytes at " + hex(r.ptr.value) + ": " + why);
  };
  for (const RetiredScratch& r : s.retired_scratch) free_one(r.entry->tag.view(), r.record, true);
  s.scratch.for_each([&](const ScratchEntry& e) {
    free_one(e.tag.view(), e.live(), false);
  });

  // Forget everything, failed frees included: a second release must not free twice, and a
  // buffer whose free failed is the ledger's to report.
  s.drop_retired_scratch();
  s.scratch.clear();
  s.kernels.clear();  // handles may point into modules about to be unloaded
  s.records.clear();
  s.gates.drop_retired();  // gates and counters are kept; only their outgrown arrays go
  s.counters.drop_retired();

  if (!failures.empty()) {
    std::string message = std::to_string(failures.size()) + " of " + std::to_string(buffers) +
                          " scratch buffers failed to free (the others were freed): ";
    for (std::size_t i = 0; i < failures.size(); ++i) {
      if (i != 0) message += "; ";
      message += failures[i];
    }
    throw Error(status, std::string(gpu.name()), std::move(message));
  }
}

std::ostream& operator<<(std::ostream& os, const OpCache& c) {
  return os << "OpCache { kernels: " << c.kernel_count() << ", scratch: " << c.scratch_count()
            << " }";
}

}  // namespace gpuplug
