// SPDX-License-Identifier: Apache-2.0
// libgpuplug-cuda.so: the CUDA plugin's description (identity, probe, describe, create) and entry
// point.
#include <array>
#include <cstdio>
#include <gpuplug/version.hpp>
#include <memory>
#include <string_view>

#include "device.hpp"
#include "driver.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::cuda {

/// The plugin description GPUPLUG_DEFINE_PLUGIN turns into the C table.
struct CudaPlugin {
  static constexpr const char* name = "cuda";
  static constexpr const char* vendor = "NVIDIA";
  static constexpr const char* version = GPUPLUG_VERSION_STRING;
  /// Only the common options (device_memory_limit, modules_dir).
  static constexpr std::array<std::string_view, 0> extra_options{};

  /// Loads the driver on first use; reports a missing driver, a too-old driver or no device as
  /// reasons, never as failures.
  static void probe(gpuplug_probe_result_t& out) {
    const DriverApi& api = driver();
    out.reason = api.reason;
    out.device_count = api.available() ? static_cast<std::uint32_t>(api.device_count) : 0;
    std::snprintf(out.message, sizeof out.message, "%s", api.message);
  }

  static void describe_device(std::uint32_t ordinal, gpuplug_device_info_t& out) {
    describe(driver(), ordinal, out);
  }

  static std::unique_ptr<sdk::Device> create(const sdk::DeviceConfig& config) {
    return std::make_unique<CudaDevice>(config);
  }
};

}  // namespace gpuplug::cuda

GPUPLUG_DEFINE_PLUGIN(gpuplug::cuda::CudaPlugin)
