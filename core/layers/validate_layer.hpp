// SPDX-License-Identifier: Apache-2.0
// The validate layer's checks (core-private): its own record of what this backend made (memory in
// MemoryRecord, mapped host memory in MappedRecord, guard bands in GuardBands; streams, events
// and kernel handles here), checked before each call reaches the plugin. validate.cpp makes the
// layer's table of them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <exception>
#include <gpuplug/support/failures.hpp>
#include <gpuplug/support/text.hpp>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "layers/layer_support.hpp"
#include "layers/validate_handles.hpp"
#include "layers/validate_mapped.hpp"
#include "layers/validate_memory.hpp"
#include "layers/validate_redzones.hpp"

namespace gpuplug::detail::validate {

using layers::HandleSet;
using layers::dims;
using layers::FunctionSet;
using layers::GuardBands;
using layers::kRecentCapacity;
using layers::LayerBase;
using layers::MappedRecord;
using layers::MemoryRecord;
using support::hex;

class ValidateLayer final : public LayerBase {
 public:
  ValidateLayer(const gpuplug_layer_next_t& next, const gpuplug_layer_services_t& services,
                std::string backend, const Options&)
      : LayerBase(next, services, std::move(backend)), guards_(*this) {}

  ~ValidateLayer() {
    // The backend is going away: leftovers are a warning, never a failure (nor an exception
    // out of destroy: without memory for the text there is no warning).
    try {
      warn_live_handles();
    } catch (...) {
    }
  }

  // ---- memory: alloc and alloc_managed with guard bands (GuardBands), arenas without

