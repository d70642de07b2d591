// SPDX-License-Identifier: Apache-2.0
// CudaDevice's mapped host memory (ABI 1.3): page-locked host memory mapped into the device
// (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) and its device
// address (cuMemHostGetDevicePointer). The SDK keeps the ledger and checks the pointers.
#include <cstring>
#include <string>

#include "device.hpp"

namespace gpuplug::cuda {

namespace {

void require(const void* entry_point, const char* op, const char* symbol) {
  if (entry_point == nullptr)
    sdk::fail(GPUPLUG_STATUS_UNSUPPORTED,
              std::string(op) + ": the CUDA driver lacks " + symbol);
}

}  // namespace

sdk::MappedHost CudaDevice::vendor_alloc_host_mapped(std::uint64_t bytes) {
  require(reinterpret_cast<const void*>(api_.mem_host_alloc), "alloc_host_mapped",
          "cuMemHostAlloc");
  require(reinterpret_cast<const void*>(api_.mem_free_host), "alloc_host_mapped",
          "cuMemFreeHost");
  require(reinterpret_cast<const void*>(api_.mem_host_get_device_pointer), "alloc_host_mapped",
          "cuMemHostGetDevicePointer");
  const ContextScope current = make_current();
  void* host = nullptr;
  // Portable: every context may use it (as the SDK's record is the plugin's, not one context's).
  const CUresult r = api_.mem_host_alloc(&host, bytes,
                                         CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
  if (r != CUDA_SUCCESS)
    throw_error(r, "cuMemHostAlloc(" + std::to_string(bytes) + " bytes, DEVICEMAP | PORTABLE)");
  try {
    std::memset(host, 0, bytes);  // the driver hands out page-locked memory as it was
    return {host, vendor_host_ptr_to_device(host)};
  } catch (...) {
    (void)api_.mem_free_host(host);
    throw;
  }
}

void CudaDevice::vendor_free_host_mapped(void* host) {
  const ContextScope current = make_current();
  check(api_.mem_free_host(host), "cuMemFreeHost");
}

std::uint64_t CudaDevice::vendor_host_ptr_to_device(void* host) {
  require(reinterpret_cast<const void*>(api_.mem_host_get_device_pointer), "host_ptr_to_device",
          "cuMemHostGetDevicePointer");
  const ContextScope current = make_current();
  CUdeviceptr device = 0;
  check(api_.mem_host_get_device_pointer(&device, host, 0), "cuMemHostGetDevicePointer");
  return device;
}

// Managed memory has one address for host and device (unified addressing, which every device
// with managed memory has).
void* CudaDevice::vendor_host_address(std::uint64_t ptr) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr));
}

}  // namespace gpuplug::cuda
