// SPDX-License-Identifier: Apache-2.0
// What the core knows about a plugin's C table (core-private): the copy it keeps, the checks a
// table must pass, the optional slots and their defaults, and the C structs as C++ values.
#pragma once

#include <gpuplug/abi.h>

#include <cstddef>
#include <cstdint>
#include <gpuplug/log.hpp>
#include <gpuplug/registry.hpp>
#include <gpuplug/types.hpp>
#include <optional>
#include <string>

namespace gpuplug::detail {

/// "1.0": an ABI version as messages name it.
std::string abi_version_text(std::uint32_t version);

/// How many bytes of a published table the core reads (docs/architecture.md, ABI-3): the
/// smallest of its struct_size, sizeof(gpuplug_plugin_v1) (a later minor's table is accepted and
/// only the prefix this core knows is used) and, for a table that declares ABI 1.0,
/// GPUPLUG_PLUGIN_V1_0_SIZE (its struct_size is not trusted to cover slots 1.0 did not have).
std::size_t known_table_size(const gpuplug_plugin_v1& published) noexcept;

/// The plugin table as the core uses it: a copy of the first known_table_size() bytes the plugin
/// published (the host never reads past them), with every byte beyond left zero, so that every
/// slot the table does not cover reads as null and gets its default (ABI-2).
/// Precondition for a PluginBackend: the table passed the checks below.
gpuplug_plugin_v1 copy_table(const gpuplug_plugin_v1& published) noexcept;

/// Why a plugin cannot be used: the reason the registry reports, and the message that says why.
struct Refusal {
  PluginReason reason;
  std::string message;
};

/// Checks the header of a published table: the major version (abi_mismatch), then the size
/// (table_too_small). These are the only fields read before the major version is known.
std::optional<Refusal> check_header(const gpuplug_plugin_v1& published);

/// ABI-4 on the answer to the entry point: the table `published`, returned for the host version
/// `asked`, must declare `asked` or a lower minor of the same major. A later minor is refused
/// (abi_mismatch) naming both versions and the rule: a plugin that answers more than it was asked
/// for promises slots and struct fields the host never agreed to. Call after check_header (which
/// refuses another major first, ABI-5). Tables given to create_backend_from_table answered no
/// request, so only the loader calls this.
std::optional<Refusal> check_answer(const gpuplug_plugin_v1& published, std::uint32_t asked);

/// Checks what v1 requires of a copied table: a name of [a-z0-9_]+ (`check_name`) and every
/// required slot set (`check_required_slots`, naming the first null one). A table that breaks
/// them is an ABI violation (abi_mismatch), whatever its version says.
std::optional<Refusal> check_name(const gpuplug_plugin_v1& table);
std::optional<Refusal> check_required_slots(const gpuplug_plugin_v1& table);

class PluginBackend;

/// The optional slots of abi.h, resolved once at construction: either a thunk into the plugin's
/// slot or the default abi.h states. This is the one place where optional slots are null-checked.
struct OptionalSlots {
  gpuplug_status_t (*alloc_managed)(const PluginBackend&, std::uint64_t, const char*,
                                    std::uint64_t*);
  gpuplug_status_t (*copy_h2d_async)(const PluginBackend&, std::uint64_t, const void*,
                                     std::uint64_t, std::uint64_t);
  gpuplug_status_t (*copy_d2h_async)(const PluginBackend&, void*, std::uint64_t, std::uint64_t,
                                     std::uint64_t);
  gpuplug_status_t (*copy_d2d_async)(const PluginBackend&, std::uint64_t, std::uint64_t,
                                     std::uint64_t, std::uint64_t);
  gpuplug_status_t (*unload_module)(const PluginBackend&, const char*);
  /// nullptr: the plugin has no per-site report (alloc_report then summarises ledger_stats).
  std::size_t (*ledger_report)(const PluginBackend&, std::uint32_t, char*, std::size_t);
  /// (name, path): the plugin's slot when its struct_size covers it and it is set; else the core
  /// reads the file (Error(invalid_argument) naming module, file and reason when it cannot) and
  /// calls load_module with the bytes.
  gpuplug_status_t (*load_module_file)(const PluginBackend&, const char*, const char*);

  // ABI 1.1 events. A plugin without them (a 1.0 plugin: copy_table zeroed them) gets defaults
  // that throw Error(unsupported) "events are not supported by the <plugin> plugin (ABI 1.0 ...)"
  // naming the operation.
  gpuplug_status_t (*event_create)(const PluginBackend&, std::uint64_t*);
  gpuplug_status_t (*event_destroy)(const PluginBackend&, std::uint64_t);
  gpuplug_status_t (*event_record)(const PluginBackend&, std::uint64_t, std::uint64_t);
  gpuplug_status_t (*stream_wait_event)(const PluginBackend&, std::uint64_t, std::uint64_t);
  gpuplug_status_t (*event_synchronize)(const PluginBackend&, std::uint64_t);
  gpuplug_status_t (*event_query)(const PluginBackend&, std::uint64_t, std::int32_t*);
  gpuplug_status_t (*event_elapsed_ms)(const PluginBackend&, std::uint64_t, std::uint64_t, float*);

  // ABI 1.2 memory slots. nullptr ledger_snapshot: the plugin predates it (memory_snapshot is
  // then partial, from ledger_stats). The others default to Error(unsupported) naming the ABI.
  std::size_t (*ledger_snapshot)(const PluginBackend&, char*, std::size_t);
  gpuplug_status_t (*ledger_reset_peak)(const PluginBackend&);
  gpuplug_status_t (*ledger_scope_begin)(const PluginBackend&, std::uint64_t*);
  gpuplug_status_t (*ledger_scope_end)(const PluginBackend&, std::uint64_t, std::uint64_t*,
                                       std::int64_t*);

  // ABI 1.2 interop handles. A plugin without one gets a default that throws Error(unsupported)
  // naming the operation and the plugin.
  gpuplug_status_t (*native_handles)(const PluginBackend&, std::uint64_t,
                                     gpuplug_native_handles_t*);
  gpuplug_status_t (*native_pointer)(const PluginBackend&, std::uint64_t, void**);
  gpuplug_status_t (*import_memory)(const PluginBackend&, void*, std::uint64_t, const char*,
                                    std::uint64_t*);
  gpuplug_status_t (*import_stream)(const PluginBackend&, void*, std::uint64_t*);
};

/// Thunks for the slots `table` fills, the defaults of abi.h for those it leaves null.
OptionalSlots resolve_optional_slots(const gpuplug_plugin_v1& table) noexcept;

/// The C device description as the C++ API reports it (fixed-size strings read up to their NUL).
DeviceInfo to_device_info(const gpuplug_device_info_t& raw);

/// The C ledger counters as the C++ API reports them.
LedgerStats to_ledger_stats(const gpuplug_ledger_stats_t& raw) noexcept;

/// A plugin's log level as a gpuplug LogLevel (out-of-range values clamp to trace or error).
LogLevel to_log_level(gpuplug_log_level_t level) noexcept;

}  // namespace gpuplug::detail
