// SPDX-License-Identifier: Apache-2.0
// The instance slots of gpuplug_plugin_v1 that layers see (core-private), listed once for the
// stack's forwarders and the built-in layers.
#pragma once

#include <gpuplug/abi.h>

#include <cstddef>
#include <type_traits>

// Every instance slot but destroy (which a layer must set itself), in table order. A slot
// appended to abi.h is added here: the static_assert below fails until it is.
#define GPUPLUG_LAYERED_SLOTS(X)                                                              \
  X(last_error) X(alloc) X(alloc_managed) X(free) X(memory_info) X(device_info) X(copy_h2d)   \
  X(copy_d2h) X(copy_d2d) X(copy_h2d_async) X(copy_d2h_async) X(copy_d2d_async) X(memset_d8)  \
  X(stream_create) X(stream_destroy) X(stream_synchronize) X(synchronize) X(load_module)      \
  X(unload_module) X(has_module) X(get_function) X(get_global) X(launch) X(ledger_stats)      \
  X(ledger_report) X(sweep_unreleased) X(load_module_file) X(event_create) X(event_destroy)   \
  X(event_record) X(stream_wait_event) X(event_synchronize) X(event_query) X(event_elapsed_ms)   \
  X(ledger_snapshot) X(ledger_reset_peak) X(ledger_scope_begin) X(ledger_scope_end)         \
  X(native_handles) X(native_pointer) X(import_memory) X(import_stream)

// inspect_module (ABI 1.1), between them, is plugin-level: the plugin's own, never layered.
static_assert(offsetof(gpuplug_plugin_v1, event_elapsed_ms) + sizeof(void*) ==
                      offsetof(gpuplug_plugin_v1, inspect_module) &&
                  offsetof(gpuplug_plugin_v1, inspect_module) + sizeof(void*) ==
                      offsetof(gpuplug_plugin_v1, ledger_snapshot) &&
                  sizeof(gpuplug_plugin_v1) == GPUPLUG_PLUGIN_V1_2_SIZE,
              "a slot was appended to gpuplug_plugin_v1: add it to GPUPLUG_LAYERED_SLOTS (an "
              "instance slot) or to the plugin-level slots stack_table copies");

namespace gpuplug::detail {

/// True when the slots A and B are the same member of gpuplug_plugin_v1. Slots of different
/// types cannot be compared with ==, so `if constexpr (same_slot<Slot, &gpuplug_plugin_v1::launch>)`
/// is how a layer picks out one slot.
template <auto A, auto B>
constexpr bool same_slot_f() noexcept {
  if constexpr (std::is_same_v<decltype(A), decltype(B)>) {
    return A == B;
  } else {
    return false;
  }
}
template <auto A, auto B>
inline constexpr bool same_slot = same_slot_f<A, B>();

/// The slot's name as abi.h spells it ("copy_d2h"): what the layers print and the fault spec names.
template <auto Slot>
constexpr const char* slot_name() noexcept {
#define GPUPLUG_SLOT_NAME(slot) \
  if constexpr (same_slot<Slot, &gpuplug_plugin_v1::slot>) return #slot; else
  GPUPLUG_LAYERED_SLOTS(GPUPLUG_SLOT_NAME)
#undef GPUPLUG_SLOT_NAME
  return "destroy";
}

}  // namespace gpuplug::detail
