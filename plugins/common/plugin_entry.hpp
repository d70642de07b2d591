// SPDX-License-Identifier: Apache-2.0
// The plugin's C table from its description struct: the hooks GPUPLUG_DEFINE_PLUGIN gathers, the
// table and its per-minor views, and the entry point. Included by plugin_sdk.hpp, at its end.
#pragma once

#include <gpuplug/abi.h>

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "plugin_sdk.hpp"  // the Device and DeviceConfig the hooks make

namespace gpuplug::sdk {

namespace detail {
/// What GPUPLUG_DEFINE_PLUGIN gathers from a plugin description struct.
struct PluginHooks {
  const char* name;
  const char* vendor;
  const char* version;
  void (*probe)(gpuplug_probe_result_t&);
  void (*describe_device)(std::uint32_t, gpuplug_device_info_t&);
  std::unique_ptr<Device> (*create)(const DeviceConfig&);
  std::span<const std::string_view> extra_options;
  const gpuplug_probe_result_t& (*probed)() noexcept;  // the probe's result, run once
  /// P::inspect_module when P has one, else null (the table's slot then stays null).
  void (*inspect_module)(std::uint32_t, std::span<const std::byte>, ModuleInspection&) = nullptr;
};

/// Runs a plugin's probe hook and normalises its result (a thrown exception is PROBE_ERROR with
/// the reason, device_count is 0 unless available, the message is terminated). Never throws.
gpuplug_probe_result_t run_probe(void (*probe)(gpuplug_probe_result_t&)) noexcept;

/// The one place that decides whether `ordinal` is a usable device of a plugin: its probe (run
/// once) must have found the driver and more than `ordinal` devices. Failure(UNAVAILABLE) naming
/// the reason otherwise. describe_device and create run after it; vendors do not check again.
void require_device(const PluginHooks& hooks, std::uint32_t ordinal);

/// P's probe result: probed on the first call, then kept for the process's life, so that
/// probe, describe_device and create all see the same devices. Trivially destructible.
template <class P>
const gpuplug_probe_result_t& probed_once() noexcept {
  static const gpuplug_probe_result_t result = run_probe(&P::probe);
  return result;
}

// Plugin-level slots, run against one plugin's hooks; each catches everything (plugin_sdk.cpp).
gpuplug_status_t probe_with(const PluginHooks& hooks, gpuplug_probe_result_t* out) noexcept;
/// On failure `out->name` holds the reason (the rest of *out is zeroed): the ABI slot has no
/// error buffer, and the message must not be lost.
gpuplug_status_t describe_with(const PluginHooks& hooks, std::uint32_t ordinal,
                               gpuplug_device_info_t* out) noexcept;
gpuplug_status_t create_with(const PluginHooks& hooks, std::uint32_t ordinal,
                             const gpuplug_option_t* options, std::uint32_t option_count,
                             const gpuplug_host_services_t* services, gpuplug_instance_t* out,
                             char* error, std::size_t error_size) noexcept;
#if GPUPLUG_ABI_VERSION_MINOR >= 1
/// The inspect_module slot for a plugin whose hooks have one (inspect.cpp): checks `out` (null or
/// a struct_size below the 1.1 struct: INVALID_ARGUMENT, nothing written), the image (null,
/// empty: INVALID_IMAGE; larger than 4 GiB: INVALID_ARGUMENT) and the ordinal (require_device),
/// runs the hook and writes its answer; a failure's message goes to out->reason.
gpuplug_status_t inspect_with(const PluginHooks& hooks, std::uint32_t ordinal, const void* image,
                              std::uint64_t size, gpuplug_module_inspection_t* out) noexcept;
#endif
/// Whether P has an inspect_module hook with the SDK's signature.
template <class P>
inline constexpr bool has_inspect_hook =
    requires(std::uint32_t o, std::span<const std::byte> i, ModuleInspection& m) {
      P::inspect_module(o, i, m);
    };
/// P::inspect_module when P has one, else null. (make_table tests has_inspect_hook, not this
/// pointer: GCC does not fold a function address compared with null under -fsanitize=undefined.)
template <class P>
constexpr auto inspect_hook_of() noexcept
    -> void (*)(std::uint32_t, std::span<const std::byte>, ModuleInspection&) {
  if constexpr (has_inspect_hook<P>) {
    return &P::inspect_module;
  } else {
    return nullptr;
  }
}
/// `<folder of the plugin .so>/../kernels/<plugin_name>`, found with dladdr (options.cpp); empty
/// when the SDK cannot find its own file.
std::filesystem::path default_modules_dir(const char* plugin_name);
/// The folders of `modules_dirs` to search for `plugin_name`'s modules (options.cpp): F/<plugin>
/// for each folder F that has that subfolder (the layout: one folder serves every vendor), else
/// F itself (the flat layout, accepted for one release). `flat_warning` gets, once per process,
/// a warning naming the flat folders that hold files and the layout to use; else it is empty.
std::vector<std::filesystem::path> plugin_module_folders(
    const std::vector<std::filesystem::path>& modules_dirs, const std::string& plugin_name,
    std::string& flat_warning);
/// Fills every slot that takes an instance (no per-plugin state: the instance is a Device),
/// except the peer copy slots.
void fill_instance_slots(gpuplug_plugin_v1& table) noexcept;
/// Fills copy_peer_async, host_alloc_pinned and host_free_pinned (ABI 1.2; a no-op against an
/// older header): for a plugin that declares peer_copies (has_peer_copies).
void fill_peer_slots(gpuplug_plugin_v1& table) noexcept;
/// Whether P declares `static constexpr bool peer_copies = true;`.
template <class P>
inline constexpr bool has_peer_copies = requires { requires P::peer_copies; };
/// The tables a plugin hands out besides its own: for each older minor of its major, the view of
/// `full` that a host speaking that minor gets (docs/architecture.md, ABI-4): abi_version
/// 1.<minor>, struct_size that minor's table size, and every byte past it zero, so that nothing
/// past that table is there to be read even by a host that ignores struct_size. Against the 1.0
/// header there is none.
using TableViews = std::array<gpuplug_plugin_v1, GPUPLUG_ABI_VERSION_MINOR>;
TableViews make_table_views(const gpuplug_plugin_v1& full) noexcept;

/// The table to hand to a host speaking `host_abi_version` (ABI-4: the highest version both
/// share): the view of the host's minor when it is older than ours, else `full`. A host of
/// another major gets `full` too: it refuses a table whose major is not its own and names both
/// versions, which says more than a null table ("shares no ABI version") would.
const gpuplug_plugin_v1* negotiate(const gpuplug_plugin_v1& full, const TableViews& views,
                                   std::uint32_t host_abi_version) noexcept;

template <class P>
inline constexpr PluginHooks hooks_of{P::name,
                                      P::vendor,
                                      P::version,
                                      &P::probe,
                                      &P::describe_device,
                                      &P::create,
                                      std::span<const std::string_view>(P::extra_options),
                                      &probed_once<P>,
                                      inspect_hook_of<P>()};

template <class P>
gpuplug_plugin_v1 make_table() noexcept {
  gpuplug_plugin_v1 t{};
  t.struct_size = sizeof(gpuplug_plugin_v1);
  t.abi_version = GPUPLUG_ABI_VERSION;
  t.name = P::name;
  t.vendor = P::vendor;
  t.version = P::version;
  t.probe = [](gpuplug_probe_result_t* out) noexcept { return probe_with(hooks_of<P>, out); };
  t.describe_device = [](std::uint32_t ordinal, gpuplug_device_info_t* out) noexcept {
    return describe_with(hooks_of<P>, ordinal, out);
  };
  t.create = [](std::uint32_t ordinal, const gpuplug_option_t* options, std::uint32_t count,
                const gpuplug_host_services_t* services, gpuplug_instance_t* out, char* error,
                std::size_t error_size) noexcept {
    return create_with(hooks_of<P>, ordinal, options, count, services, out, error, error_size);
  };
  fill_instance_slots(t);
  if constexpr (has_peer_copies<P>) fill_peer_slots(t);
#if GPUPLUG_ABI_VERSION_MINOR >= 1
  if constexpr (has_inspect_hook<P>) {
    t.inspect_module = [](std::uint32_t ordinal, const void* image, std::uint64_t size,
                          gpuplug_module_inspection_t* out) noexcept {
      return inspect_with(hooks_of<P>, ordinal, image, size, out);
    };
  }
#endif
  return t;
}
}  // namespace detail

}  // namespace gpuplug::sdk

/// Exports gpuplug_plugin_entry for plugin description struct P (see the top of plugin_sdk.hpp).
/// The tables are function-local constants with trivial destructors: the full one, and the views
/// of it that hosts speaking older minors get (see negotiate).
#define GPUPLUG_DEFINE_PLUGIN(P)                                                                 \
  extern "C" GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(                \
      uint32_t host_abi_version) {                                                               \
    static const gpuplug_plugin_v1 table = ::gpuplug::sdk::detail::make_table<P>();              \
    static const ::gpuplug::sdk::detail::TableViews views =                                      \
        ::gpuplug::sdk::detail::make_table_views(table);                                         \
    return ::gpuplug::sdk::detail::negotiate(table, views, host_abi_version);                    \
  }
