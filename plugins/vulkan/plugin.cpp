// SPDX-License-Identifier: Apache-2.0
// libgpuplug-vulkan.so: the Vulkan plugin's description (identity, probe, describe, create) and
// entry point.
#include <array>
#include <gpuplug/version.hpp>
#include <memory>
#include <string_view>

#include "device.hpp"
#include "driver.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::vulkan {

/// The plugin description GPUPLUG_DEFINE_PLUGIN turns into the C table. The loader is opened and
/// the instance created on the first probe (driver()), never at plugin load; a missing loader, a
/// too-old one or no usable device are reasons, never failures.
struct VulkanPlugin {
  static constexpr const char* name = "vulkan";
  static constexpr const char* vendor = "Khronos Vulkan";
  static constexpr const char* version = GPUPLUG_VERSION_STRING;
  static constexpr std::array<std::string_view, 0> extra_options{};  // the common ones only

  static void probe(gpuplug_probe_result_t& out) {
    const DriverApi& api = driver();
    sdk::fill_probe(out, api.reason, static_cast<int>(api.device_count), api.message);
  }
  static void describe_device(std::uint32_t ordinal, gpuplug_device_info_t& out) {
    describe(driver(), ordinal, out);
  }
  static std::unique_ptr<sdk::Device> create(const sdk::DeviceConfig& config) {
    return std::make_unique<VulkanDevice>(config);
  }
};

}  // namespace gpuplug::vulkan

GPUPLUG_DEFINE_PLUGIN(gpuplug::vulkan::VulkanPlugin)
