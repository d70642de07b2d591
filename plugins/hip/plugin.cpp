// SPDX-License-Identifier: Apache-2.0
// The HIP/ROCm plugin's description (identity, probe, describe_device, create) and its C table.
#include <array>
#include <cstdio>
#include <gpuplug/version.hpp>
#include <memory>
#include <string_view>

#include "device.hpp"
#include "driver.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::hip {

/// The plugin description GPUPLUG_DEFINE_PLUGIN turns into the C table. The runtime is opened on
/// the first probe, describe_device or create (driver()), never at plugin load.
struct HipPlugin {
  static constexpr const char* name = "hip";
  static constexpr const char* vendor = "AMD";
  static constexpr const char* version = GPUPLUG_VERSION_STRING;
  static constexpr std::array<std::string_view, 0> extra_options{};

  /// DRIVER_MISSING without libamdhip64, DRIVER_TOO_OLD when it lacks an entry point, NO_DEVICE
  /// with "no AMD GPU (hipErrorNoDevice)" when it finds no GPU, else the device count.
  static void probe(gpuplug_probe_result_t& out) {
    const DriverApi& hip = driver();
    out.reason = hip.reason;
    out.device_count = hip.available() ? static_cast<std::uint32_t>(hip.device_count) : 0;
    std::snprintf(out.message, sizeof out.message, "%s", hip.message);
  }

  static void describe_device(std::uint32_t ordinal, gpuplug_device_info_t& out) {
    const DriverApi& hip = driver();
    if (!hip.available()) sdk::fail(GPUPLUG_STATUS_UNAVAILABLE, hip.message);
    if (ordinal >= static_cast<std::uint32_t>(hip.device_count))
      sdk::fail(GPUPLUG_STATUS_UNAVAILABLE, "no device hip:" + std::to_string(ordinal) + " (" +
                                                std::to_string(hip.device_count) + " AMD GPUs)");
    describe(hip, static_cast<int>(ordinal), out);
  }

  static std::unique_ptr<sdk::Device> create(const sdk::DeviceConfig& config) {
    return std::make_unique<HipDevice>(config, driver());
  }
};

}  // namespace gpuplug::hip

GPUPLUG_DEFINE_PLUGIN(gpuplug::hip::HipPlugin)
