// SPDX-License-Identifier: Apache-2.0
#include "launch/kernel_signatures.hpp"

#include <gpuplug/kernel_args.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace gpuplug::detail {

std::unique_ptr<const KernelSignature> read_kernel_signature(GpuBackend& gpu,
                                                             std::string_view module,
                                                             std::string_view func) {
  const auto symbol = gpu.device_symbol(module, std::string(func) + GPUPLUG_KERNEL_ARGS_SUFFIX);
  constexpr std::size_t header = offsetof(gpuplug_kernel_args_t, sizes);
  if (!symbol || symbol->bytes < header) return nullptr;
  gpuplug_kernel_args_t meta{};
  gpu.copy_d2h(&meta, symbol->address, std::min(symbol->bytes, sizeof meta));
  // A later version only appends fields after `sizes`; an earlier one does not exist.
  if (meta.version < GPUPLUG_KERNEL_ARGS_VERSION || meta.count > GPUPLUG_KERNEL_ARGS_MAX ||
      symbol->bytes < header + meta.count * sizeof(std::uint32_t))
    return nullptr;
  auto sig = std::make_unique<KernelSignature>();
  sig->name.append(module).append("::").append(func);
  sig->sizes.assign(meta.sizes, meta.sizes + meta.count);
  return sig;
}

std::uint64_t KernelSignatures::hash_of(KernelHandle f) noexcept {
  return hash_mum(f.value ^ kHashSecret0, kHashSecret1);
}

const KernelSignatures::Entry* KernelSignatures::entry(KernelHandle f) const noexcept {
  return table_.find(hash_of(f), [&](const Entry& e) { return e.handle == f.value; });
}

void KernelSignatures::set(KernelHandle f, std::unique_ptr<const KernelSignature> sig) {
  const std::lock_guard lock(mutex_);
  const Entry* old = entry(f);
  // Resolving the same kernel again reads the same signature: keep the entry there.
  if (old != nullptr && sig && old->signature->name == sig->name &&
      old->signature->sizes == sig->sizes)
    return;
  if (old != nullptr) table_.forget(*old);
  if (!sig) return;
  table_.reserve_one();
  table_.insert(new Entry{{hash_of(f)}, f.value, std::move(sig)});
}

const KernelSignature* KernelSignatures::find(KernelHandle f) const noexcept {
  const Entry* e = entry(f);
  return e == nullptr ? nullptr : e->signature.get();
}

}  // namespace gpuplug::detail
