// SPDX-License-Identifier: Apache-2.0
// libgpuplug-host.so: the host backend's description (identity, probe, create) and entry point.
#include <array>
#include <cstdio>
#include <gpuplug/version.hpp>
#include <memory>
#include <string_view>

#include "device.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::host {

/// The plugin description GPUPLUG_DEFINE_PLUGIN turns into the C table.
struct HostPlugin {
  static constexpr const char* name = "host";
  static constexpr const char* vendor = "gpuplug";
  static constexpr const char* version = GPUPLUG_VERSION_STRING;
  /// "threads": worker threads of an instance (default: the CPUs this process may run on).
  static constexpr std::array<std::string_view, 1> extra_options{"threads"};

  /// The CPU is always there: one device.
  static void probe(gpuplug_probe_result_t& out) {
    out.reason = GPUPLUG_PROBE_AVAILABLE;
    out.device_count = 1;
    std::snprintf(out.message, sizeof out.message, "host CPU, %u threads", machine_threads());
  }

  static void describe_device(std::uint32_t /*ordinal*/, gpuplug_device_info_t& out) {
    describe_host(out, machine_threads());
  }

  static std::unique_ptr<sdk::Device> create(const sdk::DeviceConfig& config) {
    return std::make_unique<HostDevice>(config);
  }
};

}  // namespace gpuplug::host

GPUPLUG_DEFINE_PLUGIN(gpuplug::host::HostPlugin)
