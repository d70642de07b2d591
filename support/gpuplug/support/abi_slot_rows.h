/* SPDX-License-Identifier: Apache-2.0
 * The rows of the one slot list of gpuplug_plugin_v1 (private; C and C++): abi_slots.hpp makes
 * them data, and every list of slots in the core, the SDK, the layers and the tests expands them. */
#ifndef GPUPLUG_SUPPORT_ABI_SLOT_ROWS_H
#define GPUPLUG_SUPPORT_ABI_SLOT_ROWS_H

#include <gpuplug/abi.h>

// One row per slot, in table order:
//   X(P, name, minor, side, group, rule, when_absent)
//   name         the member of gpuplug_plugin_v1
//   minor        the ABI 1.x minor whose table first has it (a table of an older minor ends before it)
//   side         plugin: called without an instance (plugin-level, never layered);
//                lifetime: destroy (each layer sets its own); instance: every other slot
//   group        what the slot belongs to; a `together` slot is present only when its whole group is
//   rule         required: a table without it is refused (abi_mismatch);
//                optional: may be null on its own;
//                together: present only when every slot of its group is set, absent otherwise
//   when_absent  what the core does for a null (or uncovered) slot, as docs/plugin-authors.md says
// P is passed through untouched, for expansions that forward to a macro of their own.
//
// The rows are cut by minor with #if, so that the SDK compiled against a frozen older abi.h
// (tests/abi/v1_0, v1_1, v1_2) expands only the slots its header has. Appending a slot to abi.h without
// a row here fails the static_asserts of abi_slots.hpp, which every part of the build includes.
#define GPUPLUG_ABI_SLOTS_1_0(X, P)                                                                \
  X(P, probe, 0, plugin, device, required, "")                                                     \
  X(P, describe_device, 0, plugin, device, required, "")                                           \
  X(P, create, 0, plugin, lifetime, required, "")                                                  \
  X(P, destroy, 0, lifetime, lifetime, required, "")                                               \
  X(P, last_error, 0, instance, lifetime, required, "")                                            \
  X(P, alloc, 0, instance, memory, required, "")                                                   \
  X(P, alloc_managed, 0, instance, memory, optional, "UNSUPPORTED")                                \
  X(P, free, 0, instance, memory, required, "")                                                    \
  X(P, memory_info, 0, instance, memory, required, "")                                             \
  X(P, device_info, 0, instance, device, required, "")                                             \
  X(P, copy_h2d, 0, instance, copies, required, "")                                                \
  X(P, copy_d2h, 0, instance, copies, required, "")                                                \
  X(P, copy_d2d, 0, instance, copies, required, "")                                                \
  X(P, copy_h2d_async, 0, instance, copies, optional,                                              \
    "the core synchronizes the stream, then copies synchronously")                                 \
  X(P, copy_d2h_async, 0, instance, copies, optional,                                              \
    "the core synchronizes the stream, then copies synchronously")                                 \
  X(P, copy_d2d_async, 0, instance, copies, optional,                                              \
    "the core synchronizes the stream, then copies synchronously")                                 \
  X(P, memset_d8, 0, instance, copies, required, "")                                               \
  X(P, stream_create, 0, instance, streams, required, "")                                          \
  X(P, stream_destroy, 0, instance, streams, required, "")                                         \
  X(P, stream_synchronize, 0, instance, streams, required, "")                                     \
  X(P, synchronize, 0, instance, streams, required, "")                                            \
  X(P, load_module, 0, instance, modules, required, "")                                            \
  X(P, unload_module, 0, instance, modules, optional, "UNSUPPORTED")                               \
  X(P, has_module, 0, instance, modules, required, "")                                             \
  X(P, get_function, 0, instance, modules, required, "")                                           \
  X(P, get_global, 0, instance, modules, required, "")                                             \
  X(P, launch, 0, instance, launch, required, "")                                                  \
  X(P, ledger_stats, 0, instance, ledger, required, "")                                            \
  X(P, ledger_report, 0, instance, ledger, optional,                                               \
    "the core summarises ledger_stats (no call sites)")                                            \
  X(P, sweep_unreleased, 0, instance, ledger, required, "")

#if GPUPLUG_ABI_VERSION_MINOR >= 1
#define GPUPLUG_ABI_SLOTS_1_1(X, P)                                                                \
  X(P, load_module_file, 1, instance, modules, optional,                                           \
    "the core reads the file and calls load_module (the module has no $ORIGIN)")                   \
  X(P, event_create, 1, instance, events, together, "UNSUPPORTED")                                 \
  X(P, event_destroy, 1, instance, events, together, "UNSUPPORTED")                                \
  X(P, event_record, 1, instance, events, together, "UNSUPPORTED")                                 \
  X(P, stream_wait_event, 1, instance, events, together, "UNSUPPORTED")                            \
  X(P, event_synchronize, 1, instance, events, together, "UNSUPPORTED")                            \
  X(P, event_query, 1, instance, events, together, "UNSUPPORTED")                                  \
  X(P, event_elapsed_ms, 1, instance, events, together, "UNSUPPORTED")                             \
  X(P, inspect_module, 1, plugin, inspect, optional, "UNSUPPORTED")
