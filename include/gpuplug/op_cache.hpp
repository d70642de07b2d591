// SPDX-License-Identifier: Apache-2.0
// OpCache: one backend's memo of kernel handles, grow-only scratch, latches, once-sets and first-N gates.
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

#include <gpuplug/memory.hpp>
#include <gpuplug/teardown.hpp>
#include <gpuplug/types.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string_view>
#include <vector>

GPUPLUG_API_BEGIN
namespace gpuplug {

class GpuBackend;

/// Thread-safety: every member except `release` (and destruction) may run concurrently with
/// every other. `release` needs exclusive use of the cache: it frees what a concurrent hit may return.
/// Hot path: a hit takes no lock, does no atomic read-modify-write, allocates nothing and never
/// throws; only a miss may lock. Keys are copied on insert. Design: docs/opcache.md.
///
/// Two kinds of cache (docs/opcache.md, "Models on a shared backend"):
/// - the backend's own, `gpu.op_cache()`, and standalone caches (`OpCache()`): they own their
///   kernel memo. One model per backend may hold the backend's own cache in its Teardown.
/// - a model cache, `OpCache(gpu, "model A")`: one per model on a shared backend, with its own
///   scratch, allocation latch, once-sets and first-N gates, so releasing it frees that model's
///   scratch only. Its kernel memo (handles and their n_tile / a_e4m3 records) is the backend's
///   own cache's, shared: handles belong to the backend, so every model may use them, each
///   kernel is resolved once per backend, and `gpu.unload_module` forgets a module's handles
///   for every model at once. While model caches exist, releasing `gpu.op_cache()` is refused
///   (Error(invalid_argument), nothing changed): it would free the memo they read.
///
/// Binding: a cache serves one backend at a time, since handles and scratch are only meaningful
/// to the backend that made them. A model cache is bound to its backend for life. Any other
/// cache is bound by the first call that passes a backend (`kernel`, `scratch`,
/// `alloc_with_fallback`); a later call with another backend throws Error(invalid_argument)
/// and changes nothing (a hit checks this with one pointer compare). `release(gpu)` unbinds it.
/// A backend's own cache is therefore bound to the backend first passed to it, normally that
/// backend; a test decorator that passes itself binds it to the decorator. Only the address is
/// kept, never dereferenced.
class OpCache final : public ModelResource<GpuBackend> {
 public:
  /// A standalone cache (the backend's own is one), owning its kernel memo; bound on first use.
  OpCache();
  /// A model cache for `gpu` (see above): its own scratch, latch and gates, the kernel memo of
  /// `gpu.op_cache()` (which it binds to gpu: Error(invalid_argument) if that cache serves
  /// another backend). `name` (e.g. "model A") tells models apart where the cache speaks: its
  /// label ("op scratch (model A)"), the ledger's call site of each scratch buffer ("op scratch
  /// (model A): <tag>") and its warnings. It uses the backend's cache as a call would, so not
  /// while that cache is being released. Release it (Teardown) before the backend goes: once
  /// released, its scratch and alloc_with_fallback throw Error(invalid_argument) naming it until
  /// rearm(). Destroying it frees no device memory (the backend may be gone): one destroyed
  /// while holding scratch logs a warning at once naming it and the bytes, and the backend's
  /// sweep frees them.
  explicit OpCache(GpuBackend& gpu, std::string_view name = {});
  ~OpCache() override;
  OpCache(const OpCache&) = delete;
  OpCache& operator=(const OpCache&) = delete;

  /// Memoized gpu.kernel(module, func); the backend is asked only on a miss. On a miss it also
  /// reads the module's 4-byte symbols `<func>_n_tile` and `<func>_a_e4m3` and records them; an
  /// absent symbol records nothing, one of another size or that cannot be read throws Error
  /// naming module and symbol (and nothing is memoized). Error(invalid_argument) when the cache
  /// is bound to another backend (see Binding).
  KernelHandle kernel(GpuBackend& gpu, std::string_view module, std::string_view func);

