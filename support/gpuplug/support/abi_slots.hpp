// SPDX-License-Identifier: Apache-2.0
// The slots of gpuplug_plugin_v1 written once, as data (private): the rows of abi_slot_rows.h as
// a constexpr table. The core's required-slot check, optional-slot resolution and per-minor table
// sizes, the SDK's fill and per-minor views, the layers' forwarders, the skew cases and the slot
// table of docs/plugin-authors.md all come from it.
#pragma once

#include <gpuplug/abi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <gpuplug/support/abi_slot_rows.h>

// The instance slots a layer sees, every one but destroy (which a layer sets itself), in table
// order, as X(name).
#define GPUPLUG_DETAIL_LAYERED_ROW(X, name, minor, side, group, rule, absent) \
  GPUPLUG_DETAIL_LAYERED_##side(X, name)
#define GPUPLUG_DETAIL_LAYERED_plugin(X, name)
#define GPUPLUG_DETAIL_LAYERED_lifetime(X, name)
#define GPUPLUG_DETAIL_LAYERED_instance(X, name) X(name)
#define GPUPLUG_LAYERED_SLOTS(X) GPUPLUG_ABI_SLOTS(GPUPLUG_DETAIL_LAYERED_ROW, X)

namespace gpuplug::abi {

enum class SlotSide { plugin, lifetime, instance };
enum class SlotRule { required, optional, together };
enum class SlotGroup {
  device,
  lifetime,
  memory,
  copies,
  streams,
  modules,
  launch,
  ledger,
  events,
  inspect,
  snapshot,
  scopes,
  interop,
  peer,
  pinned,
  pitched,
  mapped,
  graphs,
  arena,
};

/// One row of GPUPLUG_ABI_SLOTS, with the slot's place in the table.
struct SlotInfo {
  std::string_view name;
  std::size_t offset;  // offsetof(gpuplug_plugin_v1, name)
  std::uint32_t minor;
  SlotSide side;
  SlotGroup group;
  SlotRule rule;
  std::string_view when_absent;

