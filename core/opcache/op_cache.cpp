// SPDX-License-Identifier: Apache-2.0
// OpCache: insert-only tables of immutable entries, read without locks; misses lock per table.
// Here: kernels, binding, gates, counts and release (scratch and the allocation latch are in
// op_cache_scratch.cpp).
//
// The design and the argument for why hits are safe without locks are in docs/opcache.md; the
// comments here state the invariants that argument relies on.
#include <gpuplug/op_cache.hpp>
#include <gpuplug/backend.hpp>
#include <gpuplug/log.hpp>
#include <gpuplug/support/failures.hpp>
#include <gpuplug/support/text.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opcache/hash.hpp"
#include "opcache/insert_only_table.hpp"

#include "opcache/op_cache_state.hpp"
#include "table/plugin_backend.hpp"

namespace gpuplug {

namespace {

// ---- checked caches (docs/layers.md, "validate"): release while another thread is inside

/// What backend_ holds for `gpu` in a checked cache: its address with the low bit set. A
/// GpuBackend is pointer-aligned, so no real address has that bit, and every hit's compare with
/// &gpu fails: the calls go through the slow paths, which count themselves (Impl::Use).
const GpuBackend* checked_tag(const GpuBackend& gpu) noexcept {
  return reinterpret_cast<const GpuBackend*>(reinterpret_cast<std::uintptr_t>(&gpu) | 1u);
}
bool is_checked(const GpuBackend* bound) noexcept {
  return (reinterpret_cast<std::uintptr_t>(bound) & 1u) != 0;
}
/// The bound backend's address, tag or not.
const GpuBackend* untagged(const GpuBackend* bound) noexcept {
  return reinterpret_cast<const GpuBackend*>(reinterpret_cast<std::uintptr_t>(bound) &
                                             ~std::uintptr_t{1});
}
/// What a cache binding to `gpu` stores: checked when gpu runs the validate layer. Binding is
/// a miss-path event, so the dynamic_cast costs the hits nothing.
const GpuBackend* binding_for(const GpuBackend& gpu) {
  const auto* plugin = dynamic_cast<const detail::PluginBackend*>(&gpu);
  return plugin != nullptr && plugin->validates() ? checked_tag(gpu) : &gpu;
}

}  // namespace

OpCache::Impl::Use::Use(Impl& s, const GpuBackend* bound, const GpuBackend& gpu,
                        std::string_view operation) {
  if (!is_checked(bound)) return;
  s.in_use.fetch_add(1, std::memory_order_seq_cst);
  if (s.releasing.load(std::memory_order_seq_cst)) {
    s.in_use.fetch_sub(1, std::memory_order_seq_cst);
    throw Error(Status::invalid_argument, std::string(gpu.name()),
                "OpCache::" + std::string(operation) + ": the cache '" + s.label_text +
                    "' is being released by another thread; release needs exclusive use of "
                    "the cache (release it after every thread that uses it is done)");
  }
  s_ = &s;
}

OpCache::OpCache() : impl_(std::make_unique<Impl>()), kernels_(impl_->kernels.get()) {
  kernels_->owner = impl_.get();  // no other thread knows the memo yet
}

OpCache::OpCache(GpuBackend& gpu, std::string_view name) : OpCache() {
  OpCache& shared = gpu.op_cache();
  // The memo's handles must all come from gpu: bind the backend's cache to it (throws, before
  // anything is shared, if it serves another backend), then bind this one for life.
  shared.bind(gpu);
  backend_.store(binding_for(gpu), std::memory_order_relaxed);
  Impl& s = *impl_;
  if (!name.empty()) {
    s.model_name.assign(name);
    s.label_text.append(" (").append(name).append(")");
  }
  s.kernels = shared.impl_->kernels;
  kernels_ = s.kernels.get();
  // Last, and nothing after throws: the destructor (which runs if this body throws, the object
  // being constructed by the delegated constructor) undoes the count only when `model` is set.
  std::lock_guard lock(kernels_->caches_mutex);  // can throw: before `model` is set
  kernels_->models.reserve(kernels_->models.size() + 1);
  s.model = true;
  kernels_->model_caches.fetch_add(1, std::memory_order_relaxed);
  kernels_->models.push_back(&s);  // the memory views see this model's scratch from now on
}

OpCache::~OpCache() {
  // A model cache stops sharing the memo. Scratch it still holds cannot be freed here (the
  // backend may be gone: it is never touched), so it is said at once, naming the cache and the
  // bytes, rather than only by the backend's sweep much later.
  {
    // Out of the memory views first: nothing may read this cache once it goes.
    std::lock_guard lock(kernels_->caches_mutex);
    if (impl_->model) {
      kernels_->model_caches.fetch_sub(1, std::memory_order_relaxed);
      std::erase(kernels_->models, impl_.get());
    } else if (kernels_->owner == impl_.get()) {
      kernels_->owner = nullptr;
    }
  }
  try {
    if (const auto [buffers, bytes] = impl_->scratch_held(); buffers != 0) {
      log(LogLevel::warning, "opcache",
          "OpCache '" + impl_->label_text + "' destroyed holding " + std::to_string(buffers) +
              " scratch buffer" + (buffers == 1 ? "" : "s") + " (" + std::to_string(bytes) +
              " bytes) it never released: release it (Teardown) before destroying it; the "
              "backend's ledger frees them at its sweep");
    }
  } catch (...) {  // no memory for the message: the sweep still reports them
  }
}

void OpCache::rearm() noexcept { impl_->released.store(false, std::memory_order_relaxed); }

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
  const KernelEntry* e = kernels_->kernels.find(hash, match);
  // Hit: known key, and the bound backend asks (a miss binds or throws).
  if (e != nullptr && backend_.load(std::memory_order_relaxed) == &gpu) return e->handle;
  return kernels_->miss(*this, gpu, module, func, hash);
}

