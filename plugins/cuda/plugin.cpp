// SPDX-License-Identifier: Apache-2.0
// libgpuplug-cuda.so: the CUDA plugin's description (identity, probe, describe, create) and entry
// point.
#include <array>
#include <gpuplug/version.hpp>
#include <memory>
#include <string_view>

#include "device.hpp"
#include "driver.hpp"
#include "plugin_sdk.hpp"
#include "preflight.hpp"

namespace gpuplug::cuda {

/// The plugin description GPUPLUG_DEFINE_PLUGIN turns into the C table. The driver is loaded on
/// the first probe (driver()), never at plugin load; a missing driver, a too-old driver or no
/// device are reasons, never failures.
struct CudaPlugin {
  static constexpr const char* name = "cuda";
  static constexpr const char* vendor = "NVIDIA";
  static constexpr const char* version = GPUPLUG_VERSION_STRING;
  static constexpr std::array<std::string_view, 0> extra_options{};  // the common ones only
  /// copy_peer_async (cuMemcpyPeerAsync) and pinned memory (cuMemHostAlloc), ABI 1.2.
  static constexpr bool peer_copies = true;

  static void probe(gpuplug_probe_result_t& out) {
    const DriverApi& api = driver();
    sdk::fill_probe(out, api.reason, api.device_count, api.message);
  }
  static void describe_device(std::uint32_t ordinal, gpuplug_device_info_t& out) {
    describe(driver(), ordinal, out);
  }
  static std::unique_ptr<sdk::Device> create(const sdk::DeviceConfig& config) {
    return std::make_unique<CudaDevice>(config);
  }
  /// Kernel preflight (ABI 1.1): the fatbin's SASS/PTX against the device (preflight.cpp).
  static void inspect_module(std::uint32_t ordinal, std::span<const std::byte> image,
                             sdk::ModuleInspection& out) {
    cuda::inspect_module(ordinal, image, out);
  }
};

}  // namespace gpuplug::cuda

GPUPLUG_DEFINE_PLUGIN(gpuplug::cuda::CudaPlugin)
