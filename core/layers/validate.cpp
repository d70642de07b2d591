// SPDX-License-Identifier: Apache-2.0
// The validate layer's table: each checked slot as a call of ValidateLayer (validate_layer.hpp),
// and the layer's description.
#include "layers/validate.hpp"

#include <gpuplug/support/failures.hpp>
#include <new>

#include "layers/validate_layer.hpp"

namespace gpuplug::detail {

namespace {

using validate::ValidateLayer;
using layers::LayerBase;

/// A slot of the table as a call of ValidateLayer::*Member. No exception crosses the C table: the
/// record's allocations can throw bad_alloc (OUT_OF_MEMORY), anything else is INTERNAL.
template <auto Member>
struct Thunk;
template <class... A, gpuplug_status_t (ValidateLayer::*Member)(A...)>
struct Thunk<Member> {
  static gpuplug_status_t call(gpuplug_instance_t inst, A... args) noexcept {
    ValidateLayer& self = LayerBase::from<ValidateLayer>(inst);
    try {
      return (self.*Member)(args...);
    } catch (const std::bad_alloc&) {
      return self.fail(GPUPLUG_STATUS_OUT_OF_MEMORY, "validate: out of memory for its record");
    } catch (...) {
      return self.fail(GPUPLUG_STATUS_INTERNAL,
                       "validate: " + support::describe_current_exception());
    }
  }
};

/// ledger_snapshot returns a length, 0 for a failure: no exception crosses the C table either.
std::size_t ledger_snapshot_thunk(gpuplug_instance_t inst, char* buf, std::size_t size) noexcept {
  try {
    return LayerBase::from<ValidateLayer>(inst).ledger_snapshot(buf, size);
  } catch (...) {
    return 0;
  }
}

gpuplug_plugin_v1 make_table() noexcept {
  gpuplug_plugin_v1 t{};
  t.struct_size = sizeof t;
  t.abi_version = GPUPLUG_ABI_VERSION;
  t.destroy = &layers::destroy_layer<ValidateLayer>;
#define GPUPLUG_VALIDATE_SLOT(slot) t.slot = &Thunk<&ValidateLayer::slot>::call;
  GPUPLUG_VALIDATE_SLOT(alloc)
  GPUPLUG_VALIDATE_SLOT(alloc_managed)
  GPUPLUG_VALIDATE_SLOT(free)
  GPUPLUG_VALIDATE_SLOT(copy_h2d)
  GPUPLUG_VALIDATE_SLOT(copy_d2h)
  GPUPLUG_VALIDATE_SLOT(copy_d2d)
  t.copy_h2d_async = &Thunk<&ValidateLayer::copy_h2d_queued<&gpuplug_plugin_v1::copy_h2d_async>>::call;
#if GPUPLUG_ABI_VERSION_MINOR >= 3
  t.copy_h2d_async_retained =
      &Thunk<&ValidateLayer::copy_h2d_queued<&gpuplug_plugin_v1::copy_h2d_async_retained>>::call;
#endif
  GPUPLUG_VALIDATE_SLOT(copy_d2h_async)
  GPUPLUG_VALIDATE_SLOT(copy_d2d_async)
  GPUPLUG_VALIDATE_SLOT(memset_d8)
  GPUPLUG_VALIDATE_SLOT(copy_peer_async)
  GPUPLUG_VALIDATE_SLOT(copy_h2d_2d_async)
  GPUPLUG_VALIDATE_SLOT(copy_d2h_2d_async)
  GPUPLUG_VALIDATE_SLOT(copy_d2d_2d_async)
  GPUPLUG_VALIDATE_SLOT(sweep_unreleased)
  GPUPLUG_VALIDATE_SLOT(stream_create)
  GPUPLUG_VALIDATE_SLOT(stream_destroy)
  GPUPLUG_VALIDATE_SLOT(stream_synchronize)
  GPUPLUG_VALIDATE_SLOT(synchronize)
  GPUPLUG_VALIDATE_SLOT(ledger_stats)
  GPUPLUG_VALIDATE_SLOT(ledger_reset_peak)
  GPUPLUG_VALIDATE_SLOT(ledger_scope_begin)
  GPUPLUG_VALIDATE_SLOT(ledger_scope_end)
  t.ledger_snapshot = &ledger_snapshot_thunk;
  GPUPLUG_VALIDATE_SLOT(event_create)
  GPUPLUG_VALIDATE_SLOT(event_destroy)
  GPUPLUG_VALIDATE_SLOT(event_record)
  GPUPLUG_VALIDATE_SLOT(stream_wait_event)
  GPUPLUG_VALIDATE_SLOT(event_synchronize)
  GPUPLUG_VALIDATE_SLOT(event_query)
  GPUPLUG_VALIDATE_SLOT(event_elapsed_ms)
  GPUPLUG_VALIDATE_SLOT(unload_module)
  GPUPLUG_VALIDATE_SLOT(get_function)
  GPUPLUG_VALIDATE_SLOT(get_global)
  GPUPLUG_VALIDATE_SLOT(launch)
  GPUPLUG_VALIDATE_SLOT(import_memory)
  GPUPLUG_VALIDATE_SLOT(import_stream)
  GPUPLUG_VALIDATE_SLOT(native_handles)
  GPUPLUG_VALIDATE_SLOT(native_pointer)
  GPUPLUG_VALIDATE_SLOT(alloc_host_mapped)
  GPUPLUG_VALIDATE_SLOT(free_host_mapped)
  GPUPLUG_VALIDATE_SLOT(host_ptr_to_device)
  GPUPLUG_VALIDATE_SLOT(host_address)
  GPUPLUG_VALIDATE_SLOT(stream_begin_capture)
  GPUPLUG_VALIDATE_SLOT(stream_end_capture)
  GPUPLUG_VALIDATE_SLOT(graph_launch)
  GPUPLUG_VALIDATE_SLOT(graph_destroy)
  GPUPLUG_VALIDATE_SLOT(stream_abort_capture)
  GPUPLUG_VALIDATE_SLOT(stream_is_capturing)
  GPUPLUG_VALIDATE_SLOT(stream_create_with_flags)
  GPUPLUG_VALIDATE_SLOT(alloc_arena)
  GPUPLUG_VALIDATE_SLOT(free_arena)
#undef GPUPLUG_VALIDATE_SLOT
  return t;
}

const gpuplug_plugin_v1 validate_slots = make_table();

}  // namespace

const gpuplug_layer_v1& validate_layer() noexcept {
  static const gpuplug_layer_v1 layer{
      sizeof(gpuplug_layer_v1),
      GPUPLUG_LAYER_VERSION,
      "validate",
      "refuses use after free, copies past an allocation, foreign or destroyed streams, events, "
      "graphs and kernels, zero grids; guard bands around allocations",
      nullptr,
      &layers::create_layer<ValidateLayer>,
      &validate_slots};
  return layer;
}

gpuplug_status_t validate_scan_redzones(gpuplug_instance_t instance, std::size_t* broken) noexcept {
  return Thunk<&ValidateLayer::scan_redzones>::call(instance, *broken);
}

}  // namespace gpuplug::detail
