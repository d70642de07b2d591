// SPDX-License-Identifier: Apache-2.0
// PluginBackend's mapped host memory and host addresses (ABI 1.3): the plugin's slots, or their
// defaults (unsupported; for host_address, the ledger snapshot's word on managed memory).
#include <gpuplug/support/text.hpp>

#include "table/plugin_backend.hpp"

namespace gpuplug::detail {

namespace {

std::uint64_t address_of(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

void* PluginBackend::alloc_host_pinned(std::size_t bytes, const char* site) {
  void* host = nullptr;
  std::uint64_t device = 0;
  check(optional_.alloc_host_mapped(*this, bytes, site, &host, &device), "alloc_host_pinned");
  if (host == nullptr || device == 0)
    throw Error(Status::internal, std::string(name()), "alloc_host_pinned",
                "the plugin returned a null pointer for " + std::to_string(bytes) + " bytes");
  return host;
}

void PluginBackend::free_host_pinned(void* p) {
  if (p == nullptr) return;  // a no-op, as for free
  check(optional_.free_host_mapped(*this, p), "free_host_pinned");
}

DevicePtr PluginBackend::host_ptr_to_device(const void* p) {
  if (p == nullptr)
    throw Error(Status::invalid_argument, std::string(name()), "host_ptr_to_device",
                "the host pointer is null");
  std::uint64_t device = 0;
  check(optional_.host_ptr_to_device(*this, p, &device), "host_ptr_to_device");
  if (device == 0)
    throw Error(Status::internal, std::string(name()), "host_ptr_to_device",
                "the plugin returned the null device address for " +
                    support::hex(address_of(p)));
  return DevicePtr{device};
}

void* PluginBackend::host_address(DevicePtr ptr) {
  if (optional_.host_address != nullptr) {
    void* out = nullptr;
    check(optional_.host_address(*this, ptr.value, &out), "host_address");
    return out;
  }
  // Without the slot: managed memory is reached at its own address on every plugin of ABI 1.2
  // and older (CUDA, HIP, host), which the snapshot's kinds tell apart from device memory.
  const MemorySnapshot s = ledger_snapshot();
  if (!s.complete)
    throw Error(Status::unsupported, std::string(name()), "host_address",
                "the " + plugin_name_ + " plugin has no host_address slot and no ledger "
                "snapshot to tell managed memory from device memory");
  for (const LiveAllocation& a : s.allocations) {
    const std::uint64_t offset = ptr.value - a.ptr.value;
    if (ptr.value < a.ptr.value || (offset != 0 && offset >= a.bytes)) continue;
    if (a.kind == AllocKind::managed)
      return reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr.value));
    throw Error(Status::invalid_argument, std::string(name()), "host_address",
                support::hex(ptr.value) + ": device memory has no host address (an allocation of " +
                    std::to_string(a.bytes) + " bytes at " + support::hex(a.ptr.value) + ")");
  }
  throw Error(Status::invalid_argument, std::string(name()), "host_address",
              support::hex(ptr.value) + " is not memory of this backend (no live allocation "
              "holds it; freed already?)");
}

}  // namespace gpuplug::detail
