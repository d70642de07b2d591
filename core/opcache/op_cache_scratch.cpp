// SPDX-License-Identifier: Apache-2.0
// OpCache's memory: scratch buffers by tag (a hit read without locks, a miss that grows under the
// table's lock and retires the old buffer), what they hold, and the allocation latch that falls
// back to managed memory once device memory ran out.
//
// docs/opcache.md argues why the hits are safe without locks; the comments here state the
// invariants that argument relies on.
#include <gpuplug/backend.hpp>
#include <gpuplug/log.hpp>
#include <gpuplug/op_cache.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "opcache/hash.hpp"
#include "opcache/insert_only_table.hpp"
#include "opcache/op_cache_state.hpp"

namespace gpuplug {

// ---- scratch

namespace {

/// The scratch hit for one table and the cache's bound backend; inlined into both callers below.
[[gnu::always_inline]] inline DevicePtr find_scratch(const InsertOnlyTable<ScratchEntry>& table,
                                                     const std::atomic<const GpuBackend*>& bound,
                                                     const GpuBackend& gpu, std::string_view tag,
                                                     std::size_t bytes) noexcept {
  // The bound backend first: then neither it nor `gpu` stays live through the hash and the
  // probe, which leaves the hit enough scratch registers to save none.
  if (bound.load(std::memory_order_relaxed) != &gpu) return {};
  const std::uint64_t hash = detail::hash_string(tag);
  const auto match = [&](const ScratchEntry& e) { return e.tag.equals(tag); };
  const ScratchEntry* e = table.find(hash, match);
  if (e == nullptr) return {};
  return e->fits(bytes).value_or(DevicePtr{});
}

/// Tags longer than 16 bytes, out of line: the hash loop they need makes GCC save and restore
/// four registers in whatever function holds it, which the short tags' hit then paid each time.
[[gnu::noinline]] DevicePtr find_long_scratch(const InsertOnlyTable<ScratchEntry>& table,
                                              const std::atomic<const GpuBackend*>& bound,
                                              const GpuBackend& gpu, std::string_view tag,
                                              std::size_t bytes) noexcept {
  return find_scratch(table, bound, gpu, tag, bytes);
}

}  // namespace

DevicePtr OpCache::scratch_hit(const GpuBackend& gpu, std::string_view tag,
                               std::size_t bytes) const noexcept {
  if (tag.size() > 16) return find_long_scratch(impl_->scratch, backend_, gpu, tag, bytes);
  return find_scratch(impl_->scratch, backend_, gpu, tag, bytes);
}

void OpCache::Impl::check_not_released(const GpuBackend& gpu, std::string_view operation) const {
  if (!released.load(std::memory_order_relaxed)) return;
  throw Error(Status::invalid_argument, std::string(gpu.name()), std::string(operation),
              "the cache '" + label_text +
                  "' was released (its Teardown ran): a released model cache allocates nothing "
                  "until rearm() says the model is coming back");
}

std::pair<std::size_t, std::uint64_t> OpCache::Impl::scratch_held() const {
  std::lock_guard lock(scratch_mutex);
  std::size_t buffers = retired_scratch.size();
  std::uint64_t bytes = 0;
  for (const RetiredScratch& r : retired_scratch) bytes += r.record.bytes;
  scratch.for_each([&](const ScratchEntry& e) {
    ++buffers;
    bytes += e.live().bytes;
  });
  return {buffers, bytes};
}

DevicePtr OpCache::scratch_miss(GpuBackend& gpu, std::string_view tag, std::size_t bytes) {
  // The miss hashes again: carrying the hash out of the hit would make the hit dearer. A
  // released cache holds no scratch, so every scratch call of one comes here.
  bind(gpu);
  impl_->check_not_released(gpu, "scratch");
  const Impl::Use use(*impl_, backend_.load(std::memory_order_relaxed), gpu, "scratch");
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
  // The ledger's site names the tag, so a snapshot or an out-of-memory report says which
  // scratch holds the memory ("op scratch: act"); the ledger copies it.
  const std::string site = s.label_text + ": " + std::string(tag);
  const DevicePtr ptr = gpu.alloc(bytes, site.c_str());

  // Commit; nothing below throws.
  if (fresh) {
    fresh->ptr.store(ptr.value, std::memory_order_relaxed);  // published with the entry
    fresh->bytes.store(bytes, std::memory_order_relaxed);
    s.scratch.insert(fresh.release());
  } else {
    // The old buffer stays valid for whoever holds it; release() frees it.
    const ScratchRecord old = entry->live();
    s.retired_scratch.push_back({entry, old});
    entry->retired_bytes.store(entry->retired_bytes.load(std::memory_order_relaxed) + old.bytes,
                               std::memory_order_relaxed);
    entry->retired_count.store(entry->retired_count.load(std::memory_order_relaxed) + 1,
                               std::memory_order_relaxed);
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

DevicePtr OpCache::alloc_with_fallback(GpuBackend& gpu, std::size_t bytes, const char* site) {
  bind(gpu);
  impl_->check_not_released(gpu, "alloc_with_fallback");
  const Impl::Use use(*impl_, backend_.load(std::memory_order_relaxed), gpu,
                      "alloc_with_fallback");
  if (site == nullptr) site = kFallbackSite;
  if (alloc_fell_back()) return gpu.alloc_managed(bytes, site);
  std::string reason;
  std::exception_ptr out_of_memory;
  try {
    return gpu.alloc(bytes, site);
  } catch (const Error& e) {
    if (e.status() != Status::out_of_memory) throw;
    reason = e.message();
    out_of_memory = std::current_exception();
  }
  // Latch only once managed memory has been shown to work: without it, the caller gets the
  // out_of_memory that happened, and the next call tries device memory again.
  DevicePtr managed;
  try {
    managed = gpu.alloc_managed(bytes, site);
  } catch (const Error& e) {
    if (e.status() == Status::unsupported) std::rethrow_exception(out_of_memory);
    throw;
  }
  note_alloc_fallback();
  // Once per cache, however many threads fall back together (an RMW, but on the miss path).
  // The latch is this cache's: on a shared backend, each model's cache latches (and warns) on
  // its own first out-of-memory.
  if (!impl_->fallback_warned.exchange(true, std::memory_order_relaxed)) {
    const std::string who =
        !impl_->model ? std::string("this backend")
                      : (impl_->model_name.empty() ? std::string("a model cache")
                                                   : impl_->model_name) + " on this backend";
    log(LogLevel::warning, gpu.name(),
        "device memory exhausted allocating " + std::to_string(bytes) + " bytes (" + reason +
            "); " + who + " now allocates model memory as managed memory");
  }
  return managed;
}

// ---- what the scratch holds

std::size_t OpCache::scratch_count() const noexcept { return impl_->scratch.size(); }

void OpCache::Impl::scratch_into(std::vector<ScratchMemory>& out) const {
  // Lock-free reads, as a hit's (for_each_published): the entries stay alive while the caller
  // holds caches_mutex, since release empties the table only under it. A tag growing meanwhile
  // is seen before or after its growth, each counter on its own: a report, not a ledger.
  scratch.for_each_published([&](const ScratchEntry& e) {
    out.push_back({label_text, std::string(e.tag.view()), e.bytes.load(std::memory_order_acquire),
                   e.retired_bytes.load(std::memory_order_relaxed),
                   e.retired_count.load(std::memory_order_relaxed)});
  });
}

namespace {

void sort_most_held_first(std::vector<ScratchMemory>& out) {
  std::sort(out.begin(), out.end(), [](const ScratchMemory& a, const ScratchMemory& b) {
    const auto held = [](const ScratchMemory& m) { return m.live_bytes + m.retired_bytes; };
    if (held(a) != held(b)) return held(a) > held(b);
    return a.cache != b.cache ? a.cache < b.cache : a.tag < b.tag;
  });
}

}  // namespace

std::vector<ScratchMemory> OpCache::scratch_memory() const {
  std::vector<ScratchMemory> out;
  {
    std::lock_guard lock(kernels_->caches_mutex);
    impl_->scratch_into(out);
  }
  sort_most_held_first(out);
  return out;
}

std::vector<ScratchMemory> OpCache::all_scratch_memory() const {
  std::vector<ScratchMemory> out;
  {
    Kernels& k = *kernels_;
    std::lock_guard lock(k.caches_mutex);
    if (k.owner != nullptr) k.owner->scratch_into(out);  // null once it went (models outlive it)
    for (const Impl* m : k.models) m->scratch_into(out);
  }
  sort_most_held_first(out);
  return out;
}

}  // namespace gpuplug
