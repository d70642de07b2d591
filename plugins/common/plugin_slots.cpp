// SPDX-License-Identifier: Apache-2.0
// The SDK's plugin-level slots: probe, describe_device and create, for the hooks of a plugin's
// description struct.
#include <filesystem>
#include <memory>
#include <vector>

#include "edge.hpp"
#include "gpuplug/support/escape.hpp"
#include "gpuplug/support/text.hpp"

namespace gpuplug::sdk::detail {

gpuplug_status_t probe_with(const PluginHooks& hooks, gpuplug_probe_result_t* out) noexcept {
  if (out == nullptr || out->struct_size < sizeof(gpuplug_probe_result_t))
    return GPUPLUG_STATUS_INVALID_ARGUMENT;
  const std::uint32_t size = out->struct_size;
  *out = hooks.probed();
  out->struct_size = size;
  return GPUPLUG_STATUS_SUCCESS;
}

gpuplug_status_t describe_with(const PluginHooks& hooks, std::uint32_t ordinal,
                               gpuplug_device_info_t* out) noexcept {
  if (out == nullptr || out->struct_size < GPUPLUG_DEVICE_INFO_V1_0_SIZE)
    return GPUPLUG_STATUS_INVALID_ARGUMENT;
  try {
    require_device(hooks, ordinal);
    describe_into(*out, ordinal,
                  [&](gpuplug_device_info_t& info) { hooks.describe_device(ordinal, info); });
    return GPUPLUG_STATUS_SUCCESS;
  } catch (...) {
    const Caught c = caught("describe_device");
    gpuplug_device_info_t failed{};
    failed.ordinal = ordinal;
    copy_out(c.message, failed.name, sizeof failed.name);
    write_device_info(*out, failed);
    return c.status;
  }
}

namespace {
/// "/a:/b" (escaped: folder names are the caller's, and go to logs), or "(none)".
std::string describe_folders(const std::vector<std::filesystem::path>& folders) {
  std::vector<std::string> names;
  for (const auto& f : folders) names.push_back(support::escape_text(f.string()));
  return names.empty() ? std::string("(none)") : support::join(names, ":");
}
}  // namespace

gpuplug_status_t create_with(const PluginHooks& hooks, std::uint32_t ordinal,
                             const gpuplug_option_t* options, std::uint32_t option_count,
                             const gpuplug_host_services_t* services, gpuplug_instance_t* out,
                             char* error, std::size_t error_size) noexcept {
  copy_out("", error, error_size);
  if (out == nullptr) {
    copy_out("create: out is null", error, error_size);
    return GPUPLUG_STATUS_INVALID_ARGUMENT;
  }
  *out = nullptr;
  try {
    DeviceConfig config =
        parse_config(ordinal, options, option_count, services, hooks.extra_options);
    config.plugin_name = hooks.name;
    // The built-in folder first, so that naming more folders never hides the sample kernels.
    if (std::filesystem::path dir = default_modules_dir(hooks.name); !dir.empty())
      config.module_search_path.push_back(std::move(dir));
    std::string flat_warning;
    for (auto& dir : plugin_module_folders(config.modules_dirs, config.plugin_name, flat_warning))
      config.module_search_path.push_back(std::move(dir));
    require_device(hooks, ordinal);
    std::unique_ptr<Device> device = hooks.create(config);
    if (!device)
      fail(GPUPLUG_STATUS_INTERNAL, std::string(hooks.name) + ": create returned no device");
    if (!flat_warning.empty()) device->log(GPUPLUG_LOG_WARNING, flat_warning);
    device->log(
        GPUPLUG_LOG_DEBUG,
        "created; module folders=" + describe_folders(config.module_search_path) +
            ", device_memory_limit=" +
            (config.device_memory_limit ? support::describe_bytes(*config.device_memory_limit)
                                        : "(none)"));
    *out = reinterpret_cast<gpuplug_instance_t>(device.release());
    return GPUPLUG_STATUS_SUCCESS;
  } catch (...) {
    const Caught c = caught("create");
    copy_out(c.message, error, error_size);
    return c.status;
  }
}

}  // namespace gpuplug::sdk::detail
