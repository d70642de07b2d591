// SPDX-License-Identifier: Apache-2.0
// OpCache: one backend's memo of kernel handles, grow-only scratch, latches, once-sets and first-N gates.
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

#include <gpuplug/teardown.hpp>
#include <gpuplug/types.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string_view>

GPUPLUG_API_BEGIN
namespace gpuplug {

class GpuBackend;

/// Thread-safety: every member except `release` (and destruction) may run concurrently with
/// every other. `release` needs exclusive use of the cache, as the seed's `&mut self` did.
/// Hot path: a hit takes no lock, does no atomic read-modify-write, allocates nothing and never
/// throws; only a miss may lock. Keys are copied on insert. Design: docs/opcache.md.
///
/// Binding: a cache serves one backend at a time, since handles and scratch are only meaningful
/// to the backend that made them. The first call that passes a backend (`kernel`, `scratch`,
/// `alloc_with_fallback`) binds the cache to it; a later call with another backend throws
/// Error(invalid_argument) and changes nothing (a hit checks this with one pointer compare).
/// `release(gpu)` unbinds it. A backend's own cache (`gpu.op_cache()`) is therefore bound to
/// the backend first passed to it, normally that backend; a test decorator that passes itself
/// binds it to the decorator. Only the address is kept, never dereferenced.
class OpCache final : public ModelResource<GpuBackend> {
 public:
  OpCache();
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
  DevicePtr scratch(GpuBackend& gpu, std::string_view tag, std::size_t bytes);

  /// The per-backend latch: true once device allocation has fallen back to managed memory.
  bool alloc_fell_back() const noexcept;
  void note_alloc_fallback() noexcept;
  /// Device memory; on out-of-memory tries managed memory, and only when that succeeded latches
  /// (warning once) and returns it; once latched goes straight to managed. When the device has
  /// no managed memory (alloc_managed: unsupported) it throws the original out_of_memory and
  /// stays unlatched, so later calls try device memory again; any other managed failure
  /// propagates, unlatched. Error(invalid_argument) when bound to another backend. The caller
  /// owns the result (gpu.free).
  DevicePtr alloc_with_fallback(GpuBackend& gpu, std::size_t bytes);

  /// True for exactly the first n calls with key, never again (the count saturates at n).
  /// The count is per key, shared by every n: a call is true iff fewer than its own n calls
  /// with the key were true before it (so after first_n(k, 3) was true 3 times, first_n(k, 5)
  /// is true twice more and first_n(k, 2) is false). n == 0 is always false.
  bool first_n(std::string_view key, std::uint64_t n);
  /// first_shape(key, 0, 0, 0).
  bool once(std::string_view key);
  /// True the first time the tuple (name, m, n, k) is seen.
  bool first_shape(std::string_view name, std::uint64_t m, std::uint64_t n, std::uint64_t k);

  /// Number of memoized kernels and of scratch tags (for operator<< and tests).
  std::size_t kernel_count() const noexcept;
  std::size_t scratch_count() const noexcept;

  /// "op scratch".
  std::string_view label() const override;
  /// Frees every scratch buffer (live and retired) through `gpu`, empties the scratch map,
  /// forgets kernel handles and their records, and unbinds the cache. Gates and the latch are
  /// kept. Idempotent. Error(invalid_argument), changing nothing, when bound to another backend.
  /// Needs exclusive use: nothing else may call this cache while it runs. If a free fails it
  /// still frees the rest, forgets them all, then throws one Error naming the failures.
  void release(GpuBackend& gpu) override;

  friend std::ostream& operator<<(std::ostream& os, const OpCache& c);  // OpCache { kernels: N, scratch: M }

 private:
  struct GPUPLUG_LOCAL Impl;  // the core's own (core/op_cache_state.hpp): not exported
  /// Throws Error(invalid_argument) unless the cache is unbound (then binds it) or bound to gpu.
  void bind(GpuBackend& gpu);

  std::unique_ptr<Impl> impl_;  // never null; Impl keeps the header free of the table types
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
