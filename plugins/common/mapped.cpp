// SPDX-License-Identifier: Apache-2.0
// sdk::Device's mapped host memory (ABI 1.3): the vendor defaults, and the ledger entry and
// host-to-device record the SDK keeps around the vendor's calls.
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>

#include "gpuplug/support/text.hpp"
#include "ledger.hpp"
#include "mapped_set.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::sdk {

namespace {

std::string owner_of(const DeviceConfig& config) {
  return (config.plugin_name.empty() ? std::string("device") : config.plugin_name) + ":" +
         std::to_string(config.ordinal);
}

[[noreturn]] void mapped_unsupported(const DeviceConfig& config, const char* op) {
  fail(GPUPLUG_STATUS_UNSUPPORTED,
       std::string(op) + ": mapped host memory is not supported by " + owner_of(config));
}

std::uint64_t address_of(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

MappedHost Device::vendor_alloc_host_mapped(std::uint64_t) {
  mapped_unsupported(config_, "alloc_host_mapped");
}
void Device::vendor_free_host_mapped(void*) { mapped_unsupported(config_, "free_host_mapped"); }
std::uint64_t Device::vendor_host_ptr_to_device(void*) {
  mapped_unsupported(config_, "host_ptr_to_device");
}
// Managed memory has one address for the host and the device on CUDA, HIP and the host, which is
// also what the core answers for a plugin without the slot.
void* Device::vendor_host_address(std::uint64_t ptr) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr));
}

MappedHost Device::alloc_mapped(std::uint64_t bytes, const char* site) {
  if (bytes == 0) fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "alloc_host_mapped: bytes is 0");
  AllocationLedger::Reservation reservation = ledger_->reserve(bytes, alloc_kind_pinned);
  const MappedHost m = vendor_alloc_host_mapped(bytes);
  const auto give_back = [&]() noexcept {
    try {
      vendor_free_host_mapped(m.host);
    } catch (...) {  // the allocation failed anyway; nothing more to report it with
    }
  };
  if (m.host == nullptr || m.device == 0) {
    if (m.host != nullptr) give_back();
    fail(GPUPLUG_STATUS_DEVICE_ERROR, "alloc_host_mapped: the vendor returned a null pointer");
  }
  const std::uint64_t host = address_of(m.host);
  if (bytes > std::numeric_limits<std::uint64_t>::max() - host ||
      bytes > std::numeric_limits<std::uint64_t>::max() - m.device) {
    give_back();
    fail(GPUPLUG_STATUS_DEVICE_ERROR, "alloc_host_mapped: the vendor's range wraps around");
  }
  try {
    std::lock_guard lock(mapped_->mutex);
    ledger_->commit(std::move(reservation), m.device, site);
    try {
      mapped_->by_host.insert_or_assign(host, MappedSet::Range{m.device, bytes});
      mapped_->by_device.insert_or_assign(m.device, MappedSet::Range{host, bytes});
    } catch (...) {
      mapped_->by_host.erase(host);
      (void)ledger_->release_pinned(m.device);
      throw;
    }
  } catch (...) {
    give_back();
    throw;
  }
  return m;
}

void Device::free_mapped(void* host) {
  const std::uint64_t h = address_of(host);
  std::uint64_t device = 0;
  {
    // Off the record and the ledger before the vendor frees it (the ordering rule): an address
    // the driver hands out again is never mistaken for the old allocation.
    std::lock_guard lock(mapped_->mutex);
    const auto it = mapped_->by_host.find(h);
    if (it == mapped_->by_host.end()) {
      const bool inside = MappedSet::holding(mapped_->by_host, h).has_value();
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
           "free_host_mapped: " + support::hex(h) +
               (inside ? " points inside mapped host memory of " + ledger_->owner() +
                             ", not at its start"
                       : " is not mapped host memory of " + ledger_->owner() +
                             " (never allocated here, or freed already)"));
    }
    device = it->second.other;
    (void)ledger_->release_pinned(device);
    mapped_->by_device.erase(device);
    mapped_->by_host.erase(it);
  }
  vendor_free_host_mapped(host);
}

void Device::free_swept_mapped(std::uint64_t device) {
  void* host = nullptr;
  {
    std::lock_guard lock(mapped_->mutex);
    const auto it = mapped_->by_device.find(device);
    if (it == mapped_->by_device.end()) return;  // the ledger and the record agree: not reached
    host = reinterpret_cast<void*>(static_cast<std::uintptr_t>(it->second.other));
    mapped_->by_host.erase(it->second.other);
    mapped_->by_device.erase(it);
  }
  vendor_free_host_mapped(host);
}

std::uint64_t Device::mapped_device_address(const void* host) {
  const std::uint64_t h = address_of(host);
  std::lock_guard lock(mapped_->mutex);
  if (const auto hit = MappedSet::holding(mapped_->by_host, h))
    return hit->second.other + (h - hit->first);
  fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
       "host_ptr_to_device: " + support::hex(h) + " is not mapped host memory of " +
           ledger_->owner() + " (no live alloc_host_mapped range holds it; freed already?)");
}

void* Device::host_address_of(std::uint64_t ptr) {
  if (ptr == 0) fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "host_address: the pointer is null");
  const std::optional<LedgerEntry> e = ledger_->find(ptr);
  if (!e)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         "host_address: " + support::hex(ptr) + " is not memory of " + ledger_->owner() +
             " (no live allocation holds it; freed already?)");
  if (e->kind == alloc_kind_pinned) {
    std::lock_guard lock(mapped_->mutex);
    if (const auto hit = MappedSet::holding(mapped_->by_device, ptr))
      return reinterpret_cast<void*>(
          static_cast<std::uintptr_t>(hit->second.other + (ptr - hit->first)));
  }
  if (e->kind == GPUPLUG_ALLOC_MANAGED) return vendor_host_address(ptr);
  fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
       "host_address: " + support::hex(ptr) + ": device memory has no host address (" +
           (e->kind == alloc_external ? "an imported range" : "an allocation") + " of " +
           std::to_string(e->bytes) + " bytes at " + support::hex(e->ptr) + " on " +
           ledger_->owner() + "; copy it with copy_d2h, or allocate managed or mapped memory)");
}

}  // namespace gpuplug::sdk