KernelHandle OpCache::Kernels::miss(OpCache& cache, GpuBackend& gpu, std::string_view module,
                                    std::string_view func, std::uint64_t hash) {
  // The mutex is held across the backend calls so that each key is resolved once, even when
  // many threads (or models) miss it together; other keys' misses wait, which only happens at
  // warm-up.
  const auto match = [&](const KernelEntry& e) { return e.matches(module, func); };
  cache.bind(gpu);  // here, not in kernel(): the hit stays a small leaf without the lock code
  const Impl::Use use(*cache.impl_, cache.backend_.load(std::memory_order_relaxed), gpu, "kernel");
  // A checked cache comes here on every call (see checked_tag): its hits are found again here,
  // without the lock.
  if (const KernelEntry* e = kernels.find(hash, match)) return e->handle;
  std::lock_guard lock(kernels_mutex);
  if (const KernelEntry* e = kernels.find(hash, match)) return e->handle;
  const KernelHandle handle = gpu.kernel(module, func);
  const std::string name(func);
  const std::optional<std::uint32_t> n_tile = read_u32_symbol(gpu, module, name + "_n_tile");
  const std::optional<std::uint32_t> a_e4m3 = read_u32_symbol(gpu, module, name + "_a_e4m3");

  auto entry = std::make_unique<KernelEntry>();
  entry->hash.store(hash, std::memory_order_relaxed);  // published with the entry
  entry->key.assign(module, func);
  entry->module_len = module.size();
  entry->handle = handle;
  kernels.reserve_one();
  // Records first, the handle last: whoever sees the handle also finds its records.
  if (n_tile) {
    record_for(handle).n_tile.store(RecordEntry::kHasNTile | *n_tile, std::memory_order_release);
  }
  if (a_e4m3 && *a_e4m3 != 0) record_for(handle).a_e4m3.store(true, std::memory_order_release);
  kernels.insert(entry.release());
  return handle;
}

void OpCache::forget_module(std::string_view module) {
  // Kernels before records, as kernel_miss takes them. An entry is live while its stored hash
  // is its key's hash; forget() flips it to ~hash for good (insert_only_table.hpp, rule 7).
  Kernels& s = *kernels_;  // shared with the model caches: one call forgets for every model
  std::lock_guard kernels_lock(s.kernels_mutex);
  std::lock_guard records_lock(s.records_mutex);
  s.kernels.for_each([&](const KernelEntry& e) {
    if (e.module() != module) return;
    if (e.hash.load(std::memory_order_relaxed) != kernel_hash(e.module(), e.func())) return;
    s.kernels.forget(e);
    const RecordEntry* r = s.find_record(e.handle);  // only this handle's records go
    if (r != nullptr) s.records.forget(*r);
  });
}

void OpCache::bind(GpuBackend& gpu) {
  if (untagged(backend_.load(std::memory_order_relaxed)) == &gpu) return;
  std::lock_guard lock(impl_->bind_mutex);
  const GpuBackend* bound = untagged(backend_.load(std::memory_order_relaxed));
  if (bound == nullptr) {
    // Entries it guards are published later.
    backend_.store(binding_for(gpu), std::memory_order_relaxed);
    return;
  }
  if (bound == &gpu) return;
  // The bound backend may be gone: only its address is shown, never dereferenced.
  throw Error(Status::invalid_argument, std::string(gpu.name()),
              "OpCache: this cache serves another backend (bound to the one at " +
                  support::hex(reinterpret_cast<std::uintptr_t>(bound)) +
                  "); use that backend's own op_cache(), or release this one first");
}

void OpCache::record_n_tile(KernelHandle h, std::uint32_t n) {
  kernels_->record_for(h).n_tile.store(RecordEntry::kHasNTile | n, std::memory_order_release);
}

std::optional<std::uint32_t> OpCache::n_tile(KernelHandle h) const noexcept {
  const RecordEntry* e = kernels_->find_record(h);
  if (e == nullptr) return std::nullopt;
  return detail::unpack_optional_u32(e->n_tile.load(std::memory_order_acquire));
}

