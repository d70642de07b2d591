// SPDX-License-Identifier: Apache-2.0
// libgpuplug-hip.so: the HIP/ROCm plugin's description (identity, probe, describe, create) and
// entry point.
#include <array>
#include <gpuplug/version.hpp>
#include <memory>
#include <string_view>

#include "device.hpp"
#include "driver.hpp"
#include "plugin_sdk.hpp"
#include "preflight.hpp"

namespace gpuplug::hip {

/// The plugin description GPUPLUG_DEFINE_PLUGIN turns into the C table. The runtime is loaded on
/// the first probe (driver()), never at plugin load: DRIVER_MISSING without libamdhip64,
/// DRIVER_TOO_OLD when it lacks an entry point, NO_DEVICE ("no AMD GPU (hipErrorNoDevice)").
struct HipPlugin {
  static constexpr const char* name = "hip";
  static constexpr const char* vendor = "AMD";
  static constexpr const char* version = GPUPLUG_VERSION_STRING;
  static constexpr std::array<std::string_view, 0> extra_options{};  // the common ones only
  /// copy_peer_async (hipMemcpyPeerAsync) and pinned memory (hipHostMalloc), ABI 1.2.
  static constexpr bool peer_copies = true;

  static void probe(gpuplug_probe_result_t& out) {
    const DriverApi& hip = driver();
    sdk::fill_probe(out, hip.reason, hip.device_count, hip.message);
  }
  static void describe_device(std::uint32_t ordinal, gpuplug_device_info_t& out) {
    describe(driver(), static_cast<int>(ordinal), out);
  }
  static std::unique_ptr<sdk::Device> create(const sdk::DeviceConfig& config) {
    return std::make_unique<HipDevice>(config, driver());
  }
  /// Kernel preflight (ABI 1.1): the bundle's code objects against the device (preflight.cpp).
  static void inspect_module(std::uint32_t ordinal, std::span<const std::byte> image,
                             sdk::ModuleInspection& out) {
    hip::inspect_module(ordinal, image, out);
  }
};

}  // namespace gpuplug::hip

GPUPLUG_DEFINE_PLUGIN(gpuplug::hip::HipPlugin)
