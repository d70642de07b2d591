// SPDX-License-Identifier: Apache-2.0
// The plugin table: copy, v1 contract checks, optional slots with the defaults abi.h states, and
// the C structs as C++ values.
#include "plugin_table.hpp"

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

#include "plugin_backend.hpp"

namespace gpuplug::detail {

namespace {

/// The required slots of the v1 table, by name; a null one makes the plugin unusable.
std::string first_missing_slot(const gpuplug_plugin_v1& t) {
  const std::array<std::pair<const char*, bool>, 24> slots{{
      {"probe", t.probe != nullptr},
      {"describe_device", t.describe_device != nullptr},
      {"create", t.create != nullptr},
      {"destroy", t.destroy != nullptr},
      {"last_error", t.last_error != nullptr},
      {"alloc", t.alloc != nullptr},
      {"free", t.free != nullptr},
      {"memory_info", t.memory_info != nullptr},
      {"device_info", t.device_info != nullptr},
      {"copy_h2d", t.copy_h2d != nullptr},
      {"copy_d2h", t.copy_d2h != nullptr},
      {"copy_d2d", t.copy_d2d != nullptr},
      {"memset_d8", t.memset_d8 != nullptr},
      {"stream_create", t.stream_create != nullptr},
      {"stream_destroy", t.stream_destroy != nullptr},
      {"stream_synchronize", t.stream_synchronize != nullptr},
      {"synchronize", t.synchronize != nullptr},
      {"load_module", t.load_module != nullptr},
      {"has_module", t.has_module != nullptr},
      {"get_function", t.get_function != nullptr},
      {"get_global", t.get_global != nullptr},
      {"launch", t.launch != nullptr},
      {"ledger_stats", t.ledger_stats != nullptr},
      {"sweep_unreleased", t.sweep_unreleased != nullptr},
  }};
  for (const auto& [name, present] : slots) {
    if (!present) return name;
  }
  return {};
}

// ---- optional slots: forwarding thunks and the defaults abi.h states ----------------------------

template <auto Slot, class... A>
gpuplug_status_t forward(const PluginBackend& b, A... args) {
  return (b.table().*Slot)(b.instance(), args...);
}

std::size_t forward_report(const PluginBackend& b, std::uint32_t top_n, char* buf,
                           std::size_t size) {
  return b.table().ledger_report(b.instance(), top_n, buf, size);
}

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
                                                          "copy_h2d_async (stream_synchronize)");
}

gpuplug_status_t default_copy_d2h_async(const PluginBackend& b, void* dst, std::uint64_t src,
                                        std::uint64_t bytes, std::uint64_t stream) {
  return default_copy_async<&gpuplug_plugin_v1::copy_d2h>(b, dst, src, bytes, stream,
                                                          "copy_d2h_async (stream_synchronize)");
}

gpuplug_status_t default_copy_d2d_async(const PluginBackend& b, std::uint64_t dst,
                                        std::uint64_t src, std::uint64_t bytes,
                                        std::uint64_t stream) {
  return default_copy_async<&gpuplug_plugin_v1::copy_d2d>(b, dst, src, bytes, stream,
                                                          "copy_d2d_async (stream_synchronize)");
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
  unsupported(b, "memory scope");
}

gpuplug_status_t default_ledger_scope_end(const PluginBackend& b, std::uint64_t, std::uint64_t*,
                                          std::int64_t*) {
  unsupported(b, "memory scope");
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

std::size_t forward_snapshot(const PluginBackend& b, char* buf, std::size_t size) {
  return b.table().ledger_snapshot(b.instance(), buf, size);
}

// A plugin without load_module_file (older than the slot, or one that keeps it null): the core
// reads the file, as it did before the slot existed, and hands the plugin the bytes.
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

template <class Fn>
void pick(Fn& slot, bool present, std::type_identity_t<Fn> forwarding,
          std::type_identity_t<Fn> fallback) {
  slot = present ? forwarding : fallback;
}

}  // namespace

std::string abi_version_text(std::uint32_t v) {
  return std::to_string(GPUPLUG_ABI_MAJOR(v)) + "." + std::to_string(GPUPLUG_ABI_MINOR(v));
}

std::size_t known_table_size(const gpuplug_plugin_v1& published) noexcept {
  // ABI-3: no further than struct_size, no further than this core's table (a later minor's extra
  // slots are not ours to read, ABI-1), and no further than the version the table declares: a
  // 1.0 table ends at load_module_file even when its struct_size says more, so that a plugin
  // that answers "1.0" with a 1.1-sized table (a wrong size, as PJRT shipped twice) is never
  // called through an event or inspect_module slot it did not promise.
  std::size_t n = std::min<std::size_t>(published.struct_size, sizeof(gpuplug_plugin_v1));
  if (GPUPLUG_ABI_MAJOR(published.abi_version) == GPUPLUG_ABI_VERSION_MAJOR &&
      GPUPLUG_ABI_MINOR(published.abi_version) == 0)
    n = std::min<std::size_t>(n, GPUPLUG_PLUGIN_V1_0_SIZE);
  // Likewise a 1.1 table ends at inspect_module: no memory slot of 1.2 is read from it.
  if (GPUPLUG_ABI_MAJOR(published.abi_version) == GPUPLUG_ABI_VERSION_MAJOR &&
      GPUPLUG_ABI_MINOR(published.abi_version) == 1)
    n = std::min<std::size_t>(n, GPUPLUG_PLUGIN_V1_1_SIZE);
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
  const std::string slot = first_missing_slot(table);
  if (slot.empty()) return std::nullopt;
  return Refusal{PluginReason::abi_mismatch, "plugin table breaks ABI " +
                                                 abi_version_text(GPUPLUG_ABI_VERSION) +
                                                 ": required slot '" + slot + "' is null"};
}