  /// Forgets the memoized handles of `module` and the records of those handles, and nothing
  /// else; the next kernel() of that module asks the backend again. GpuBackend::unload_module
  /// calls it (after the plugin unloaded the module), so a handle into an unloaded module is
  /// never handed out. Rare: takes the kernels and records mutexes; hits on other modules go on
  /// lock-free meanwhile. Must not overlap lookups of the same module: such a lookup returns
  /// either the old handle (invalid once the module is gone) or a fresh resolution. Lookups
  /// that happen after it returns (synchronised with the caller) never see the old handles.
  /// Forgotten entries keep their memory until `release`.
  void forget_module(std::string_view module);

  /// Records the N tile of a kernel; a later value replaces an earlier one.
  void record_n_tile(KernelHandle h, std::uint32_t n);
  std::optional<std::uint32_t> n_tile(KernelHandle h) const noexcept;
  /// Records that kernel h casts A to E4M3.
  void record_a_e4m3(KernelHandle h);
  bool a_e4m3(KernelHandle h) const noexcept;

  /// Grow-only buffer per tag. A request that fits returns the stored pointer; a larger one
  /// allocates a new buffer (device memory) and retires the old one, which stays valid until
  /// `release`. Throws Error(out_of_memory) from the backend on a failed grow, and
  /// Error(invalid_argument) when the cache is bound to another backend.
  DevicePtr scratch(GpuBackend& gpu, std::string_view tag, std::size_t bytes) {
    // Inline so that the hit is a leaf call: the caller, not the lookup, keeps the arguments
    // for the miss, and the lookup saves no registers (docs/PERFORMANCE.md).
    const DevicePtr hit = scratch_hit(gpu, tag, bytes);
    return hit ? hit : scratch_miss(gpu, tag, bytes);
  }

  /// The per-backend latch: true once device allocation has fallen back to managed memory.
  bool alloc_fell_back() const noexcept;
  void note_alloc_fallback() noexcept;
  /// Device memory; on out-of-memory tries managed memory, and only when that succeeded latches
  /// (warning once per cache) and returns it; once latched goes straight to managed. When the
  /// device has no managed memory (alloc_managed: unsupported) it throws the original
  /// out_of_memory and stays unlatched, so later calls try device memory again; any other
  /// managed failure propagates, unlatched. Error(invalid_argument) when bound to another backend. The caller
  /// owns the result (gpu.free). `site` is the call site the backend's ledger records, as for
  /// GpuBackend::alloc (default: the calling function), e.g. "weights (model A)" so that the
  /// ledger's report tells models apart. The latch is this cache's: see docs/opcache.md for
  /// what it means on a backend shared by several models.
  DevicePtr alloc_with_fallback(GpuBackend& gpu, std::size_t bytes,
                                const char* site = GPUPLUG_CALLER_FUNCTION);

  /// True for exactly the first n calls with key, never again (the count saturates at n).
  /// The count is per key, shared by every n: a call is true iff fewer than its own n calls
  /// with the key were true before it (so after first_n(k, 3) was true 3 times, first_n(k, 5)
  /// is true twice more and first_n(k, 2) is false). n == 0 is always false.
  bool first_n(std::string_view key, std::uint64_t n);
  /// first_shape(key, 0, 0, 0).
  bool once(std::string_view key);
  /// True the first time the tuple (name, m, n, k) is seen.
  bool first_shape(std::string_view name, std::uint64_t m, std::uint64_t n, std::uint64_t k);

  /// Number of memoized kernels (for a model cache: of the backend's shared memo) and of this
  /// cache's scratch tags (for operator<< and tests).
  std::size_t kernel_count() const noexcept;
  std::size_t scratch_count() const noexcept;
  /// What each scratch tag of this cache holds, live and retired, most first. Thread-safe with
  /// every member, release() of this or another cache of the backend included; takes no lock a
  /// scratch miss holds, so an out-of-memory report made inside one may call it.
  std::vector<ScratchMemory> scratch_memory() const;
  /// The same for every cache that shares this cache's kernel memo: on a backend, its own cache
  /// and each live model cache (OpCache(gpu, name)), most held first, each row naming its cache
  /// ("op scratch", "op scratch (model A)"). GpuBackend::memory_snapshot and the out-of-memory
  /// report use it, so a model's scratch is seen there. Thread-safe as scratch_memory().
  std::vector<ScratchMemory> all_scratch_memory() const;

