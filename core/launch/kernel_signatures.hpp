// SPDX-License-Identifier: Apache-2.0
// The kernel signatures one backend has read: `<func>_args` of each kernel it resolved, by handle.
#pragma once

#include <atomic>
#include <gpuplug/backend.hpp>
#include <memory>
#include <mutex>
#include <string_view>

#include "opcache/insert_only_table.hpp"

namespace gpuplug::detail {

/// Reads `<func>_args` of module::func from `gpu` (device_symbol, then a copy to the host) and
/// returns the signature it describes; nullptr when the module publishes none, or one this
/// reader cannot use (another layout version, more than GPUPLUG_KERNEL_ARGS_MAX arguments, a
/// symbol smaller than the header). Errors of the backend propagate.
std::unique_ptr<const KernelSignature> read_kernel_signature(GpuBackend& gpu,
                                                             std::string_view module,
                                                             std::string_view func);

/// Signatures by kernel handle, looked up on every counted launch. `find` takes no lock (the
/// InsertOnlyTable OpCache's kernel memo uses); `set` takes the store's mutex. A driver may give
/// a later function the handle value of one whose module was unloaded, so `set` replaces: the
/// old entry is forgotten, not freed, so a pointer `find` returned stays valid until the store
/// is destroyed.
class KernelSignatures {
 public:
  /// `sig` for `f` from now on; nullptr: `f` has none. May throw std::bad_alloc.
  void set(KernelHandle f, std::unique_ptr<const KernelSignature> sig);
  const KernelSignature* find(KernelHandle f) const noexcept;

 private:
  struct Entry {
    mutable std::atomic<std::uint64_t> hash;  // changed by forget (InsertOnlyTable)
    std::uint64_t handle;
    std::unique_ptr<const KernelSignature> signature;
  };
  static std::uint64_t hash_of(KernelHandle f) noexcept;
  const Entry* entry(KernelHandle f) const noexcept;

  std::mutex mutex_;  // serialises set
  InsertOnlyTable<Entry> table_;
};

}  // namespace gpuplug::detail