  gpuplug_status_t alloc(std::uint64_t bytes, const char* site, std::uint64_t* out) {
    return record_alloc<&gpuplug_plugin_v1::alloc>(bytes, site, out, false);
  }
  gpuplug_status_t alloc_managed(std::uint64_t bytes, const char* site, std::uint64_t* out) {
    return record_alloc<&gpuplug_plugin_v1::alloc_managed>(bytes, site, out, true);
  }
  gpuplug_status_t free(std::uint64_t ptr) { return release<&gpuplug_plugin_v1::free>(ptr); }
  // Arenas (ABI 1.3): device memory like an allocation's; the plugin refuses the wrong free.
  gpuplug_status_t alloc_arena(std::uint64_t bytes, const char* site, std::uint64_t* out) {
    return record_alloc<&gpuplug_plugin_v1::alloc_arena>(bytes, site, out, false);
  }
  gpuplug_status_t free_arena(std::uint64_t ptr) {
    // The plugin sees a guarded allocation's base, never this pointer: refused here.
    if (auto what = guards_.describe(ptr))
      return refuse("free_arena: " + hex(ptr) + " is no arena but an allocation from alloc " +
                    *what + ": free frees it");
    return release<&gpuplug_plugin_v1::free_arena>(ptr);
  }
  /// free / free_arena of `ptr`: forgotten here when the plugin freed it, kept when it refused.
  /// free checks the guard bands first: a broken one is LAUNCH_FAILED once the memory is freed.
  template <auto Slot>
  gpuplug_status_t release(std::uint64_t ptr) {
    if (ptr == 0) return call_next<Slot>(ptr);  // a no-op, as abi.h says
    std::string why;
    std::optional<MemoryRecord::Taken> taken = memory_.take(ptr, why);
    if (!taken) return refuse(why);
    std::string broken;
    const gpuplug_status_t st = same_slot<Slot, &gpuplug_plugin_v1::free>
                                    ? guards_.free(ptr, taken->allocation.bytes,
                                                   taken->allocation.site, broken)
                                    : call_next<Slot>(ptr);
    if (st != GPUPLUG_STATUS_SUCCESS) {
      memory_.restore(std::move(*taken));
      return st;
    }
    memory_.freed(std::move(*taken));
    if (!broken.empty())
      return fail(GPUPLUG_STATUS_LAUNCH_FAILED, broken + " (the allocation was freed)");
    return st;
  }
  // Interop (ABI 1.2): an imported range is memory of the backend like an allocation, freed
  // (forgotten) through free; an imported stream is a stream of the backend.
  gpuplug_status_t import_memory(void* native, std::uint64_t bytes, const char* site,
                                 std::uint64_t* out) {
    const gpuplug_status_t st = call_next<&gpuplug_plugin_v1::import_memory>(native, bytes, site, out);
    if (st != GPUPLUG_STATUS_SUCCESS) return st;
    try {
      memory_.allocated(*out, bytes, site != nullptr ? site : "import", false);
      guards_.imported(bytes, site != nullptr ? site : "import");
    } catch (...) {
      call_next<&gpuplug_plugin_v1::free>(*out);
      throw;
    }
    return st;
  }
  gpuplug_status_t import_stream(void* native, std::uint64_t* out) {
    const gpuplug_status_t st = call_next<&gpuplug_plugin_v1::import_stream>(native, out);
    if (st == GPUPLUG_STATUS_SUCCESS) {
      std::lock_guard lock(handles_mutex_);
      streams_.created(*out);
    }
    return st;
  }
  gpuplug_status_t native_handles(std::uint64_t stream, gpuplug_native_handles_t* out) {
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::native_handles>(stream, out);
  }
  gpuplug_status_t native_pointer(std::uint64_t ptr, void** out) {
    if (auto why = memory_.check_range(ptr, 0, ""); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::native_pointer>(ptr, out);
  }
  // Mapped host memory (ABI 1.3): its device range is memory of the backend like an
  // allocation's; its host pointers are checked against MappedRecord.
  gpuplug_status_t alloc_host_mapped(std::uint64_t bytes, const char* site, void** host,
                                     std::uint64_t* device) {
    using P = gpuplug_plugin_v1;
    const gpuplug_status_t st = call_next<&P::alloc_host_mapped>(bytes, site, host, device);
    if (st != GPUPLUG_STATUS_SUCCESS) return st;
    try {
      memory_.allocated(*device, bytes, site, false);
      mapped_.added(address_of(*host), *device, bytes);
    } catch (...) {
      call_next<&P::free_host_mapped>(*host);
      throw;
    }
    return st;
  }
  gpuplug_status_t free_host_mapped(void* host) {
    if (host == nullptr) return call_next<&gpuplug_plugin_v1::free_host_mapped>(host);
    std::string why;
    const std::optional<std::uint64_t> device = mapped_.device_of_start(address_of(host), why);
    if (!device) return refuse("free_host_mapped: " + why);
    std::optional<MemoryRecord::Taken> taken = memory_.take(*device, why);
    const gpuplug_status_t st = call_next<&gpuplug_plugin_v1::free_host_mapped>(host);
    if (st == GPUPLUG_STATUS_SUCCESS) {
      mapped_.removed(address_of(host));
      if (taken) memory_.freed(std::move(*taken));
    } else if (taken) {
      memory_.restore(std::move(*taken));
    }
    return st;
  }
  gpuplug_status_t host_ptr_to_device(const void* host, std::uint64_t* device) {
    if (auto why = mapped_.check_inside(address_of(host)); !why.empty())
      return refuse("host_ptr_to_device: " + why);
    return call_next<&gpuplug_plugin_v1::host_ptr_to_device>(host, device);
  }
  gpuplug_status_t host_address(std::uint64_t ptr, void** out) {
    if (auto why = memory_.check_range(ptr, 0, ""); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::host_address>(ptr, out);
  }
  gpuplug_status_t copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) {
    if (auto why = memory_.check_range(dst, bytes, ""); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::copy_h2d>(dst, src, bytes);
  }
  gpuplug_status_t copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) {
    if (auto why = memory_.check_range(src, bytes, ""); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::copy_d2h>(dst, src, bytes);
  }
  gpuplug_status_t copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) {
    if (auto why = check_d2d(dst, src, bytes); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::copy_d2d>(dst, src, bytes);
  }
  // copy_h2d_async and (ABI 1.3) copy_h2d_async_retained: the same checks.
  template <auto Slot>
  gpuplug_status_t copy_h2d_queued(std::uint64_t dst, const void* src, std::uint64_t bytes,
                                   std::uint64_t stream) {
    if (auto why = memory_.check_range(dst, bytes, ""); !why.empty()) return refuse(why);
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return call_next<Slot>(dst, src, bytes, stream);
  }
  gpuplug_status_t copy_d2h_async(void* dst, std::uint64_t src, std::uint64_t bytes,
                                  std::uint64_t stream) {
    if (auto why = memory_.check_range(src, bytes, ""); !why.empty()) return refuse(why);
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::copy_d2h_async>(dst, src, bytes, stream);
  }
  gpuplug_status_t copy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                                  std::uint64_t stream) {
    if (auto why = check_d2d(dst, src, bytes); !why.empty()) return refuse(why);
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::copy_d2d_async>(dst, src, bytes, stream);
  }
  // Pitched 2D copies: each device side's spanned range, which covers every row (a pitch below
  // the width, or a width or height of 0, is the plugin's to refuse or skip).
  gpuplug_status_t copy_h2d_2d_async(std::uint64_t dst, std::uint64_t dpitch, const void* src,
                                     std::uint64_t spitch, std::uint64_t w, std::uint64_t h,
                                     std::uint64_t stream) {
    if (auto why = memory_.check_pitched(dst, dpitch, w, h, ""); !why.empty()) return refuse(why);
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::copy_h2d_2d_async>(dst, dpitch, src, spitch, w, h, stream);
  }
  gpuplug_status_t copy_d2h_2d_async(void* dst, std::uint64_t dpitch, std::uint64_t src,
                                     std::uint64_t spitch, std::uint64_t w, std::uint64_t h,
                                     std::uint64_t stream) {
    if (auto why = memory_.check_pitched(src, spitch, w, h, ""); !why.empty()) return refuse(why);
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::copy_d2h_2d_async>(dst, dpitch, src, spitch, w, h, stream);
  }
  gpuplug_status_t copy_d2d_2d_async(std::uint64_t dst, std::uint64_t dpitch, std::uint64_t src,
                                     std::uint64_t spitch, std::uint64_t w, std::uint64_t h,
                                     std::uint64_t stream) {
    std::string why = memory_.check_pitched(dst, dpitch, w, h, "destination ");
    if (why.empty()) why = memory_.check_pitched(src, spitch, w, h, "source ");
    if (why.empty()) why = check_stream(stream);
    if (!why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::copy_d2d_2d_async>(dst, dpitch, src, spitch, w, h, stream);
  }
  // The destination side only: the source is another backend's, and its own layers never see
  // this call (abi.h: copy_peer_async).
  gpuplug_status_t copy_peer_async(std::uint64_t dst, gpuplug_instance_t src_inst,
                                   std::uint64_t src, std::uint64_t bytes, std::uint64_t stream) {
    if (auto why = memory_.check_range(dst, bytes, ""); !why.empty()) return refuse(why);
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::copy_peer_async>(dst, src_inst, src, bytes, stream);
  }
  gpuplug_status_t memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                             std::uint64_t stream) {
    if (auto why = memory_.check_range(dst, bytes, ""); !why.empty()) return refuse(why);
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::memset_d8>(dst, value, bytes, stream);
  }
  gpuplug_status_t sweep_unreleased(gpuplug_ledger_stats_t* swept) {
    const gpuplug_status_t st = guards_.sweep(swept);
    if (st == GPUPLUG_STATUS_SUCCESS) {
      memory_.swept();
      mapped_.swept();
    }
    return st;
  }
  // The ledger in the user's sizes: the level below counts the guard bands.
  gpuplug_status_t ledger_stats(gpuplug_ledger_stats_t* out) { return guards_.ledger_stats(out); }
  gpuplug_status_t ledger_reset_peak() { return guards_.reset_peak(); }
  gpuplug_status_t ledger_scope_begin(std::uint64_t* scope) { return guards_.scope_begin(scope); }
  gpuplug_status_t ledger_scope_end(std::uint64_t scope, std::uint64_t* peak, std::int64_t* net) {
    return guards_.scope_end(scope, peak, net);
  }
  std::size_t ledger_snapshot(char* buf, std::size_t size) { return guards_.snapshot(buf, size); }
  /// The broken guard bands now (GpuBackend::scan_redzones).
  gpuplug_status_t scan_redzones(std::size_t& broken) { return guards_.scan(broken); }

  // ---- streams

  gpuplug_status_t stream_create(std::uint64_t* out) {
    return create_handle<&gpuplug_plugin_v1::stream_create>(streams_, out);
  }
  gpuplug_status_t stream_create_with_flags(std::uint32_t flags, std::uint64_t* out) {
    return create_handle<&gpuplug_plugin_v1::stream_create_with_flags>(streams_, out, flags);
  }
  gpuplug_status_t stream_destroy(std::uint64_t stream) {
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    // Gone whatever the plugin answers: a destroy that reports a failure pending on the stream
    // destroys it anyway (abi.h), and one that fails otherwise leaves nothing usable.
    const gpuplug_status_t st = call_next<&gpuplug_plugin_v1::stream_destroy>(stream);
    std::lock_guard lock(handles_mutex_);
    streams_.destroyed(stream);
    return st;
  }
  gpuplug_status_t stream_synchronize(std::uint64_t stream) {
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return bands_checked(call_next<&gpuplug_plugin_v1::stream_synchronize>(stream));
  }
  gpuplug_status_t synchronize() {
    return bands_checked(call_next<&gpuplug_plugin_v1::synchronize>());
  }

  // ---- events

  gpuplug_status_t event_create(std::uint64_t* out) {
    return create_handle<&gpuplug_plugin_v1::event_create>(events_, out);
  }
  gpuplug_status_t event_destroy(std::uint64_t event) {
    if (auto why = check_event(event, "the event"); !why.empty()) return refuse(why);
    const gpuplug_status_t st = call_next<&gpuplug_plugin_v1::event_destroy>(event);
    if (st == GPUPLUG_STATUS_SUCCESS) {
      std::lock_guard lock(handles_mutex_);
      events_.destroyed(event);
    }
    return st;
  }
  gpuplug_status_t event_record(std::uint64_t event, std::uint64_t stream) {
    if (auto why = check_event(event, "the event"); !why.empty()) return refuse(why);
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::event_record>(event, stream);
  }
  gpuplug_status_t stream_wait_event(std::uint64_t stream, std::uint64_t event) {
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    if (auto why = check_event(event, "the event"); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::stream_wait_event>(stream, event);
  }
  gpuplug_status_t event_synchronize(std::uint64_t event) {
    if (auto why = check_event(event, "the event"); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::event_synchronize>(event);
  }
  gpuplug_status_t event_query(std::uint64_t event, std::int32_t* ready) {
    if (auto why = check_event(event, "the event"); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::event_query>(event, ready);
  }
  gpuplug_status_t event_elapsed_ms(std::uint64_t start, std::uint64_t end, float* ms) {
    if (auto why = check_event(start, "the start event"); !why.empty()) return refuse(why);
    if (auto why = check_event(end, "the end event"); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::event_elapsed_ms>(start, end, ms);
  }

  // ---- graphs (ABI 1.3): streams checked, graphs known from end_capture until graph_destroy

  gpuplug_status_t stream_begin_capture(std::uint64_t stream, std::int32_t mode) {
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::stream_begin_capture>(stream, mode);
  }
  gpuplug_status_t stream_end_capture(std::uint64_t stream, std::uint64_t* graph) {
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return create_handle<&gpuplug_plugin_v1::stream_end_capture>(graphs_, graph, stream);
  }
  gpuplug_status_t graph_launch(std::uint64_t graph, std::uint64_t stream) {
    if (auto why = check_graph(graph); !why.empty()) return refuse(why);
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::graph_launch>(graph, stream);
  }
  gpuplug_status_t graph_destroy(std::uint64_t graph) {
    if (auto why = check_graph(graph); !why.empty()) return refuse(why);
    const gpuplug_status_t st = call_next<&gpuplug_plugin_v1::graph_destroy>(graph);
    if (st == GPUPLUG_STATUS_SUCCESS) {
      std::lock_guard lock(handles_mutex_);
      graphs_.destroyed(graph);
    }
    return st;
  }
  gpuplug_status_t stream_abort_capture(std::uint64_t stream) {
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::stream_abort_capture>(stream);
  }
  gpuplug_status_t stream_is_capturing(std::uint64_t stream, std::int32_t* capturing) {
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::stream_is_capturing>(stream, capturing);
  }

  // ---- modules and kernels

  gpuplug_status_t unload_module(const char* name) {
    const gpuplug_status_t st = call_next<&gpuplug_plugin_v1::unload_module>(name);
    if (st != GPUPLUG_STATUS_SUCCESS) return st;
    memory_.module_unloaded(name);
    std::lock_guard lock(handles_mutex_);
    functions_.unloaded(name);
    return st;
  }
  gpuplug_status_t get_function(const char* module, const char* func, std::uint64_t* out) {
    const gpuplug_status_t st = call_next<&gpuplug_plugin_v1::get_function>(module, func, out);
    if (st == GPUPLUG_STATUS_SUCCESS) {
      std::lock_guard lock(handles_mutex_);
      functions_.resolved(*out, module, func);
    }
    return st;
  }
  gpuplug_status_t get_global(const char* module, const char* symbol, std::uint64_t* address,
                              std::uint64_t* size) {
    const gpuplug_status_t st =
        call_next<&gpuplug_plugin_v1::get_global>(module, symbol, address, size);
    // Globals are memory the plugin hands out without alloc: valid copy targets.
    if (st == GPUPLUG_STATUS_SUCCESS) memory_.global(*address, *size, module, symbol);
    return st;
  }
  gpuplug_status_t launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                          std::uint32_t shared_bytes, std::uint64_t stream, void** params) {
    if (auto why = check_function(function); !why.empty()) return refuse(why);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0)
      return refuse("grid " + dims(grid) + " of " + describe_function(function) +
                    " has a zero dimension");
    if (block.x == 0 || block.y == 0 || block.z == 0)
      return refuse("block " + dims(block) + " of " + describe_function(function) +
                    " has a zero dimension");
    if (auto why = check_stream(stream); !why.empty()) return refuse(why);
    return call_next<&gpuplug_plugin_v1::launch>(function, grid, block, shared_bytes, stream,
                                                 params);
  }

  /// INVALID_ARGUMENT with `why` as the failure's message (layer.h, "Errors").
  gpuplug_status_t refuse(const std::string& why) const noexcept {
    return fail(GPUPLUG_STATUS_INVALID_ARGUMENT, why);
  }

 private:
  /// alloc / alloc_managed, recorded. When the record cannot grow (bad_alloc) the allocation is
  /// given back, so that the failure the caller sees leaks nothing.
  template <auto Slot>
  gpuplug_status_t record_alloc(std::uint64_t bytes, const char* site, std::uint64_t* out,
                                bool managed) {
    constexpr bool arena = same_slot<Slot, &gpuplug_plugin_v1::alloc_arena>;
    const gpuplug_status_t st =
        arena ? call_next<Slot>(bytes, site, out) : guards_.allocate(managed, bytes, site, out);
    if (st != GPUPLUG_STATUS_SUCCESS) return st;
    try {
      memory_.allocated(*out, bytes, site, managed);
    } catch (...) {
      if (arena) {
        call_next<&gpuplug_plugin_v1::free_arena>(*out);
      } else {
        guards_.discard(*out, bytes, site);
      }
      throw;
    }
    return st;
  }
  /// A synchronize's status: after a successful one, LAUNCH_FAILED for a guard band newly found
  /// broken (GuardBands::check).
  gpuplug_status_t bands_checked(gpuplug_status_t st) {
    if (st != GPUPLUG_STATUS_SUCCESS) return st;
    std::string broken;
    st = guards_.check(broken);
    if (st == GPUPLUG_STATUS_SUCCESS && !broken.empty())
      return fail(GPUPLUG_STATUS_LAUNCH_FAILED, broken);
    return st;
  }
  /// destroy: the streams and events never destroyed, named in one warning.
  void warn_live_handles() {
    std::lock_guard lock(handles_mutex_);
    const std::string what = layers::describe_live(streams_, events_);
    if (what.empty()) return;
    log(GPUPLUG_LOG_WARNING,
        "validate: destroyed with " + what + " still live: destroy them before the backend");
  }
  /// stream_create / event_create / stream_end_capture: the new handle is live here.
  template <auto Slot, class... A>
  gpuplug_status_t create_handle(HandleSet& set, std::uint64_t* out, A... args) {
    const gpuplug_status_t st = call_next<Slot>(args..., out);
    if (st == GPUPLUG_STATUS_SUCCESS) {
      std::lock_guard lock(handles_mutex_);
      set.created(*out);
    }
    return st;
  }
  std::string check_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) const {
    std::string why = memory_.check_range(dst, bytes, "destination ");
    if (why.empty()) why = memory_.check_range(src, bytes, "source ");
    return why;
  }
  std::string check_stream(std::uint64_t stream) const {
    if (stream == 0) return {};  // the default stream is always there
    std::lock_guard lock(handles_mutex_);
    return streams_.check(stream);
  }
  std::string check_graph(std::uint64_t graph) const {
    if (graph == 0) return "the graph is the null graph (0)";
    std::lock_guard lock(handles_mutex_);
    return graphs_.check(graph);
  }
  std::string check_event(std::uint64_t event, const char* role) const {
    if (event == 0) return std::string(role) + " is the null event (0)";
    std::lock_guard lock(handles_mutex_);
    return events_.check(event);
  }
  std::string check_function(std::uint64_t function) const {
    std::lock_guard lock(handles_mutex_);
    return functions_.check(function);
  }
  /// "axpy::axpy_f32" for a handle known here (check_function passed).
  std::string describe_function(std::uint64_t function) const {
    std::lock_guard lock(handles_mutex_);
    return functions_.describe(function);
  }

  static std::uint64_t address_of(const void* p) noexcept {
    return reinterpret_cast<std::uintptr_t>(p);
  }

  MemoryRecord memory_;
  MappedRecord mapped_;
  GuardBands guards_;
  // Streams, events and kernel handles of this backend: few, so one mutex.
  mutable std::mutex handles_mutex_;
  HandleSet streams_{"stream"};
  HandleSet events_{"event"};
  HandleSet graphs_{"graph"};
  FunctionSet functions_;
};

}  // namespace gpuplug::detail::validate