  /// A table whose struct_size reaches this covers the slot.
  constexpr std::size_t end() const noexcept { return offset + sizeof(void*); }
};

#define GPUPLUG_DETAIL_SLOT_INFO(P, name_, minor_, side_, group_, rule_, absent_)               \
  SlotInfo{#name_,          offsetof(gpuplug_plugin_v1, name_), minor_, SlotSide::side_,        \
           SlotGroup::group_, SlotRule::rule_,                    absent_},
/// Every slot of the abi.h in use, in table order.
inline constexpr std::array slots{GPUPLUG_ABI_SLOTS(GPUPLUG_DETAIL_SLOT_INFO, ~)};
#undef GPUPLUG_DETAIL_SLOT_INFO

/// The minor of the abi.h in use: the newest table this build knows.
inline constexpr std::uint32_t known_minor = GPUPLUG_ABI_VERSION_MINOR;

/// The size of the table of ABI 1.<minor>: where its last slot ends. A minor above known_minor
/// gets the known table's size (the most this build can read).
constexpr std::size_t table_size_of_minor(std::uint32_t minor) noexcept {
  std::size_t size = 0;
  for (const SlotInfo& s : slots) {
    if (s.minor <= minor) size = s.end();
  }
  return size;
}

/// The smallest table a v1 host accepts: where the last required slot ends.
constexpr std::size_t required_table_size() noexcept {
  std::size_t size = 0;
  for (const SlotInfo& s : slots) {
    if (s.rule == SlotRule::required) size = s.end();
  }
  return size;
}

/// The row of slot `name`, or null.
constexpr const SlotInfo* find_slot(std::string_view name) noexcept {
  for (const SlotInfo& s : slots) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

constexpr std::string_view side_name(SlotSide side) noexcept {
  switch (side) {
    case SlotSide::plugin: return "plugin";
    case SlotSide::lifetime: return "lifetime";
    case SlotSide::instance: return "instance";
  }
  return "?";
}

constexpr std::string_view rule_name(SlotRule rule) noexcept {
  switch (rule) {
    case SlotRule::required: return "required";
    case SlotRule::optional: return "optional";
    case SlotRule::together: return "optional, all of its group or none";
  }
  return "?";
}

constexpr std::string_view group_name(SlotGroup group) noexcept {
  switch (group) {
    case SlotGroup::device: return "device";
    case SlotGroup::lifetime: return "lifetime";
    case SlotGroup::memory: return "memory";
    case SlotGroup::copies: return "copies";
    case SlotGroup::streams: return "streams";
    case SlotGroup::modules: return "modules";
    case SlotGroup::launch: return "launch";
    case SlotGroup::ledger: return "ledger";
    case SlotGroup::events: return "events";
    case SlotGroup::inspect: return "inspect";
    case SlotGroup::snapshot: return "snapshot";
    case SlotGroup::scopes: return "scopes";
    case SlotGroup::interop: return "interop";
    case SlotGroup::peer: return "peer";
    case SlotGroup::pinned: return "pinned";
    case SlotGroup::pitched: return "pitched";
    case SlotGroup::mapped: return "mapped";
    case SlotGroup::graphs: return "graphs";
    case SlotGroup::arena: return "arena";
  }
  return "?";
}

namespace detail {

/// The rows form the table: they start at the first slot after the identity fields, each begins
/// where the one before ends, minors never go down, the first slot of each minor is optional
/// (ABI-2: a slot appended after the first release is optional), and the last row ends where the
/// struct does. A member added to gpuplug_plugin_v1 without a row breaks one of these.
constexpr bool rows_cover_the_table() noexcept {
  std::size_t at = offsetof(gpuplug_plugin_v1, probe);
  std::uint32_t minor = 0;
  for (const SlotInfo& s : slots) {
    if (s.offset != at || s.minor < minor) return false;
    if (s.minor > 0 && s.rule == SlotRule::required) return false;
    at = s.end();
    minor = s.minor;
  }
  return at == sizeof(gpuplug_plugin_v1) && minor == known_minor;
}

}  // namespace detail

static_assert(detail::rows_cover_the_table(),
              "gpuplug_plugin_v1 and GPUPLUG_ABI_SLOTS disagree: every slot of abi.h needs one row "
              "(support/gpuplug/support/abi_slots.hpp), in table order, with the minor it first "
              "appeared in; slots appended after 1.0 are optional");
static_assert(required_table_size() == GPUPLUG_PLUGIN_V1_MIN_SIZE,
              "GPUPLUG_PLUGIN_V1_MIN_SIZE must end at the last required slot");
// The frozen 1.1 header (tests/abi/v1_1) counts load_module_file into its 1.0 size; from 1.2 on
// the 1.0 table is what shipped at 1.0.
#if defined(GPUPLUG_PLUGIN_V1_0_SIZE) && GPUPLUG_ABI_VERSION_MINOR >= 2
static_assert(table_size_of_minor(0) == GPUPLUG_PLUGIN_V1_0_SIZE,
              "GPUPLUG_PLUGIN_V1_0_SIZE must end at the last slot of minor 0");
#endif
#ifdef GPUPLUG_PLUGIN_V1_1_SIZE
static_assert(table_size_of_minor(1) == GPUPLUG_PLUGIN_V1_1_SIZE,
              "GPUPLUG_PLUGIN_V1_1_SIZE must end at the last slot of minor 1");
#endif
#ifdef GPUPLUG_PLUGIN_V1_2_SIZE
static_assert(table_size_of_minor(2) == GPUPLUG_PLUGIN_V1_2_SIZE,
              "GPUPLUG_PLUGIN_V1_2_SIZE must end at the last slot of minor 2");
#endif
#ifdef GPUPLUG_PLUGIN_V1_3_SIZE
static_assert(table_size_of_minor(3) == GPUPLUG_PLUGIN_V1_3_SIZE,
              "GPUPLUG_PLUGIN_V1_3_SIZE must end at the last slot of minor 3");
#endif

}  // namespace gpuplug::abi
