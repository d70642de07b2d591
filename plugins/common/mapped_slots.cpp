// SPDX-License-Identifier: Apache-2.0
// The SDK's ABI 1.3 slots of mapped host memory and host addresses: each checks its out
// arguments, calls the Device (mapped.cpp) and catches everything.
#include "edge.hpp"

namespace gpuplug::sdk::detail {

gpuplug_status_t slot_alloc_host_mapped(gpuplug_instance_t inst, std::uint64_t bytes,
                                        const char* site, void** host,
                                        std::uint64_t* device) noexcept {
  return guarded(inst, "alloc_host_mapped", [&](Device& d) {
    GPUPLUG_EXPECTS(host != nullptr && device != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "alloc_host_mapped: host or device is null");
    *host = nullptr;
    *device = 0;
    const MappedHost m = d.alloc_mapped(bytes, site);
    *host = m.host;
    *device = m.device;
  });
}

gpuplug_status_t slot_free_host_mapped(gpuplug_instance_t inst, void* host) noexcept {
  return guarded(inst, "free_host_mapped", [&](Device& d) {
    if (host != nullptr) d.free_mapped(host);
  });
}

gpuplug_status_t slot_host_ptr_to_device(gpuplug_instance_t inst, const void* host,
                                         std::uint64_t* device) noexcept {
  return guarded(inst, "host_ptr_to_device", [&](Device& d) {
    GPUPLUG_EXPECTS(device != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "host_ptr_to_device: device is null");
    GPUPLUG_EXPECTS(host != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "host_ptr_to_device: the host pointer is null");
    *device = d.mapped_device_address(host);
  });
}

gpuplug_status_t slot_host_address(gpuplug_instance_t inst, std::uint64_t ptr,
                                   void** out) noexcept {
  return guarded(inst, "host_address", [&](Device& d) {
    GPUPLUG_EXPECTS(out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "host_address: out is null");
    *out = d.host_address_of(ptr);
  });
}

}  // namespace gpuplug::sdk::detail
