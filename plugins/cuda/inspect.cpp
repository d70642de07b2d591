// SPDX-License-Identifier: Apache-2.0
// The cuda plugin's inspect_module hook: the device's compute capability from the driver, then
// the image's choice (preflight.cpp). No context is created.
#include "device.hpp"
#include "driver.hpp"
#include "preflight.hpp"

namespace gpuplug::cuda {

void inspect_module(std::uint32_t ordinal, std::span<const std::byte> image,
                    sdk::ModuleInspection& out) {
  const DriverApi& api = driver();  // available: the SDK checked the ordinal against the probe
  CUdevice device = 0;
  check(api.device_get(&device, static_cast<int>(ordinal)), "cuDeviceGet");
  ComputeCapability cc;
  check(api.device_get_attribute(&cc.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
        "cuDeviceGetAttribute(compute capability)");
  check(api.device_get_attribute(&cc.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
        "cuDeviceGetAttribute(compute capability)");
  inspect_image(image, cc, out);
}

}  // namespace gpuplug::cuda
