// SPDX-License-Identifier: Apache-2.0
// OpCache: one backend's memo of kernel handles, grow-only scratch, latches, once-sets and first-N gates.
#pragma once

#include <gpuplug/teardown.hpp>
#include <gpuplug/types.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string_view>

namespace gpuplug {

class GpuBackend;

/// Thread-safety: every member except `release` (and destruction) may run concurrently with
/// every other. `release` needs exclusive use of the cache, as the seed's `&mut self` did.
/// Hot path: a hit takes no lock, does no atomic read-modify-write, allocates nothing and never
/// throws; only a miss may lock. Keys are copied on insert. Design: docs/opcache.md.
class OpCache final : public ModelResource<GpuBackend> {
 public:
  OpCache();
  ~OpCache() override;
  OpCache(const OpCache&) = delete;
  OpCache& operator=(const OpCache&) = delete;

  /// Memoized gpu.kernel(module, func); the backend is asked only on a miss. On a miss it also
  /// reads the module's 4-byte symbols `<func>_n_tile` and `<func>_a_e4m3` and records them; an
  /// absent symbol records nothing, one of another size or that cannot be read throws Error
  /// naming module and symbol (and nothing is memoized).
  KernelHandle kernel(GpuBackend& gpu, std::string_view module, std::string_view func);

  /// Records the N tile of a kernel; a later value replaces an earlier one.
  void record_n_tile(KernelHandle h, std::uint32_t n);
  std::optional<std::uint32_t> n_tile(KernelHandle h) const noexcept;
  /// Records that kernel h casts A to E4M3.
  void record_a_e4m3(KernelHandle h);
  bool a_e4m3(KernelHandle h) const noexcept;

  /// Grow-only buffer per tag. A request that fits returns the stored pointer; a larger one
  /// allocates a new buffer (device memory) and retires the old one, which stays valid until
  /// `release`. Throws Error(out_of_memory) from the backend on a failed grow.
  DevicePtr scratch(GpuBackend& gpu, std::string_view tag, std::size_t bytes);

  /// The per-backend latch: true once device allocation has fallen back to managed memory.
  bool alloc_fell_back() const noexcept;
  void note_alloc_fallback() noexcept;
  /// Device memory; on out-of-memory latches (warning once) and returns managed memory; once
  /// latched goes straight to managed. The caller owns the result (gpu.free).
  DevicePtr alloc_with_fallback(GpuBackend& gpu, std::size_t bytes);

  /// True for exactly the first n calls with key, never again (the count saturates at n).
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
  /// Frees every scratch buffer (live and retired) through `gpu`, empties the scratch map and
  /// forgets kernel handles and their records. Gates and the latch are kept. Idempotent.
  /// Needs exclusive use: nothing else may call this cache while it runs. If a free fails it
  /// still frees the rest, forgets them all, then throws one Error naming the failures.
  void release(GpuBackend& gpu) override;

  friend std::ostream& operator<<(std::ostream& os, const OpCache& c);  // OpCache { kernels: N, scratch: M }

 private:
  struct Impl;
  Impl* impl_;  // owned; a raw pointer keeps the header free of the table types
};

}  // namespace gpuplug
