// SPDX-License-Identifier: Apache-2.0
// The SDK's instance slots: each checks its arguments, calls the Device and catches everything;
// fill_instance_slots and fill_peer_slots put them in the table, from the one slot list.
#include "edge.hpp"
#include "graph_slots.hpp"
#include "gpuplug/support/abi_slots.hpp"
#include "gpuplug/support/escape.hpp"
#include "gpuplug/support/text.hpp"

namespace gpuplug::sdk::detail {

namespace {

// ---- instance slots ----------------------------------------------------------------------------

void slot_destroy(gpuplug_instance_t inst) noexcept {
  if (inst == nullptr) return;
  Device* d = &as_device(inst);
  d->shutdown();
  delete d;
}

std::size_t slot_last_error(gpuplug_instance_t inst, char* buf, std::size_t size) noexcept {
  if (inst == nullptr) return copy_out("", buf, size);
  Device& d = as_device(inst);
  try {
    // Read without consuming, so a caller whose buffer was too small can ask again.
    std::string message = DeviceAccess::take_last_error(d);
    const std::size_t length = copy_out(message, buf, size);
    DeviceAccess::set_last_error(d, std::move(message));
    return length;
  } catch (...) {
    return copy_out("", buf, size);
  }
}

gpuplug_status_t slot_alloc(gpuplug_instance_t inst, std::uint64_t bytes, const char* site,
                            std::uint64_t* out) noexcept {
  return guarded(inst, "alloc", [&](Device& d) {
    GPUPLUG_EXPECTS(out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "alloc: out is null");
    *out = d.allocate(bytes, site, GPUPLUG_ALLOC_DEVICE);
  });
}

gpuplug_status_t slot_alloc_managed(gpuplug_instance_t inst, std::uint64_t bytes, const char* site,
                                    std::uint64_t* out) noexcept {
  return guarded(inst, "alloc_managed", [&](Device& d) {
    GPUPLUG_EXPECTS(out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "alloc_managed: out is null");
    *out = d.allocate(bytes, site, GPUPLUG_ALLOC_MANAGED);
  });
}

gpuplug_status_t slot_free(gpuplug_instance_t inst, std::uint64_t ptr) noexcept {
  return guarded(inst, "free", [&](Device& d) {
    if (ptr != 0) d.release(ptr);
  });
}

gpuplug_status_t slot_memory_info(gpuplug_instance_t inst, std::uint64_t* free_bytes,
                                  std::uint64_t* total_bytes) noexcept {
  return guarded(inst, "memory_info", [&](Device& d) {
    std::uint64_t free = 0, total = 0;
    d.memory_info(free, total);
    if (free_bytes != nullptr) *free_bytes = free;
    if (total_bytes != nullptr) *total_bytes = total;
  });
}

gpuplug_status_t slot_device_info(gpuplug_instance_t inst, gpuplug_device_info_t* out) noexcept {
  return guarded(inst, "device_info", [&](Device& d) {
    check_out_struct("device_info", out, GPUPLUG_DEVICE_INFO_V1_0_SIZE);
    describe_into(*out, d.config().ordinal,
                  [&](gpuplug_device_info_t& info) { d.vendor_device_info(info); });
  });
}

// Copies and memset: the checks are `transfer`'s, the work the vendor's.
gpuplug_status_t slot_copy_h2d(gpuplug_instance_t inst, std::uint64_t dst, const void* src,
                               std::uint64_t bytes) noexcept {
  return transfer(inst, {.op = "copy_h2d", .bytes = bytes, .device_dst = &dst, .host_src = &src},
                  [&](Device& d) { d.vendor_copy_h2d(dst, src, bytes); });
}
gpuplug_status_t slot_copy_d2h(gpuplug_instance_t inst, void* dst, std::uint64_t src,
                               std::uint64_t bytes) noexcept {
  const void* host = dst;
  return transfer(inst, {.op = "copy_d2h", .bytes = bytes, .host_dst = &host, .device_src = &src},
                  [&](Device& d) { d.vendor_copy_d2h(dst, src, bytes); });
}
gpuplug_status_t slot_copy_d2d(gpuplug_instance_t inst, std::uint64_t dst, std::uint64_t src,
                               std::uint64_t bytes) noexcept {
  return transfer(inst, {.op = "copy_d2d", .bytes = bytes, .device_dst = &dst, .device_src = &src},
                  [&](Device& d) { d.vendor_copy_d2d(dst, src, bytes); });
}
gpuplug_status_t slot_copy_h2d_async(gpuplug_instance_t inst, std::uint64_t dst, const void* src,
                                     std::uint64_t bytes, std::uint64_t stream) noexcept {
  return transfer(inst,
                  {.op = "copy_h2d_async",
                   .bytes = bytes,
                   .stream = &stream,
                   .device_dst = &dst,
                   .host_src = &src},
                  [&](Device& d) {
                    d.vendor_copy_h2d_async(dst, src, bytes, stream);
                    if (d.vendor_dma_reads_pinned() && d.is_pinned(src, bytes))
                      d.vendor_stream_synchronize(stream);
                  });
}
#if GPUPLUG_ABI_VERSION_MINOR >= 3
gpuplug_status_t slot_copy_h2d_async_retained(gpuplug_instance_t inst, std::uint64_t dst,
                                              const void* src, std::uint64_t bytes,
                                              std::uint64_t stream) noexcept {
  return transfer(
      inst,
      {.op = "copy_h2d_async_retained", .bytes = bytes, .stream = &stream, .device_dst = &dst,
       .host_src = &src},
      [&](Device& d) { d.vendor_copy_h2d_async_retained(dst, src, bytes, stream); });
}
#endif
gpuplug_status_t slot_copy_d2h_async(gpuplug_instance_t inst, void* dst, std::uint64_t src,
                                     std::uint64_t bytes, std::uint64_t stream) noexcept {
  const void* host = dst;
  return transfer(inst,
                  {.op = "copy_d2h_async",
                   .bytes = bytes,
                   .stream = &stream,
                   .host_dst = &host,
                   .device_src = &src},
                  [&](Device& d) { d.vendor_copy_d2h_async(dst, src, bytes, stream); });
}
gpuplug_status_t slot_copy_d2d_async(gpuplug_instance_t inst, std::uint64_t dst, std::uint64_t src,
                                     std::uint64_t bytes, std::uint64_t stream) noexcept {
  return transfer(inst,
                  {.op = "copy_d2d_async",
                   .bytes = bytes,
                   .stream = &stream,
                   .device_dst = &dst,
                   .device_src = &src},
                  [&](Device& d) { d.vendor_copy_d2d_async(dst, src, bytes, stream); });
}
gpuplug_status_t slot_memset_d8(gpuplug_instance_t inst, std::uint64_t dst, std::uint8_t value,
                                std::uint64_t bytes, std::uint64_t stream) noexcept {
  return transfer(inst, {.op = "memset_d8", .bytes = bytes, .stream = &stream, .device_dst = &dst},
                  [&](Device& d) { d.vendor_memset_d8(dst, value, bytes, stream); });
}

gpuplug_status_t slot_stream_create(gpuplug_instance_t inst, std::uint64_t* out) noexcept {
  return guarded(inst, "stream_create", [&](Device& d) {
    GPUPLUG_EXPECTS(out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "stream_create: out is null");
    *out = DeviceAccess::streams(d).create(d);
  });
}

[[maybe_unused]] gpuplug_status_t slot_stream_create_with_flags(gpuplug_instance_t inst,
                                                                std::uint32_t flags,
                                                                std::uint64_t* out) noexcept {
  return guarded(inst, "stream_create_with_flags", [&](Device& d) {
    GPUPLUG_EXPECTS(out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "stream_create_with_flags: out is null");
    *out = DeviceAccess::streams(d).create(d, flags);
  });
}

gpuplug_status_t slot_stream_destroy(gpuplug_instance_t inst, std::uint64_t stream) noexcept {
  return guarded(inst, "stream_destroy",
                 [&](Device& d) { DeviceAccess::streams(d).destroy(d, stream); });
}

gpuplug_status_t slot_stream_synchronize(gpuplug_instance_t inst, std::uint64_t stream) noexcept {
  return guarded(inst, "stream_synchronize", [&](Device& d) {
    d.streams().check("stream_synchronize", stream);
    d.vendor_stream_synchronize(stream);
  });
}

gpuplug_status_t slot_synchronize(gpuplug_instance_t inst) noexcept {
  return guarded(inst, "synchronize", [&](Device& d) { d.vendor_synchronize(); });
}

#if GPUPLUG_ABI_VERSION_MINOR >= 1  // the slots exist from ABI 1.1 (see plugin_sdk.hpp)
// ---- events (ABI 1.1): the EventSet checks every event, the StreamSet every stream, before the
// vendor's hook runs (defaults: UNSUPPORTED).

gpuplug_status_t slot_event_create(gpuplug_instance_t inst, std::uint64_t* out) noexcept {
  return guarded(inst, "event_create", [&](Device& d) {
    GPUPLUG_EXPECTS(out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "event_create: out is null");
    *out = DeviceAccess::events(d).create(d);
  });
}

gpuplug_status_t slot_event_destroy(gpuplug_instance_t inst, std::uint64_t event) noexcept {
  return guarded(inst, "event_destroy",
                 [&](Device& d) { DeviceAccess::events(d).destroy(d, event); });
}

gpuplug_status_t slot_event_record(gpuplug_instance_t inst, std::uint64_t event,
                                   std::uint64_t stream) noexcept {
  return guarded(inst, "event_record", [&](Device& d) {
    EventSet& events = DeviceAccess::events(d);
    events.check("event_record", event);
    d.streams().check("event_record", stream);
    d.vendor_event_record(event, stream);
    events.mark_recorded(event);
  });
}

gpuplug_status_t slot_stream_wait_event(gpuplug_instance_t inst, std::uint64_t stream,
                                        std::uint64_t event) noexcept {
  return guarded(inst, "stream_wait_event", [&](Device& d) {
    DeviceAccess::events(d).check("stream_wait_event", event);
    d.streams().check("stream_wait_event", stream);
    d.vendor_stream_wait_event(stream, event);
  });
}

gpuplug_status_t slot_event_synchronize(gpuplug_instance_t inst, std::uint64_t event) noexcept {
  return guarded(inst, "event_synchronize", [&](Device& d) {
    DeviceAccess::events(d).check("event_synchronize", event);
    d.vendor_event_synchronize(event);
  });
}

gpuplug_status_t slot_event_query(gpuplug_instance_t inst, std::uint64_t event,
                                  std::int32_t* ready) noexcept {
  return guarded(inst, "event_query", [&](Device& d) {
    GPUPLUG_EXPECTS(ready != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "event_query: ready is null");
    DeviceAccess::events(d).check("event_query", event);
    *ready = d.vendor_event_query(event) ? 1 : 0;
  });
}

gpuplug_status_t slot_event_elapsed_ms(gpuplug_instance_t inst, std::uint64_t start,
                                       std::uint64_t end, float* ms) noexcept {
  return guarded(inst, "event_elapsed_ms", [&](Device& d) {
    GPUPLUG_EXPECTS(ms != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "event_elapsed_ms: ms is null");
    EventSet& events = DeviceAccess::events(d);
    events.check_recorded("event_elapsed_ms (start)", start);
    events.check_recorded("event_elapsed_ms (end)", end);
    *ms = d.vendor_event_elapsed_ms(start, end);
  });
}
#endif

gpuplug_status_t slot_load_module(gpuplug_instance_t inst, const char* name, const void* image,
                                  std::uint64_t size) noexcept {
  return guarded(inst, "load_module", [&](Device& d) {
    GPUPLUG_EXPECTS(name != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "load_module: name is null");
    if (image == nullptr || size == 0)
      fail(GPUPLUG_STATUS_INVALID_IMAGE, "module " + std::string(name) + ": the image is empty");
    DeviceAccess::modules(d).load(
        name, std::span<const std::byte>(static_cast<const std::byte*>(image), size));
  });
}

[[maybe_unused]] gpuplug_status_t slot_load_module_file(gpuplug_instance_t inst, const char* name,
                                       const char* path) noexcept {
  return guarded(inst, "load_module_file", [&](Device& d) {
    GPUPLUG_EXPECTS(name != nullptr && path != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "load_module_file: name or path is null");
    if (*path == '\0')
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
           "module " + support::escape_text(name) + ": the file path is empty");
    DeviceAccess::modules(d).load_file(name, std::filesystem::path(path));
  });
}

gpuplug_status_t slot_unload_module(gpuplug_instance_t inst, const char* name) noexcept {
  return guarded(inst, "unload_module", [&](Device& d) {
    GPUPLUG_EXPECTS(name != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "unload_module: name is null");
    DeviceAccess::modules(d).unload(name);
  });
}

gpuplug_status_t slot_has_module(gpuplug_instance_t inst, const char* name,
                                 std::int32_t* out) noexcept {
  return guarded(inst, "has_module", [&](Device& d) {
    GPUPLUG_EXPECTS(name != nullptr && out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "has_module: name or out is null");
    *out = DeviceAccess::modules(d).has(name) ? 1 : 0;
  });
}

gpuplug_status_t slot_get_function(gpuplug_instance_t inst, const char* module, const char* func,
                                   std::uint64_t* out) noexcept {
  return guarded(inst, "get_function", [&](Device& d) {
    GPUPLUG_EXPECTS(module != nullptr && func != nullptr && out != nullptr,
                    GPUPLUG_STATUS_INVALID_ARGUMENT, "get_function: module, func or out is null");
    *out = DeviceAccess::modules(d).get_function(module, func);
  });
}

gpuplug_status_t slot_get_global(gpuplug_instance_t inst, const char* module, const char* symbol,
                                 std::uint64_t* address, std::uint64_t* size) noexcept {
  return guarded(inst, "get_global", [&](Device& d) {
    GPUPLUG_EXPECTS(module != nullptr && symbol != nullptr && address != nullptr && size != nullptr,
                    GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "get_global: module, symbol, address or size is null");
    const auto [a, n] = DeviceAccess::modules(d).get_global(module, symbol);
    *address = a;
    *size = n;
  });
}

// The hot path: one null check and the indirect call; no allocation, no lock.
gpuplug_status_t slot_launch(gpuplug_instance_t inst, std::uint64_t function, gpuplug_dim3_t grid,
                             gpuplug_dim3_t block, std::uint32_t shared_bytes, std::uint64_t stream,
                             void** params) noexcept {
  return guarded(inst, "launch", [&](Device& d) {
    GPUPLUG_EXPECTS(function != 0, GPUPLUG_STATUS_INVALID_ARGUMENT, "launch: the function is null");
    d.vendor_launch(function, grid, block, shared_bytes, stream, params);
  });
}

gpuplug_status_t slot_ledger_stats(gpuplug_instance_t inst, gpuplug_ledger_stats_t* out) noexcept {
  return guarded(inst, "ledger_stats", [&](Device& d) {
    check_out_struct("ledger_stats", out, ledger_stats_min_size);
    fill_stats(*out, DeviceAccess::ledger(d).counters());
  });
}

std::size_t slot_ledger_report(gpuplug_instance_t inst, std::uint32_t top_n, char* buf,
                               std::size_t size) noexcept {
  if (inst == nullptr) return copy_out("", buf, size);
  try {
    return copy_out(DeviceAccess::ledger(as_device(inst)).report(top_n), buf, size);
  } catch (...) {
    return copy_out("", buf, size);
  }
}

gpuplug_status_t slot_sweep_unreleased(gpuplug_instance_t inst,
                                       gpuplug_ledger_stats_t* swept) noexcept {
  return guarded(inst, "sweep_unreleased", [&](Device& d) {
    if (swept != nullptr) check_out_struct("sweep_unreleased", swept, ledger_stats_min_size);
    const SweepResult r = DeviceAccess::sweep_unreleased(d);
    if (swept != nullptr) {
      // live_* describe what was swept; total_frees counts the vendor frees that succeeded.
      LedgerCounters c;
      c.live_bytes = r.bytes;
      c.live_count = r.count;
      c.live_managed_bytes = r.managed_bytes;
      c.live_pinned_bytes = r.pinned_bytes;
      c.arena_bytes = r.arena_bytes;
      c.total_frees = r.count - r.failed;
      fill_stats(*swept, c);
    }
  });
}

// ABI 1.2 (only a 1.2 table points to them; see plugin_sdk.hpp).
[[maybe_unused]] std::size_t slot_ledger_snapshot(gpuplug_instance_t inst, char* buf,
                                                  std::size_t size) noexcept {
  if (inst == nullptr) {
    copy_out("", buf, size);
    return 0;
  }
  try {
    return copy_out(to_json(DeviceAccess::ledger(as_device(inst)).snapshot()), buf, size);
  } catch (...) {
    copy_out("", buf, size);
    return 0;  // the core reports the failure
  }
}

[[maybe_unused]] gpuplug_status_t slot_ledger_reset_peak(gpuplug_instance_t inst) noexcept {
  return guarded(inst, "ledger_reset_peak",
                 [&](Device& d) { DeviceAccess::ledger(d).reset_peak(); });
}

[[maybe_unused]] gpuplug_status_t slot_ledger_scope_begin(gpuplug_instance_t inst,
                                                          std::uint64_t* scope) noexcept {
  return guarded(inst, "ledger_scope_begin", [&](Device& d) {
    GPUPLUG_EXPECTS(scope != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "ledger_scope_begin: scope is null");
    *scope = DeviceAccess::ledger(d).begin_scope();
  });
}

[[maybe_unused]] gpuplug_status_t slot_ledger_scope_end(gpuplug_instance_t inst,
                                                        std::uint64_t scope,
                                                        std::uint64_t* peak_bytes,
                                                        std::int64_t* net_bytes) noexcept {
  return guarded(inst, "ledger_scope_end", [&](Device& d) {
    GPUPLUG_EXPECTS(peak_bytes != nullptr && net_bytes != nullptr,
                    GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "ledger_scope_end: peak_bytes or net_bytes is null");
    const ScopeResult r = DeviceAccess::ledger(d).end_scope(scope);
    *peak_bytes = r.peak_bytes;
    *net_bytes = r.net_bytes;
  });
}

#if GPUPLUG_ABI_VERSION_MINOR >= 2
// ABI 1.2, interop handles (docs/interop.md). Only a 1.2 table points to them.
gpuplug_status_t slot_native_handles(gpuplug_instance_t inst, std::uint64_t stream,
                                     gpuplug_native_handles_t* out) noexcept {
  return guarded(inst, "native_handles", [&](Device& d) {
    check_out_struct("native_handles", out);
    d.streams().check("native_handles", stream);
    const NativeStreamHandles h = d.vendor_native_handles(stream);
    out->device = h.device;
    out->context = h.context;
    out->stream = h.stream;
    copy_out(d.config().plugin_name, out->vendor, sizeof out->vendor);
  });
}

gpuplug_status_t slot_native_pointer(gpuplug_instance_t inst, std::uint64_t ptr,
                                     void** out) noexcept {
  return guarded(inst, "native_pointer", [&](Device& d) {
    GPUPLUG_EXPECTS(out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "native_pointer: out is null");
    *out = d.native_address(ptr);
  });
}

gpuplug_status_t slot_import_memory(gpuplug_instance_t inst, void* native, std::uint64_t bytes,
                                    const char* site, std::uint64_t* out) noexcept {
  return guarded(inst, "import_memory", [&](Device& d) {
    GPUPLUG_EXPECTS(out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "import_memory: out is null");
    *out = d.import_range(reinterpret_cast<std::uintptr_t>(native), bytes, site);
  });
}

gpuplug_status_t slot_import_stream(gpuplug_instance_t inst, void* native,
                                    std::uint64_t* out) noexcept {
  return guarded(inst, "import_stream", [&](Device& d) {
    GPUPLUG_EXPECTS(out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "import_stream: out is null");
    *out = DeviceAccess::streams(d).adopt(d, native);
  });
}
#endif

// ABI 1.2 peer copies (only a 1.2 table of a plugin that declares peer_copies points to them).
[[maybe_unused]] gpuplug_status_t slot_copy_peer_async(gpuplug_instance_t inst, std::uint64_t dst,
                                                       gpuplug_instance_t src_inst,
                                                       std::uint64_t src, std::uint64_t bytes,
                                                       std::uint64_t stream) noexcept {
  return guarded(inst, "copy_peer_async", [&](Device& d) {
    // The core passes only instances of this plugin (abi.h), so src_inst is a Device too.
    GPUPLUG_EXPECTS(src_inst != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "copy_peer_async: the source instance is null");
    if (bytes == 0) return;
    d.streams().check("copy_peer_async", stream);
    d.check_range("copy_peer_async", "destination", dst, bytes, true);
    Device& source = as_device(src_inst);
    source.check_range("copy_peer_async", "source", src, bytes, false);
    d.vendor_copy_peer_async(dst, source, src, bytes, stream);
  });
}

[[maybe_unused]] gpuplug_status_t slot_host_alloc_pinned(gpuplug_instance_t inst,
                                                         std::uint64_t bytes,
                                                         void** out) noexcept {
  return guarded(inst, "host_alloc_pinned", [&](Device& d) {
    GPUPLUG_EXPECTS(out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "host_alloc_pinned: out is null");
    *out = nullptr;
    GPUPLUG_EXPECTS(bytes != 0, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "host_alloc_pinned: bytes is 0");
    *out = d.alloc_pinned(bytes);
  });
}

[[maybe_unused]] gpuplug_status_t slot_host_free_pinned(gpuplug_instance_t inst,
                                                        void* ptr) noexcept {
  return guarded(inst, "host_free_pinned", [&](Device& d) {
    if (ptr != nullptr) d.free_pinned(ptr);
  });
}

}  // namespace

