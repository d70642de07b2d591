// SPDX-License-Identifier: Apache-2.0
// The instance slots of gpuplug_plugin_v1 that layers see (core-private), as the stack's
// forwarders and the built-in layers name and compare them.
#pragma once

#include <gpuplug/abi.h>
#include <gpuplug/support/abi_slots.hpp>

#include <cstddef>
#include <type_traits>

// GPUPLUG_LAYERED_SLOTS(X): every instance slot but destroy, in table order, derived from the
// one slot list (abi_slots.hpp), whose static_asserts fail when abi.h gains a slot without a row.

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
