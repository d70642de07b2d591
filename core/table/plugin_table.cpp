// SPDX-License-Identifier: Apache-2.0
// The plugin table: copy, v1 contract checks, optional slots with the defaults abi.h states, and
// the C structs as C++ values.
#include "table/plugin_table.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <gpuplug/support/c_string.hpp>
#include <gpuplug/support/plugin_name.hpp>
#include <gpuplug/support/regular_file.hpp>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "table/plugin_backend.hpp"

namespace gpuplug::detail {

namespace {

/// The slot of `t` that `s` describes, as an untyped pointer (null when the plugin left it null).
void* slot_pointer(const gpuplug_plugin_v1& t, const abi::SlotInfo& s) noexcept {
  void* p = nullptr;
  std::memcpy(&p, reinterpret_cast<const unsigned char*>(&t) + s.offset, sizeof p);
  return p;
}

/// Whether `t` offers slot `s`: set, and for a slot whose group resolves together, its whole
/// group set (a wait without a record cannot work, so a partial set of events is none).
bool offers(const gpuplug_plugin_v1& t, const abi::SlotInfo& s) noexcept {
  if (s.rule != abi::SlotRule::together) return slot_pointer(t, s) != nullptr;
  return std::ranges::all_of(abi::slots, [&](const abi::SlotInfo& other) {
    return other.group != s.group || other.rule != abi::SlotRule::together ||
           slot_pointer(t, other) != nullptr;
  });
}

/// The first required slot `t` leaves null, or "".
std::string_view first_missing_slot(const gpuplug_plugin_v1& t) noexcept {
  for (const abi::SlotInfo& s : abi::slots) {
    if (s.rule == abi::SlotRule::required && slot_pointer(t, s) == nullptr) return s.name;
  }
  return {};
}

// ---- optional slots: forwarding thunks and the defaults abi.h states ----------------------------

/// The thunk into the plugin's slot: the call with the PluginBackend's instance.
template <auto Slot, class F = std::remove_cvref_t<decltype(std::declval<gpuplug_plugin_v1&>().*Slot)>>
struct Forward;
template <auto Slot, class R, class... A>
struct Forward<Slot, R (*)(gpuplug_instance_t, A...)> {
  static R call(const PluginBackend& b, A... args) {
    return (b.table().*Slot)(b.instance(), args...);
  }
};

[[noreturn]] void unsupported(const PluginBackend& b, std::string_view operation) {
  std::string why = "not supported by the " + std::string(b.plugin_name()) + " plugin";
  // A plugin of an older minor may lack the slot only because it predates it (ABI-2): say so.
  if (const std::uint32_t v = b.table().abi_version;
      GPUPLUG_ABI_MINOR(v) < GPUPLUG_ABI_VERSION_MINOR) {
    why += " (it speaks ABI " + abi_version_text(v) + ", this host " +
           abi_version_text(GPUPLUG_ABI_VERSION) + ")";
  }
  throw Error(Status::unsupported, std::string(b.name()), std::string(operation), why);
}

gpuplug_status_t default_alloc_managed(const PluginBackend& b, std::uint64_t, const char*,
                                       std::uint64_t*) {
  unsupported(b, "alloc_managed");
}

gpuplug_status_t default_unload_module(const PluginBackend& b, const char*) {
  unsupported(b, "unload_module");
}

// Async copies without an async slot: wait for the stream, then copy synchronously. The result
// is the same ordering, with the host blocked instead of queued.
template <auto Copy, class Dst, class Src>
gpuplug_status_t default_copy_async(const PluginBackend& b, Dst dst, Src src, std::uint64_t bytes,
                                    std::uint64_t stream, const char* operation) {
  b.check(b.table().stream_synchronize(b.instance(), stream), operation);
  return (b.table().*Copy)(b.instance(), dst, src, bytes);
}

gpuplug_status_t default_copy_h2d_async(const PluginBackend& b, std::uint64_t dst, const void* src,
                                        std::uint64_t bytes, std::uint64_t stream) {
  return default_copy_async<&gpuplug_plugin_v1::copy_h2d>(b, dst, src, bytes, stream,
                                                          "copy_h2d_async");
}

gpuplug_status_t default_copy_d2h_async(const PluginBackend& b, void* dst, std::uint64_t src,
                                        std::uint64_t bytes, std::uint64_t stream) {
  return default_copy_async<&gpuplug_plugin_v1::copy_d2h>(b, dst, src, bytes, stream,
                                                          "copy_d2h_async");
}

gpuplug_status_t default_copy_d2d_async(const PluginBackend& b, std::uint64_t dst,
                                        std::uint64_t src, std::uint64_t bytes,
                                        std::uint64_t stream) {
  return default_copy_async<&gpuplug_plugin_v1::copy_d2d>(b, dst, src, bytes, stream,
                                                          "copy_d2d_async");
}

// Without a per-site report, summarise the ledger counters; same contract as the slot.
std::size_t default_ledger_report(const PluginBackend& b, std::uint32_t, char* buf,
                                  std::size_t size) {
  gpuplug_ledger_stats_t stats{};
  stats.struct_size = sizeof stats;
  std::string text;
  if (b.table().ledger_stats(b.instance(), &stats) == GPUPLUG_STATUS_SUCCESS) {
    text = std::to_string(stats.live_count) + " live allocations, " +
           std::to_string(stats.live_bytes) + " bytes (no per-site report from this plugin)";
  } else {
    text = "no allocation report from this plugin";
  }
  return support::copy_out(text, buf, size);
}

// ABI 1.2 memory slots: a plugin without them cannot reset peaks or count scopes.
gpuplug_status_t default_ledger_reset_peak(const PluginBackend& b) {
  unsupported(b, "reset_peak");
}

gpuplug_status_t default_ledger_scope_begin(const PluginBackend& b, std::uint64_t*) {
  unsupported(b, "begin_memory_scope");
}

gpuplug_status_t default_ledger_scope_end(const PluginBackend& b, std::uint64_t, std::uint64_t*,
                                          std::int64_t*) {
  unsupported(b, "end_memory_scope");
}

// ABI 1.2 interop handles: a plugin without them has no native handles and imports nothing.
gpuplug_status_t default_native_handles(const PluginBackend& b, std::uint64_t,
                                        gpuplug_native_handles_t*) {
  unsupported(b, "native");
}
gpuplug_status_t default_native_pointer(const PluginBackend& b, std::uint64_t, void**) {
  unsupported(b, "native_pointer");
}
gpuplug_status_t default_import_memory(const PluginBackend& b, void*, std::uint64_t, const char*,
                                       std::uint64_t*) {
  unsupported(b, "import_memory");
}
gpuplug_status_t default_import_stream(const PluginBackend& b, void*, std::uint64_t*) {
  unsupported(b, "import_stream");
}

// ABI 1.3 mapped host memory: a plugin without the three slots has none.
gpuplug_status_t default_alloc_host_mapped(const PluginBackend& b, std::uint64_t, const char*,
                                           void**, std::uint64_t*) {
  unsupported(b, "alloc_host_pinned");
}
gpuplug_status_t default_free_host_mapped(const PluginBackend& b, void*) {
  unsupported(b, "free_host_pinned");
}
gpuplug_status_t default_host_ptr_to_device(const PluginBackend& b, const void*,
                                            std::uint64_t*) {
  unsupported(b, "host_ptr_to_device");
}

// Defaults that leave the slot null: the caller takes another path (see OptionalSlots).
constexpr std::nullptr_t default_ledger_snapshot = nullptr;
constexpr std::nullptr_t default_copy_peer_async = nullptr;
constexpr std::nullptr_t default_host_alloc_pinned = nullptr;
constexpr std::nullptr_t default_host_free_pinned = nullptr;
constexpr std::nullptr_t default_host_address = nullptr;  // PluginBackend::host_address asks the ledger
constexpr std::nullptr_t default_copy_h2d_async_retained = nullptr;  // resolved after the rest

// copy_h2d_async of a plugin older than ABI 1.3, which may read the source after it returns:
// the stream's work is waited for, so that the caller may reuse the source, as from 1.3 on.
gpuplug_status_t copy_h2d_async_then_synchronize(const PluginBackend& b, std::uint64_t dst,
                                                 const void* src, std::uint64_t bytes,
                                                 std::uint64_t stream) {
  const gpuplug_status_t st = b.table().copy_h2d_async(b.instance(), dst, src, bytes, stream);
  if (st != GPUPLUG_STATUS_SUCCESS) return st;
  return b.table().stream_synchronize(b.instance(), stream);
}
// Pitched 2D copies (ABI 1.3): GpuBackend's one 1D async copy per row.
constexpr std::nullptr_t default_copy_h2d_2d_async = nullptr;
constexpr std::nullptr_t default_copy_d2h_2d_async = nullptr;
constexpr std::nullptr_t default_copy_d2d_2d_async = nullptr;

// A plugin without load_module_file (older than the slot, or one that keeps it null): the core
// reads the file and hands the plugin the bytes.
gpuplug_status_t default_load_module_file(const PluginBackend& b, const char* name,
                                          const char* path) {
  std::string why;
  // A regular file only: a FIFO or a device at the path is refused, never opened or waited on.
  const std::optional<std::vector<std::byte>> bytes =
      support::read_regular_file(path, std::numeric_limits<std::uint64_t>::max(), why);
  if (!bytes) {
    throw Error(Status::invalid_argument, std::string(b.name()),
                "load_module_file: module " + std::string(name) + ": cannot read '" +
                    std::string(path) + "': " + why);
  }
  return b.table().load_module(b.instance(), name, bytes->data(), bytes->size());
}

// Events (ABI 1.1): a plugin whose table ends before them (a 1.0 plugin), or that leaves one of
// them null, has none. The message says which, with the plugin's ABI, since "use a plugin built
// against ABI 1.1" is usually the fix.
[[noreturn]] void events_unsupported(const PluginBackend& b, const char* operation) {
  const gpuplug_plugin_v1& t = b.table();
  constexpr std::size_t events_end = offsetof(gpuplug_plugin_v1, event_elapsed_ms) + sizeof(void*);
  const std::string why =
      t.struct_size < events_end
          ? "ABI " + abi_version_text(t.abi_version) + ": its " + std::to_string(t.struct_size) +
                "-byte table ends before the event slots of ABI 1.1"
          : "ABI " + abi_version_text(t.abi_version) + ": its event slots are not all set";
  throw Error(
      Status::unsupported, std::string(b.name()), operation,
      "events are not supported by the " + std::string(b.plugin_name()) + " plugin (" + why + ")");
}

gpuplug_status_t default_event_create(const PluginBackend& b, std::uint64_t*) {
  events_unsupported(b, "create_event");
}
gpuplug_status_t default_event_destroy(const PluginBackend& b, std::uint64_t) {
  events_unsupported(b, "destroy_event");
}
gpuplug_status_t default_event_record(const PluginBackend& b, std::uint64_t, std::uint64_t) {
  events_unsupported(b, "record");
}
gpuplug_status_t default_stream_wait_event(const PluginBackend& b, std::uint64_t, std::uint64_t) {
  events_unsupported(b, "wait");
}
gpuplug_status_t default_event_synchronize(const PluginBackend& b, std::uint64_t) {
  events_unsupported(b, "synchronize");
}
gpuplug_status_t default_event_query(const PluginBackend& b, std::uint64_t, std::int32_t*) {
  events_unsupported(b, "query");
}
gpuplug_status_t default_event_elapsed_ms(const PluginBackend& b, std::uint64_t, std::uint64_t,
                                          float*) {
  events_unsupported(b, "elapsed_ms");
}

// Graphs (ABI 1.3): a plugin whose table ends before them, or that leaves one of them null, has
// none. Nothing can capture there, so an abort is a no-op and no stream is capturing.
[[noreturn]] void graphs_unsupported(const PluginBackend& b, const char* operation) {
  const gpuplug_plugin_v1& t = b.table();
  constexpr std::size_t graphs_end =
      offsetof(gpuplug_plugin_v1, stream_is_capturing) + sizeof(void*);
  const std::string why =
      t.struct_size < graphs_end || GPUPLUG_ABI_MINOR(t.abi_version) < 3
          ? "ABI " + abi_version_text(t.abi_version) + ": its table ends before the graph slots of ABI 1.3"
          : "ABI " + abi_version_text(t.abi_version) + ": its graph slots are not all set";
  throw Error(
      Status::unsupported, std::string(b.name()), operation,
      "graphs are not supported by the " + std::string(b.plugin_name()) + " plugin (" + why + ")");
}

gpuplug_status_t default_stream_begin_capture(const PluginBackend& b, std::uint64_t, std::int32_t) {
  graphs_unsupported(b, "begin_capture");
}
gpuplug_status_t default_stream_end_capture(const PluginBackend& b, std::uint64_t, std::uint64_t*) {
  graphs_unsupported(b, "end_capture");
}
gpuplug_status_t default_graph_launch(const PluginBackend& b, std::uint64_t, std::uint64_t) {
  graphs_unsupported(b, "launch_graph");
}
gpuplug_status_t default_graph_destroy(const PluginBackend& b, std::uint64_t) {
  graphs_unsupported(b, "destroy_graph");
}
gpuplug_status_t default_stream_abort_capture(const PluginBackend&, std::uint64_t) {
  return GPUPLUG_STATUS_SUCCESS;
}
gpuplug_status_t default_stream_is_capturing(const PluginBackend&, std::uint64_t,
                                             std::int32_t* capturing) {
  *capturing = 0;
  return GPUPLUG_STATUS_SUCCESS;
}

// Stream flags (ABI 1.3): a plugin without the slot makes blocking streams, which order every
// operation a non-blocking stream would and more, so they keep its promises (only overlapping
// less with the default stream).
gpuplug_status_t default_stream_create_with_flags(const PluginBackend& b, std::uint32_t,
                                                  std::uint64_t* out) {
  return b.table().stream_create(b.instance(), out);
}

// Arenas (ABI 1.3): a plugin without both slots has none; what it would put on its ledger as an
// arena only its own ledger can keep apart, so the core does not make one up from alloc.
[[noreturn]] void arenas_unsupported(const PluginBackend& b, const char* operation) {
  throw Error(Status::unsupported, std::string(b.name()), operation,
              "arenas are not supported by the " + std::string(b.plugin_name()) + " plugin (ABI " +
                  abi_version_text(b.table().abi_version) +
                  (GPUPLUG_ABI_MINOR(b.table().abi_version) < 3
                       ? ": its table ends before the arena slots of ABI 1.3)"
                       : ": its arena slots are not both set)"));
}
gpuplug_status_t default_alloc_arena(const PluginBackend& b, std::uint64_t, const char*,
                                     std::uint64_t*) {
  arenas_unsupported(b, "alloc_arena");
}
gpuplug_status_t default_free_arena(const PluginBackend& b, std::uint64_t) {
  arenas_unsupported(b, "free_arena");
}

}  // namespace

std::string abi_version_text(std::uint32_t v) {
  return std::to_string(GPUPLUG_ABI_MAJOR(v)) + "." + std::to_string(GPUPLUG_ABI_MINOR(v));
}

std::size_t known_table_size(const gpuplug_plugin_v1& published) noexcept {
  // ABI-3: no further than struct_size, no further than this core's table (a later minor's extra
  // slots are not ours to read, ABI-1), and no further than the table of the minor it declares:
  // a plugin that answers "1.0" with a larger struct_size (a wrong size, as PJRT shipped twice)
  // is never called through a slot its minor did not have.
  std::size_t n = std::min<std::size_t>(published.struct_size, sizeof(gpuplug_plugin_v1));
  if (GPUPLUG_ABI_MAJOR(published.abi_version) == GPUPLUG_ABI_VERSION_MAJOR)
    n = std::min(n, abi::table_size_of_minor(GPUPLUG_ABI_MINOR(published.abi_version)));
  return n;
}

gpuplug_plugin_v1 copy_table(const gpuplug_plugin_v1& published) noexcept {
  gpuplug_plugin_v1 t{};
  std::memcpy(&t, &published, known_table_size(published));
  return t;
}

// ---- the v1 contract ----------------------------------------------------------------------------

std::optional<Refusal> check_header(const gpuplug_plugin_v1& published) {
  if (GPUPLUG_ABI_MAJOR(published.abi_version) != GPUPLUG_ABI_VERSION_MAJOR) {
    return Refusal{PluginReason::abi_mismatch,
                   "ABI mismatch: plugin speaks ABI " + abi_version_text(published.abi_version) +
                       ", host speaks " + abi_version_text(GPUPLUG_ABI_VERSION)};
  }
  if (published.struct_size < GPUPLUG_PLUGIN_V1_MIN_SIZE) {
    return Refusal{PluginReason::table_too_small,
                   "plugin table too small: " + std::to_string(published.struct_size) +
                       " bytes, ABI " + abi_version_text(GPUPLUG_ABI_VERSION) + " needs at least " +
                       std::to_string(GPUPLUG_PLUGIN_V1_MIN_SIZE)};
  }
  return std::nullopt;
}

std::optional<Refusal> check_answer(const gpuplug_plugin_v1& published, std::uint32_t asked) {
  if (GPUPLUG_ABI_MAJOR(published.abi_version) == GPUPLUG_ABI_MAJOR(asked) &&
      GPUPLUG_ABI_MINOR(published.abi_version) <= GPUPLUG_ABI_MINOR(asked))
    return std::nullopt;
  return Refusal{PluginReason::abi_mismatch,
                 "breaks ABI-4: plugin answered ABI " + abi_version_text(published.abi_version) +
                     " to a host that asked for " + abi_version_text(asked) +
                     " (a plugin answers the highest version both share, never a later one)"};
}

std::optional<Refusal> check_name(const gpuplug_plugin_v1& table) {
  if (table.name != nullptr && support::valid_plugin_name(table.name)) return std::nullopt;
  return Refusal{PluginReason::abi_mismatch,
                 "plugin table breaks ABI " + abi_version_text(GPUPLUG_ABI_VERSION) + ": name is " +
                     (table.name == nullptr ? "null" : "'" + std::string(table.name) + "'") +
                     " (expected " + std::string(support::plugin_name_pattern) + ")"};
}

std::optional<Refusal> check_required_slots(const gpuplug_plugin_v1& table) {
  const std::string_view slot = first_missing_slot(table);
  if (slot.empty()) return std::nullopt;
  return Refusal{PluginReason::abi_mismatch, "plugin table breaks ABI " +
                                                 abi_version_text(GPUPLUG_ABI_VERSION) +
                                                 ": required slot '" + std::string(slot) + "' is null"};
}

// The one place where optional slots are null-checked: every optional instance slot of the list.
OptionalSlots resolve_optional_slots(const gpuplug_plugin_v1& t,
                                     std::uint32_t plugin_abi_version) noexcept {
  OptionalSlots s{};
#define GPUPLUG_RESOLVE(P, name, minor, side, group, rule, absent) GPUPLUG_RESOLVE_##side##_##rule(name)
#define GPUPLUG_RESOLVE_plugin_required(name)
#define GPUPLUG_RESOLVE_plugin_optional(name)
#define GPUPLUG_RESOLVE_lifetime_required(name)
#define GPUPLUG_RESOLVE_instance_required(name)
#define GPUPLUG_RESOLVE_instance_optional(name)                                           \
  s.name = offers(t, *abi::find_slot(#name)) ? &Forward<&gpuplug_plugin_v1::name>::call \
                                             : default_##name;
#define GPUPLUG_RESOLVE_instance_together(name) GPUPLUG_RESOLVE_instance_optional(name)
  GPUPLUG_ABI_SLOTS(GPUPLUG_RESOLVE, ~)
  // Without a slot of its own, a retained copy is the plugin's copy_h2d_async: from 1.3 on it
  // stages (which a retained source does not need, but allows); before, it never did.
  if (s.copy_h2d_async_retained == nullptr) s.copy_h2d_async_retained = s.copy_h2d_async;
  if (GPUPLUG_ABI_MINOR(plugin_abi_version) < 3 && offers(t, *abi::find_slot("copy_h2d_async")))
    s.copy_h2d_async = &copy_h2d_async_then_synchronize;
  return s;
}

// ---- the C structs as C++ values ----------------------------------------------------------------

DeviceInfo to_device_info(const gpuplug_device_info_t& d) {
  DeviceInfo info;
  info.ordinal = d.ordinal;
  info.name = support::fixed_string(d.name, sizeof d.name);
  info.uuid = support::fixed_string(d.uuid, sizeof d.uuid);
  info.arch = support::fixed_string(d.arch, sizeof d.arch);
  info.total_memory = d.total_memory;
  info.free_memory = d.free_memory;
  info.compute_units = d.compute_units;
  info.managed_memory = d.managed_memory != 0;
  // Appended field: read only when the plugin's struct reaches it (older plugins: false).
  info.concurrent_managed_access =
      d.struct_size >= offsetof(gpuplug_device_info_t, concurrent_managed_access) +
                           sizeof d.concurrent_managed_access &&
      d.concurrent_managed_access != 0;
  // ABI 1.1 identity: all or nothing, by the struct_size the plugin wrote back (a 1.0 plugin
  // writes at most GPUPLUG_DEVICE_INFO_V1_0_FULL_SIZE and its devices keep the defaults).
  if (d.struct_size < GPUPLUG_DEVICE_INFO_V1_1_SIZE) return info;
  // Values a PCI address cannot hold are not trusted as one: the device then has no address
  // (a selector by pci= cannot match it) rather than a made-up one.
  if (d.has_pci == 1 && d.pci_bus <= 0xff && d.pci_device <= 0x1f &&
      d.pci_function <= 7)
    info.pci = PciAddress{d.pci_domain, d.pci_bus, d.pci_device, d.pci_function};
  info.pci_vendor_id = d.pci_vendor_id <= 0xffff ? d.pci_vendor_id : 0;
  info.pci_device_id = d.pci_device_id <= 0xffff ? d.pci_device_id : 0;
  info.warp_size = d.warp_size;
  info.max_shared_memory_per_block = d.max_shared_memory_per_block;
  info.driver_version = support::fixed_string(d.driver_version, sizeof d.driver_version);
  info.runtime_version = support::fixed_string(d.runtime_version, sizeof d.runtime_version);
  // A class this core does not know (a newer plugin's) reads as unknown.
  info.device_class = d.device_class >= GPUPLUG_DEVICE_CLASS_UNKNOWN &&
                              d.device_class <= GPUPLUG_DEVICE_CLASS_EMULATOR
                          ? static_cast<DeviceClass>(d.device_class)
                          : DeviceClass::unknown;
  info.peak_gflops = d.peak_gflops;
  return info;
}

LedgerStats to_ledger_stats(const gpuplug_ledger_stats_t& s) noexcept {
  LedgerStats out{s.live_bytes,         s.live_count,   s.peak_bytes,
                  s.live_managed_bytes, s.total_allocs, s.total_frees};
  // ABI 1.3's fields, only when the struct_size the plugin wrote back covers it (an older plugin
  // leaves the caller's size and the zeroed field).
  if (s.struct_size >= GPUPLUG_LEDGER_STATS_V1_3_SIZE) {
    out.live_pinned_bytes = s.live_pinned_bytes;
    out.arena_bytes = s.arena_bytes;
  }
  return out;
}

LogLevel to_log_level(gpuplug_log_level_t level) noexcept {
  if (level <= GPUPLUG_LOG_TRACE) return LogLevel::trace;
  if (level >= GPUPLUG_LOG_ERROR) return LogLevel::error;
  return static_cast<LogLevel>(level);
}

}  // namespace gpuplug::detail