// The slots a Device serves, from the one slot list: every instance slot and destroy get the
// SDK's slot_<name>; the peer copy and pinned slots only for a plugin that declares peer_copies.
#define GPUPLUG_SDK_SLOT(P, name, minor, side, group, rule, absent) GPUPLUG_SDK_SLOT_##side(name, group)
#define GPUPLUG_SDK_SLOT_plugin(name, group)
#define GPUPLUG_SDK_SLOT_lifetime(name, group) GPUPLUG_SDK_SLOT_instance(name, group)
#define GPUPLUG_SDK_SLOT_instance(name, group)                           \
  if constexpr (is_peer_group(abi::SlotGroup::group) == peer) t.name = &slot_##name;

namespace {
constexpr bool is_peer_group(abi::SlotGroup g) noexcept {
  return g == abi::SlotGroup::peer || g == abi::SlotGroup::pinned;
}
template <bool peer>
void fill_slots(gpuplug_plugin_v1& t) noexcept {
  GPUPLUG_ABI_SLOTS(GPUPLUG_SDK_SLOT, ~)
}
}  // namespace

void fill_instance_slots(gpuplug_plugin_v1& t) noexcept { fill_slots<false>(t); }

void fill_peer_slots(gpuplug_plugin_v1& t) noexcept { fill_slots<true>(t); }

}  // namespace gpuplug::sdk::detail
