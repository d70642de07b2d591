// SPDX-License-Identifier: Apache-2.0
// What the core knows about a plugin's C table (core-private): the copy it keeps, the checks a
// table must pass, the optional slots and their defaults, and the C structs as C++ values.
#pragma once

#include <gpuplug/abi.h>
#include <gpuplug/support/abi_slots.hpp>

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
/// only the prefix this core knows is used) and, for a table that declares an older minor of
/// ABI 1, that minor's table size (its struct_size is not trusted to cover slots it did not have).
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

/// The type of the core's thunk for an instance slot of type `F`: the slot's own signature with
/// the PluginBackend in place of the instance.
template <class F>
struct SlotThunk;
template <class R, class... A>
struct SlotThunk<R (*)(gpuplug_instance_t, A...)> {
  using type = R (*)(const PluginBackend&, A...);
};

/// Every optional instance slot of abi.h (the rows of GPUPLUG_ABI_SLOTS that are not required),
/// resolved once at construction: a thunk into the plugin's slot when the table has it (for a
/// `together` slot: when it has its whole group), else the default abi.h states (the core's
/// default_<slot> in plugin_table.cpp). A null member means the caller takes another path
/// (ledger_report: alloc_report summarises ledger_stats; ledger_snapshot: a partial snapshot;
/// copy_peer_async and the pinned pair: copy_peer stages through host memory; the pitched 2D
/// copies: one 1D async copy per row; host_address: the ledger snapshot says whether the pointer
/// is managed memory). This is the one
/// place where optional slots are null-checked.
struct OptionalSlots {
#define GPUPLUG_OPTIONAL_MEMBER(P, name, minor, side, group, rule, absent) \
  GPUPLUG_OPTIONAL_MEMBER_##side##_##rule(name)
#define GPUPLUG_OPTIONAL_MEMBER_plugin_required(name)
#define GPUPLUG_OPTIONAL_MEMBER_plugin_optional(name)
#define GPUPLUG_OPTIONAL_MEMBER_lifetime_required(name)
#define GPUPLUG_OPTIONAL_MEMBER_instance_required(name)
#define GPUPLUG_OPTIONAL_MEMBER_instance_optional(name) \
  typename SlotThunk<decltype(gpuplug_plugin_v1::name)>::type name;
#define GPUPLUG_OPTIONAL_MEMBER_instance_together(name) \
  GPUPLUG_OPTIONAL_MEMBER_instance_optional(name)
  GPUPLUG_ABI_SLOTS(GPUPLUG_OPTIONAL_MEMBER, ~)
};

/// Thunks for the slots `table` fills, the defaults of abi.h for those it leaves null.
/// `plugin_abi_version` is what the plugin itself declared (`table` may be a layer's, which
/// declares this core's version): a plugin older than ABI 1.3 does not stage copy_h2d_async's
/// source, so its copy_h2d_async is followed by a synchronize of the stream, and
/// copy_h2d_async_retained is its copy_h2d_async as it is.
OptionalSlots resolve_optional_slots(const gpuplug_plugin_v1& table,
                                     std::uint32_t plugin_abi_version) noexcept;

/// The C device description as the C++ API reports it (fixed-size strings read up to their NUL).
DeviceInfo to_device_info(const gpuplug_device_info_t& raw);

/// The C ledger counters as the C++ API reports them.
LedgerStats to_ledger_stats(const gpuplug_ledger_stats_t& raw) noexcept;

/// A plugin's log level as a gpuplug LogLevel (out-of-range values clamp to trace or error).
LogLevel to_log_level(gpuplug_log_level_t level) noexcept;

}  // namespace gpuplug::detail
