// SPDX-License-Identifier: Apache-2.0
// HipDevice's mapped host memory (ABI 1.3): page-locked host memory mapped into the device
// (hipHostMalloc with hipHostMallocMapped | hipHostMallocPortable) and its device address
// (hipHostGetDevicePointer). The SDK keeps the ledger and checks the pointers.
#include <cstring>
#include <string>

#include "device.hpp"

namespace gpuplug::hip {

namespace {

void require(const void* entry_point, const char* op, const char* symbol) {
  if (entry_point == nullptr)
    sdk::fail(GPUPLUG_STATUS_UNSUPPORTED, std::string(op) + ": the HIP runtime lacks " + symbol);
}

}  // namespace

sdk::MappedHost HipDevice::vendor_alloc_host_mapped(std::uint64_t bytes) {
  require(reinterpret_cast<const void*>(hip_.host_malloc), "alloc_host_mapped", "hipHostMalloc");
  require(reinterpret_cast<const void*>(hip_.host_free), "alloc_host_mapped", "hipHostFree");
  require(reinterpret_cast<const void*>(hip_.host_get_device_pointer), "alloc_host_mapped",
          "hipHostGetDevicePointer");
  make_current();
  void* host = nullptr;
  const hipError_t r = hip_.host_malloc(&host, bytes, hipHostMallocMapped | hipHostMallocPortable);
  if (r != hipSuccess)
    throw_error(r, "hipHostMalloc(" + std::to_string(bytes) + " bytes, Mapped | Portable)");
  try {
    std::memset(host, 0, bytes);  // the runtime hands out page-locked memory as it was
    return {host, vendor_host_ptr_to_device(host)};
  } catch (...) {
    static_cast<void>(hip_.host_free(host));
    throw;
  }
}

void HipDevice::vendor_free_host_mapped(void* host) {
  make_current();
  check(hip_.host_free(host), "hipHostFree");
}

std::uint64_t HipDevice::vendor_host_ptr_to_device(void* host) {
  require(reinterpret_cast<const void*>(hip_.host_get_device_pointer), "host_ptr_to_device",
          "hipHostGetDevicePointer");
  make_current();
  void* device = nullptr;
  check(hip_.host_get_device_pointer(&device, host, 0), "hipHostGetDevicePointer");
  return reinterpret_cast<std::uintptr_t>(device);
}

// Managed memory has one address for host and device.
void* HipDevice::vendor_host_address(std::uint64_t ptr) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr));
}

}  // namespace gpuplug::hip