  /// True for a model cache (made by OpCache(gpu, name)).
  bool is_model_cache() const noexcept;
  /// How many model caches share this cache's kernel memo now (0 for a model cache itself).
  std::size_t model_cache_count() const noexcept;

  /// "op scratch", or "op scratch (NAME)" for a named model cache.
  std::string_view label() const override;
  /// Frees every scratch buffer (live and retired) through `gpu` and empties the scratch map.
  /// A backend's own or standalone cache also forgets its kernel handles and their records and
  /// unbinds; a model cache keeps both (the memo is the backend's, the binding for life). Gates
  /// and the latch are kept. Idempotent. Error(invalid_argument), changing nothing, when bound
  /// to another backend, or when model caches still share this cache's kernel memo (releasing
  /// it would pull the memo from under them: release the models' own caches instead).
  /// Needs exclusive use: nothing else may call this cache while it runs. On a backend that runs
  /// the validate layer this is checked: Error(invalid_argument), nothing released, while another
  /// thread is inside kernel, scratch or alloc_with_fallback (docs/opcache.md). If a free fails it
  /// still frees the rest, forgets them all, then throws one Error naming the failures.
  void release(GpuBackend& gpu) override;
  /// A released model cache may be used again: the model is coming back (a released one refuses
  /// to allocate, so that memory of a model its Teardown ended never returns unseen). A no-op on
  /// a cache that was not released, and on the backend's own or a standalone cache (release
  /// unbinds those, and they serve the next backend they are given). Exclusive, as release.
  void rearm() noexcept;

  friend std::ostream& operator<<(std::ostream& os, const OpCache& c);  // OpCache { kernels: N, scratch: M }

 private:
  struct GPUPLUG_LOCAL Impl;     // the core's own (core/opcache/op_cache_state.hpp): not exported
  struct GPUPLUG_LOCAL Kernels;  // the kernel memo: owned by a standalone cache, shared by model caches
  /// Throws Error(invalid_argument) unless the cache is unbound (then binds it) or bound to gpu.
  void bind(GpuBackend& gpu);
  /// scratch's hit: the stored buffer when `tag` is known, the cache is bound to `gpu` and the
  /// buffer holds `bytes`; null otherwise. Never throws, allocates nothing. (A buffer is never
  /// null: a zero-byte alloc returns a distinct pointer. A backend that broke that would only
  /// send every call to the miss, which finds the entry again under its lock: slower, still right.)
  DevicePtr scratch_hit(const GpuBackend& gpu, std::string_view tag, std::size_t bytes) const noexcept;
  /// scratch's miss: binds (or throws), then looks again under the lock and allocates or grows.
  DevicePtr scratch_miss(GpuBackend& gpu, std::string_view tag, std::size_t bytes);

  std::unique_ptr<Impl> impl_;  // never null; Impl keeps the header free of the table types
  // The kernel memo this cache reads: its own (in impl_) or, for a model cache, the backend
  // cache's (kept alive by impl_). A raw pointer beside impl_, so a kernel hit loads it exactly
  // as it loaded impl_ before: a model cache's hit costs what a backend cache's does.
  Kernels* kernels_;
  // The bound backend, or null. Beside impl_, which every hit loads anyway: checking it costs a
  // load from the same cache line and a compare. Written by bind (under a mutex, before any
  // entry it guards is published) and release (exclusive); read relaxed by hits.
  std::atomic<const GpuBackend*> backend_{nullptr};
};

// The friend above, declared again at namespace scope: a function declared only as a friend
// does not take the export region's visibility, and would stay hidden in libgpuplug.
std::ostream& operator<<(std::ostream& os, const OpCache& c);

}  // namespace gpuplug
GPUPLUG_API_END
