// SPDX-License-Identifier: Apache-2.0
// The hip plugin's inspect_module hook: the device's gcnArchName from the runtime, then the
// image's choice (preflight.cpp). No context or module is created.
#include "device.hpp"
#include "driver.hpp"
#include "preflight.hpp"

namespace gpuplug::hip {

void inspect_module(std::uint32_t ordinal, std::span<const std::byte> image,
                    sdk::ModuleInspection& out) {
  inspect_image(image, device_arch(driver(), static_cast<int>(ordinal)), out);
}

}  // namespace gpuplug::hip
