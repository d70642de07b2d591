// SPDX-License-Identifier: Apache-2.0
// libgpuplug-host.so: the host backend's description (identity, probe, describe, create) and
// entry point.
#include <array>
#include <gpuplug/version.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "device.hpp"
#include "driver.hpp"
#include "preflight.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::host {

/// The plugin description GPUPLUG_DEFINE_PLUGIN turns into the C table. The CPU is always there:
/// one device.
struct HostPlugin {
  static constexpr const char* name = "host";
  static constexpr const char* vendor = "gpuplug";
  static constexpr const char* version = GPUPLUG_VERSION_STRING;
  /// "threads": worker threads of an instance (default: the CPUs this process may run on).
  static constexpr std::array<std::string_view, 1> extra_options{"threads"};
  /// copy_peer_async and pinned memory (ABI 1.2): every host device's memory is the process's.
  static constexpr bool peer_copies = true;

  static void probe(gpuplug_probe_result_t& out) {
    sdk::fill_probe(out, GPUPLUG_PROBE_AVAILABLE, 1,
                    "host CPU, " + std::to_string(machine_threads()) + " threads");
  }
  static void describe_device(std::uint32_t /*ordinal: 0*/, gpuplug_device_info_t& out) {
    describe_host(out, machine_threads());
  }
  static std::unique_ptr<sdk::Device> create(const sdk::DeviceConfig& config) {
    return std::make_unique<HostDevice>(config);
  }
  /// Kernel preflight (ABI 1.1): the module's ELF against this machine (inspect.cpp).
  static void inspect_module(std::uint32_t /*ordinal: 0*/, std::span<const std::byte> image,
                             sdk::ModuleInspection& out) {
    host::inspect_module(image, out);
  }
};

}  // namespace gpuplug::host

GPUPLUG_DEFINE_PLUGIN(gpuplug::host::HostPlugin)