#else
#define GPUPLUG_ABI_SLOTS_1_1(X, P)
#endif

#if GPUPLUG_ABI_VERSION_MINOR >= 2
#define GPUPLUG_ABI_SLOTS_1_2(X, P)                                                                \
  X(P, ledger_snapshot, 2, instance, snapshot, optional,                                           \
    "the core builds a partial snapshot from ledger_stats")                                        \
  X(P, ledger_reset_peak, 2, instance, snapshot, optional, "UNSUPPORTED")                          \
  X(P, ledger_scope_begin, 2, instance, scopes, together, "UNSUPPORTED")                           \
  X(P, ledger_scope_end, 2, instance, scopes, together, "UNSUPPORTED")                             \
  X(P, native_handles, 2, instance, interop, optional, "UNSUPPORTED")                              \
  X(P, native_pointer, 2, instance, interop, optional, "UNSUPPORTED")                              \
  X(P, import_memory, 2, instance, interop, optional, "UNSUPPORTED")                               \
  X(P, import_stream, 2, instance, interop, optional, "UNSUPPORTED")                               \
  X(P, copy_peer_async, 2, instance, peer, optional, "the core stages the copy through host memory") \
  X(P, host_alloc_pinned, 2, instance, pinned, together,                                           \
    "the core stages peer copies through pageable memory")                                         \
  X(P, host_free_pinned, 2, instance, pinned, together,                                            \
    "the core stages peer copies through pageable memory")
#else
#define GPUPLUG_ABI_SLOTS_1_2(X, P)
#endif

#if GPUPLUG_ABI_VERSION_MINOR >= 3
#define GPUPLUG_ABI_SLOTS_1_3(X, P)                                                                \
  X(P, copy_h2d_async_retained, 3, instance, copies, optional,                                     \
    "copy_h2d_async, which stages the source")                                                     \
  X(P, copy_h2d_2d_async, 3, instance, pitched, optional,                                         \
    "the core issues one copy_h2d_async per row")                                                  \
  X(P, copy_d2h_2d_async, 3, instance, pitched, optional,                                         \
    "the core issues one copy_d2h_async per row")                                                  \
  X(P, copy_d2d_2d_async, 3, instance, pitched, optional,                                         \
    "the core issues one copy_d2d_async per row")                                                  \
  X(P, alloc_host_mapped, 3, instance, mapped, together, "UNSUPPORTED")                            \
  X(P, free_host_mapped, 3, instance, mapped, together, "UNSUPPORTED")                             \
  X(P, host_ptr_to_device, 3, instance, mapped, together, "UNSUPPORTED")                           \
  X(P, host_address, 3, instance, memory, optional,                                                \
    "the core returns the pointer itself for managed memory (the ledger snapshot says which)") \
  X(P, stream_begin_capture, 3, instance, graphs, together, "UNSUPPORTED")                         \
  X(P, stream_end_capture, 3, instance, graphs, together, "UNSUPPORTED")                           \
  X(P, graph_launch, 3, instance, graphs, together, "UNSUPPORTED")                                 \
  X(P, graph_destroy, 3, instance, graphs, together, "UNSUPPORTED")                                \
  X(P, stream_abort_capture, 3, instance, graphs, together, "a no-op (nothing captures)")          \
  X(P, stream_is_capturing, 3, instance, graphs, together, "false (nothing captures)")          \
  X(P, stream_create_with_flags, 3, instance, streams, optional,                                   \
    "stream_create: a blocking stream, which orders more than it must")                           \
  X(P, alloc_arena, 3, instance, arena, together, "UNSUPPORTED")                                   \
  X(P, free_arena, 3, instance, arena, together, "UNSUPPORTED")
#else
#define GPUPLUG_ABI_SLOTS_1_3(X, P)
#endif

/// Every slot the abi.h in use has, in table order.
#define GPUPLUG_ABI_SLOTS(X, P)                                                     \
  GPUPLUG_ABI_SLOTS_1_0(X, P) GPUPLUG_ABI_SLOTS_1_1(X, P) GPUPLUG_ABI_SLOTS_1_2(X, P) \
  GPUPLUG_ABI_SLOTS_1_3(X, P)

#endif /* GPUPLUG_SUPPORT_ABI_SLOT_ROWS_H */