void OpCache::record_a_e4m3(KernelHandle h) {
  kernels_->record_for(h).a_e4m3.store(true, std::memory_order_release);
}

bool OpCache::a_e4m3(KernelHandle h) const noexcept {
  const RecordEntry* e = kernels_->find_record(h);
  return e != nullptr && e->a_e4m3.load(std::memory_order_acquire);
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

std::size_t OpCache::kernel_count() const noexcept { return kernels_->kernels.size(); }

bool OpCache::is_model_cache() const noexcept { return impl_->model; }

std::size_t OpCache::model_cache_count() const noexcept {
  return impl_->model ? 0 : kernels_->model_caches.load(std::memory_order_relaxed);
}

std::string_view OpCache::label() const { return impl_->label_text; }

void OpCache::release(GpuBackend& gpu) {
  // Exclusive use (documented contract): no reader can be inside a table, so entries, records
  // and retired arrays may be freed now.
  const GpuBackend* bound = backend_.load(std::memory_order_relaxed);
  // Another backend: bind throws (scratch is freed by the backend that made it).
  if (bound != nullptr && untagged(bound) != &gpu) bind(gpu);
  Impl& s = *impl_;
  // A checked cache makes sure of it: no call inside now, and none may start until the end.
  struct Releasing {
    std::atomic<bool>* flag = nullptr;
    ~Releasing() {
      if (flag != nullptr) flag->store(false, std::memory_order_seq_cst);
    }
  } releasing;
  if (is_checked(bound)) {
    s.releasing.store(true, std::memory_order_seq_cst);
    releasing.flag = &s.releasing;
    if (const std::uint64_t inside = s.in_use.load(std::memory_order_seq_cst); inside != 0) {
      throw Error(Status::invalid_argument, std::string(gpu.name()),
                  "OpCache::release of '" + s.label_text + "' while " + std::to_string(inside) +
                      (inside == 1 ? " call is" : " calls are") +
                      " inside the same cache on another thread (kernel, scratch or "
                      "alloc_with_fallback): release needs exclusive use of the cache; nothing "
                      "was released");
    }
  }
  if (!s.model) {
    // The memo this release would clear is read by the backend's model caches: with any alive,
    // this is a model releasing the backend's own cache on a shared backend. Refuse, loudly,
    // and change nothing: freeing its scratch and handles would pull them from under the
    // other models, which still launch with them.
    const std::size_t sharing = s.kernels->model_caches.load(std::memory_order_relaxed);
    if (sharing != 0) {
      throw Error(Status::invalid_argument, std::string(gpu.name()),
                  "OpCache: release of the backend's own cache refused: " +
                      std::to_string(sharing) + " model cache" + (sharing == 1 ? "" : "s") +
                      " (OpCache(gpu, name)) still share its kernels. On a shared backend each "
                      "model releases its own OpCache, never gpu.op_cache(); the backend "
                      "releases its own cache when it is destroyed, after the models' caches");
    }
  }
  support::FailureList failures;
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
    } catch (...) {
      if (status == Status::success) status = Status::internal;
      why = support::describe_current_exception();
    }
    failures.add("scratch '" + std::string(tag) + "'" + (retired ? " (retired)" : "") + " " +
                 std::to_string(r.bytes) + " bytes at " + support::hex(r.ptr.value) + ": " + why);
  };
  for (const RetiredScratch& r : s.retired_scratch) free_one(r.entry->tag.view(), r.record, true);
  s.scratch.for_each([&](const ScratchEntry& e) {
    free_one(e.tag.view(), e.live(), false);
  });

  // Forget everything, failed frees included: a second release must not free twice, and a
  // buffer whose free failed is the ledger's to report.
  {
    std::lock_guard lock(kernels_->caches_mutex);  // the memory views may be reading the table
    s.drop_retired_scratch();
    s.scratch.clear();
  }
  if (!s.model) {
    // The memo is this cache's own and no model cache shares it (checked above).
    kernels_->kernels.clear();  // handles may point into modules about to be unloaded
    kernels_->records.clear();
    backend_.store(nullptr, std::memory_order_relaxed);  // empty of backend state: may serve any
  }
  // A model cache keeps the backend's memo (forget_module keeps it honest across unloads) and
  // its binding, which is for life.
  s.gates.drop_retired();  // gates and counters are kept; only their outgrown arrays go
  s.counters.drop_retired();
  // A model's release is its end until rearm(): scratch and alloc_with_fallback refuse.
  if (s.model) s.released.store(true, std::memory_order_relaxed);

  if (!failures.empty()) {
    const char* what = "scratch buffers failed to free (the others were freed)";
    throw Error(status, std::string(gpu.name()), failures.message(buffers, what));
  }
}

std::ostream& operator<<(std::ostream& os, const OpCache& c) {
  return os << "OpCache { kernels: " << c.kernel_count() << ", scratch: " << c.scratch_count()
            << " }";
}

}  // namespace gpuplug
