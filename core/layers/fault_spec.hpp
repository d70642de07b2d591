// SPDX-License-Identifier: Apache-2.0
// The `faults` layer's spec (core-private): which calls of which operation fail, with what status
// and when. docs/layers.md ("faults") has the grammar.
#pragma once

#include <gpuplug/abi.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "layers/slots.hpp"

namespace gpuplug::detail::layers {

/// The number of GPUPLUG_LAYERED_SLOTS: the size of a per-slot table.
inline constexpr std::size_t fault_slot_count = [] {
  std::size_t n = 0;
#define GPUPLUG_COUNT_SLOT(slot) ++n;
  GPUPLUG_LAYERED_SLOTS(GPUPLUG_COUNT_SLOT)
#undef GPUPLUG_COUNT_SLOT
  return n;
}();

/// Slot's position in GPUPLUG_LAYERED_SLOTS: the index FaultRule::slot and the layer's counters
/// use. fault_slot_count for a slot that is not layered.
template <auto Slot>
constexpr std::size_t fault_slot_index() noexcept {
  std::size_t i = 0, found = fault_slot_count;
#define GPUPLUG_SLOT_INDEX(slot)                            \
  if (same_slot<Slot, &gpuplug_plugin_v1::slot>) found = i; \
  ++i;
  GPUPLUG_LAYERED_SLOTS(GPUPLUG_SLOT_INDEX)
#undef GPUPLUG_SLOT_INDEX
  return found;
}

/// Which calls of an operation a rule fails. Calls are numbered from 1 per operation and backend.
struct FaultTrigger {
  enum class Kind { nth, every, probability };
  Kind kind = Kind::nth;
  std::uint64_t n = 0;     // nth: the call number; every: the period (calls n, 2n, 3n, ...)
  double probability = 0;  // probability: the chance of each call, in [0, 1]
  std::uint64_t seed = 0;  // probability: the seed of the draws
  /// Whether call `call` of slot `slot` fails. Deterministic: a probability draw depends on
  /// (seed, slot, call) only, so a run fails the same calls whatever the threads' timing.
  bool fires(std::size_t slot, std::uint64_t call) const noexcept;
};

/// One `op@when=status[:mode]` of the spec.
struct FaultRule {
  std::string text;                     // the rule as written, trimmed: for messages
  std::size_t slot = fault_slot_count;  // fault_slot_index of the operation
  FaultTrigger trigger;
  gpuplug_status_t status = GPUPLUG_STATUS_INTERNAL;
  bool after = false;  // call the level below first, then report the failure (undoing what it made)
};

/// The abi.h name of each layered slot, by fault_slot_index ("alloc", "copy_d2h", ...).
std::span<const std::string_view> fault_slot_names() noexcept;

/// Parses a spec: rules `op@when=status[:mode]` separated by ';' (blank rules are skipped).
///   op      an abi.h slot that returns a status ("alloc", "copy_d2h", "load_module", ...), or the
///           GpuBackend name of one where it differs ("memset", "kernel", "create_stream", ...);
///   when    N (the Nth call), every:N (calls N, 2N, ...), or p:P[,seed:S] (each call with
///           probability P in [0, 1], draws seeded by S, default 0);
///   status  a Status name other than success ("out_of_memory", "launch_failed", ...);
///   mode    before (the default: the level below is not called) or after (it is called, then
///           the failure is reported and what the call made is undone). `after` is refused for
///           operations that release something (free, stream_destroy, event_destroy,
///           unload_module, sweep_unreleased): their effect cannot be undone.
/// Throws std::invalid_argument "faults='<spec>': <the bad part>: <why>".
std::vector<FaultRule> parse_fault_spec(std::string_view spec);

}  // namespace gpuplug::detail::layers