// The one place where optional slots are null-checked.
OptionalSlots resolve_optional_slots(const gpuplug_plugin_v1& t) noexcept {
  using T = gpuplug_plugin_v1;
  OptionalSlots s{};
  pick(s.alloc_managed, t.alloc_managed != nullptr, &forward<&T::alloc_managed>,
       &default_alloc_managed);
  pick(s.copy_h2d_async, t.copy_h2d_async != nullptr, &forward<&T::copy_h2d_async>,
       &default_copy_h2d_async);
  pick(s.copy_d2h_async, t.copy_d2h_async != nullptr, &forward<&T::copy_d2h_async>,
       &default_copy_d2h_async);
  pick(s.copy_d2d_async, t.copy_d2d_async != nullptr, &forward<&T::copy_d2d_async>,
       &default_copy_d2d_async);
  pick(s.unload_module, t.unload_module != nullptr, &forward<&T::unload_module>,
       &default_unload_module);
  pick(s.ledger_report, t.ledger_report != nullptr, &forward_report, &default_ledger_report);
  // Appended after the first release: copy_table zeroed it when struct_size ends before it.
  pick(s.load_module_file, t.load_module_file != nullptr, &forward<&T::load_module_file>,
       &default_load_module_file);
  // ABI 1.1, appended: zero in the copy of a 1.0 table. All seven or none: a plugin that fills
  // only some of them has no usable events (a wait without a record cannot work), so a partial
  // set is treated as none rather than failing later, operation by operation.
  const bool events = t.event_create != nullptr && t.event_destroy != nullptr &&
                      t.event_record != nullptr && t.stream_wait_event != nullptr &&
                      t.event_synchronize != nullptr && t.event_query != nullptr &&
                      t.event_elapsed_ms != nullptr;
  pick(s.event_create, events, &forward<&T::event_create>, &default_event_create);
  pick(s.event_destroy, events, &forward<&T::event_destroy>, &default_event_destroy);
  pick(s.event_record, events, &forward<&T::event_record>, &default_event_record);
  pick(s.stream_wait_event, events, &forward<&T::stream_wait_event>, &default_stream_wait_event);
  pick(s.event_synchronize, events, &forward<&T::event_synchronize>, &default_event_synchronize);
  pick(s.event_query, events, &forward<&T::event_query>, &default_event_query);
  pick(s.event_elapsed_ms, events, &forward<&T::event_elapsed_ms>, &default_event_elapsed_ms);
  // ABI 1.2, appended: zero in the copy of a 1.0 or 1.1 table. The snapshot stays null without
  // the slot (PluginBackend then builds a partial one from ledger_stats); the scope slots come
  // as a pair.
  s.ledger_snapshot = t.ledger_snapshot != nullptr ? &forward_snapshot : nullptr;
  pick(s.ledger_reset_peak, t.ledger_reset_peak != nullptr, &forward<&T::ledger_reset_peak>,
       &default_ledger_reset_peak);
  const bool scopes = t.ledger_scope_begin != nullptr && t.ledger_scope_end != nullptr;
  pick(s.ledger_scope_begin, scopes, &forward<&T::ledger_scope_begin>,
       &default_ledger_scope_begin);
  pick(s.ledger_scope_end, scopes, &forward<&T::ledger_scope_end>, &default_ledger_scope_end);
  // ABI 1.2 interop handles, each on its own (a plugin may offer handles without import).
  pick(s.native_handles, t.native_handles != nullptr, &forward<&T::native_handles>,
       &default_native_handles);
  pick(s.native_pointer, t.native_pointer != nullptr, &forward<&T::native_pointer>,
       &default_native_pointer);
  pick(s.import_memory, t.import_memory != nullptr, &forward<&T::import_memory>,
       &default_import_memory);
  pick(s.import_stream, t.import_stream != nullptr, &forward<&T::import_stream>,
       &default_import_stream);
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
  return LedgerStats{s.live_bytes,         s.live_count,   s.peak_bytes,
                     s.live_managed_bytes, s.total_allocs, s.total_frees};
}

LogLevel to_log_level(gpuplug_log_level_t level) noexcept {
  if (level <= GPUPLUG_LOG_TRACE) return LogLevel::trace;
  if (level >= GPUPLUG_LOG_ERROR) return LogLevel::error;
  return static_cast<LogLevel>(level);
}

}  // namespace gpuplug::detail
