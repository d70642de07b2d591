// SPDX-License-Identifier: Apache-2.0
// The probe, run once per plugin, and the one place that decides whether an ordinal is usable.
#include <string>

#include "gpuplug/support/c_string.hpp"
#include "gpuplug/support/failures.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::sdk {

void fill_probe(gpuplug_probe_result_t& out, gpuplug_probe_reason_t reason, int device_count,
                std::string_view message) noexcept {
  out.reason = reason;
  out.device_count = reason == GPUPLUG_PROBE_AVAILABLE && device_count > 0
                         ? static_cast<std::uint32_t>(device_count)
                         : 0;
  support::copy_out(message, out.message, sizeof out.message);
}

namespace detail {

gpuplug_probe_result_t run_probe(void (*probe)(gpuplug_probe_result_t&)) noexcept {
  gpuplug_probe_result_t out{};
  out.struct_size = sizeof out;
  try {
    probe(out);
  } catch (...) {
    out.reason = GPUPLUG_PROBE_ERROR;
    out.device_count = 0;
    try {
      support::copy_out("probe failed: " + support::describe_current_exception(), out.message,
                        sizeof out.message);
    } catch (...) {
      support::copy_out("probe failed", out.message, sizeof out.message);
    }
  }
  out.struct_size = sizeof out;
  out.message[sizeof out.message - 1] = '\0';
  if (out.reason == GPUPLUG_PROBE_AVAILABLE && out.device_count == 0) {
    out.reason = GPUPLUG_PROBE_NO_DEVICE;
    if (out.message[0] == '\0') support::copy_out("no device", out.message, sizeof out.message);
  }
  if (out.reason != GPUPLUG_PROBE_AVAILABLE) out.device_count = 0;
  return out;
}

void require_device(const PluginHooks& hooks, std::uint32_t ordinal) {
  const gpuplug_probe_result_t& probe = hooks.probed();
  if (probe.reason != GPUPLUG_PROBE_AVAILABLE)
    fail(GPUPLUG_STATUS_UNAVAILABLE,
         std::string(hooks.name) +
             " is unavailable: " + (probe.message[0] != '\0' ? probe.message : "no reason given"));
  if (ordinal >= probe.device_count)
    fail(GPUPLUG_STATUS_UNAVAILABLE, "no device " + std::to_string(ordinal) + ": " + hooks.name +
                                         " has " + std::to_string(probe.device_count) +
                                         (probe.device_count == 1 ? " device" : " devices"));
}

}  // namespace detail
}  // namespace gpuplug::sdk
