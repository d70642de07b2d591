// SPDX-License-Identifier: Apache-2.0
// The plugin SDK: write a vendor as a C++ class; GPUPLUG_DEFINE_PLUGIN turns it into the C table.
#pragma once

// clang-format off
// A plugin author implements two things:
//  1. a class derived from gpuplug::sdk::Device (one instance = one device with its own state),
//     overriding the vendor hooks below, each named vendor_* and each only the calls into its
//     driver; the SDK does the bookkeeping around them: the AllocationLedger, the ModuleRegistry
//     (by name, with lazy loading from `modules_dir`, and the globals it resolved), the live
//     streams, option parsing, device and range checks, per-thread error messages and logging;
//  2. a plugin description struct P with
//        static constexpr const char* name, vendor, version;
//        static void probe(gpuplug_probe_result_t& out);        // fill reason/count/message
//        static void describe_device(uint32_t ordinal, gpuplug_device_info_t& out);
//        static std::unique_ptr<Device> create(const DeviceConfig& config);
//        static constexpr std::array<std::string_view, N> extra_options;  // beyond the common keys
//        // optional (ABI 1.1 inspect_module; without it the slot stays null: UNSUPPORTED):
//        static void inspect_module(uint32_t ordinal, std::span<const std::byte> image,
//                                   ModuleInspection& out);
//     and export it with GPUPLUG_DEFINE_PLUGIN(P). probe runs once per process (the SDK keeps
//     its result); describe_device and create are only called for an ordinal below its count.
// Hooks report failure by throwing sdk::Failure (see failure.hpp); any other exception becomes
// GPUPLUG_STATUS_INTERNAL. Nothing ever propagates across the C boundary.
// Lifetimes: the table is a constant; plugins keep no static objects with destructors.
//
// One SDK, every header of the major. The SDK compiles against the current <gpuplug/abi.h> (ABI
// 1.2), against the frozen 1.1 header (tests/abi/v1_1) and against the frozen 1.0 header
// (tests/abi/v1_0/gpuplug/abi.h), which the ABI skew tests put first on the include path to
// build a real 1.0 plugin (tests/abi). The slots it fills come from the one slot list
// (support/gpuplug/support/abi_slots.hpp), whose rows of a minor exist only when the header has
// that minor. Whatever else uses a slot, field or macro that a later minor added (the identity
// fields of gpuplug_device_info_t, gpuplug_native_handles_t, GPUPLUG_PLUGIN_V1_1_SIZE, ...) sits
// inside
//     #if GPUPLUG_ABI_VERSION_MINOR >= 1
//       ... 1.1 only ...
//     #endif
// kept as local as it can be: around the statement that uses it, not around whole hooks, so that
// a vendor hook written for 1.1 (vendor_event_create, ...) still compiles in a 1.0 build; a slot
// function that only a later table points to is then unused, so mark it [[maybe_unused]] (or
// guard it). Built against 1.0, the table ends at sweep_unreleased, and hosts use the defaults of
// docs/architecture.md (ABI-2) for the rest. tests/abi builds the SDK from this target's own
// sources against the frozen headers, so a guard that is missing fails the build there.
// clang-format on

#include <gpuplug/abi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "failure.hpp"
#include "streams.hpp"

namespace gpuplug::support {
class RegularFile;  // gpuplug/support/regular_file.hpp (vendor_load_module_file's argument)
}  // namespace gpuplug::support

namespace gpuplug::sdk {

class AllocationLedger;  // ledger.hpp, installed as <gpuplug/ledger.hpp> (Device::ledger)
class EventSet;  // events.hpp (the SDK's; not installed: vendors reach events through the hooks)
class GraphSet;  // graphs.hpp (the SDK's; not installed: vendors reach graphs through the hooks)
class ModuleRegistry;  // module_registry.hpp, <gpuplug/module_registry.hpp> (Device::modules)
struct SweepResult;

/// "64M" -> 67108864. Accepts decimal digits with an optional K/M/G/T suffix (binary units,
/// optionally followed by "B" or "iB"), or a bare "B". Throws Failure(INVALID_ARGUMENT) naming
/// `key`.
std::uint64_t parse_byte_size(std::string_view key, std::string_view text);

/// The value of `text` when it is decimal digits only (no sign, no space) that fit in 64 bits,
/// else nullopt. For a plugin's own numeric options (e.g. the host's "threads").
std::optional<std::uint64_t> parse_unsigned(std::string_view text) noexcept;

/// Fills a probe result from what a driver loader found: `device_count` counts only when
/// `reason` is AVAILABLE, and `message` (why unavailable, or a summary) is copied, truncated.
void fill_probe(gpuplug_probe_result_t& out, gpuplug_probe_reason_t reason, int device_count,
                std::string_view message) noexcept;

/// The most events `memory_history` may ask for (about 64 bytes each).
inline constexpr std::uint64_t max_memory_history = std::uint64_t{1} << 20;

/// Options every plugin understands, parsed once at create.
struct DeviceConfig {
  std::uint32_t ordinal = 0;
  std::string plugin_name;                            // P::name, set by the SDK before P::create
  std::optional<std::uint64_t> device_memory_limit;   // "device_memory_limit"
  /// "memory_history": how many alloc/free events the ledger keeps (0, the default: none).
  std::size_t memory_history = 0;
  /// "modules_dir": its colon-separated folders, in order, each checked to exist (empty when
  /// the option is not given).
  std::vector<std::filesystem::path> modules_dirs;
  /// Where modules are looked up by name, in order: the built-in folder (default_modules_dir),
  /// then, for each of modules_dirs, its <plugin_name> subfolder (or the folder itself when it
  /// has none: the flat layout). Set by the SDK before P::create.
  std::vector<std::filesystem::path> module_search_path;
  std::map<std::string, std::string> options;         // every key=value given, extras included
  const gpuplug_host_services_t* services = nullptr;  // may be null (then logging is dropped)
};

/// Option keys under this prefix are reserved for options common to every plugin that a later
/// gpuplug may add: parse_config ignores an unknown one (it is only recorded in
/// DeviceConfig::options), so a newer host never breaks an older plugin's create with one.
inline constexpr std::string_view ignorable_option_prefix = "gpuplug.";

/// Parses the options array. Unknown keys (not common, not in `extra_keys`, not under
/// ignorable_option_prefix) are a Failure naming the key and listing the known ones; a key given
/// twice is a Failure naming it.
DeviceConfig parse_config(std::uint32_t ordinal, const gpuplug_option_t* options,
                          std::uint32_t count, const gpuplug_host_services_t* services,
                          std::span<const std::string_view> extra_keys);

/// What a hook returns for a loaded image: an opaque vendor handle (CUmodule, hipModule_t, void*).
using VendorModule = std::uint64_t;

/// A module global as the vendor found it. The SDK's ModuleRegistry records it with its module,
/// so that copies may name it until the module is unloaded.
struct VendorGlobal {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  bool writable = true;  // false for a constant the device cannot write (read-only ELF segments)
};

/// What vendor_native_handles returns (ABI 1.2's gpuplug_native_handles_t without the vendor
/// name, which the SDK fills from the plugin's name).
struct NativeStreamHandles {
  std::int32_t device = 0;
  void* context = nullptr;
  void* stream = nullptr;
};

/// What vendor_alloc_host_mapped returns: page-locked host memory and the device address kernels
/// reach it at (the same value where the driver maps host memory at its own address).
struct MappedHost {
  void* host = nullptr;
  std::uint64_t device = 0;
};

/// What a device may do with a range of device addresses (vendor_owns_range's answer).
enum class Access : std::uint8_t { none, read, read_write };

/// What a plugin's inspect_module hook says of a module image for one device (ABI 1.1, kernel
/// preflight). The SDK writes it into gpuplug_module_inspection_t: every string escaped
/// (support::escape_text: a name from the image cannot forge a list item or reach a terminal),
/// truncated to its field, lists '\n'-separated, ending with "..." where they do not fit.
/// A hook reports an image it cannot parse by throwing Failure(INVALID_IMAGE, why).
struct ModuleInspection {
  bool loadable = false;
  std::string format;                  // "fatbin", "offload bundle", "ELF shared object", ...
  std::string target;                  // the target that loads ("sm_90 (SASS)"); "" when none
  std::vector<std::string> targets;    // every target the image carries
  std::string reason;                  // loadable == false: why none loads
  std::vector<std::string> functions;  // the kernels
  std::vector<std::string> symbols;    // other globals: "name", or "name=value" (4-byte, known)
};

namespace detail {
struct DeviceAccess;  // the SDK's edge (plugin_sdk.cpp): the ledger, registry, errors, sweep
}  // namespace detail

/// One device instance. Derive, override the hooks, let the SDK do the bookkeeping.
///
/// Before a hook runs the SDK has checked its arguments: pointers non-null; every device range of
/// a copy or memset inside a live allocation of the ledger, a module global the registry resolved
/// (writes only to writable ones) or a range vendor_owns_range accepts; stream arguments 0 or
/// live (except launch's); zero-byte copies never reach a hook.
/// Thread-safety: hooks are called concurrently from many threads (except from the destructor).
class Device {
 public:
  explicit Device(const DeviceConfig& config);
  virtual ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceConfig& config() const noexcept { return config_; }
  /// The allocation ledger of this device (<gpuplug/ledger.hpp>): what a hook may ask of it is
  /// `find(address)` (the live allocation holding a device address: {ptr, bytes, kind}),
  /// `counters()` and `live_device_bytes()`. Allocation and free go through the SDK's slots only.
  /// Thread-safe; valid for the device's life.
  const AllocationLedger& ledger() const noexcept { return *ledger_; }
  /// The module registry of this device (<gpuplug/module_registry.hpp>): `has`, `get`,
  /// `get_function`, `get_global`, `global_access`, `names` and `search_path` (loading by name
  /// on first use, as the slots do). Thread-safe; valid for the device's life. A hook must not
  /// call it from vendor_load_module*, vendor_unload_module or vendor_get_* (the registry holds
  /// its lock there).
  ModuleRegistry& modules() noexcept { return *modules_; }
  const ModuleRegistry& modules() const noexcept { return *modules_; }
  /// Sends a message to the host's log (Boost.Log in the core). Never throws.
  void log(gpuplug_log_level_t level, std::string_view message) const noexcept;
  /// The streams this device created and has not destroyed (the SDK keeps the set).
  const StreamSet& streams() const noexcept { return streams_; }
  /// Synchronizes, unloads every module, sweeps the ledger (warning with count, bytes and top
  /// call sites), destroys the streams still open, then the events still live, in that order.
  /// Before all that, a capture still active on a live stream is aborted; after it, the graphs
  /// still live are destroyed.
  /// Called by `destroy` before the object is deleted; derived destructors then release the vendor
  /// context (or call it first themselves when their members must outlive it). Never throws;
  /// idempotent.
  void shutdown() noexcept;

  // ---- vendor hooks: memory. Throw Failure(OUT_OF_MEMORY, ...) when the vendor is out of memory.
  virtual std::uint64_t vendor_alloc(std::uint64_t bytes) = 0;      // bytes > 0
  virtual std::uint64_t vendor_alloc_managed(std::uint64_t bytes);  // default: UNSUPPORTED
  virtual void vendor_free(std::uint64_t ptr, gpuplug_alloc_kind_t kind) = 0;
  virtual void vendor_memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) = 0;
  virtual void vendor_device_info(gpuplug_device_info_t& out) = 0;
  /// What this device may do with [ptr, ptr + bytes) when neither the ledger nor the registry's
  /// globals know it: memory from elsewhere in the process that the driver says is this
  /// device's, or module memory. Default: Access::none (refused). Must not throw for an address
  /// it does not know; bytes > 0 and the range does not wrap.
  virtual Access vendor_owns_range(std::uint64_t ptr, std::uint64_t bytes);

  // ---- vendor hooks: copies and memset (ranges and streams checked beforehand; bytes > 0)
  // The synchronous copies return when the bytes are in place, after the work queued before them.
  virtual void vendor_copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) = 0;
  virtual void vendor_copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) = 0;
  virtual void vendor_copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) = 0;
  // The async copies are optional, as their ABI slots are: the defaults do what abi.h states for
  // a null slot, vendor_stream_synchronize(stream) then the synchronous copy, which keeps stream
  // order at the price of blocking the host. Override them to queue the copy on the stream.
  /// `src` may be reused as soon as the slot returns (ABI 1.3): a vendor whose copy reads pageable
  /// memory later copies the bytes first (CUDA's and HIP's drivers do so themselves, so their
  /// plugins pass the call through). Pinned memory is never staged: see vendor_dma_reads_pinned.
  virtual void vendor_copy_h2d_async(std::uint64_t dst, const void* src, std::uint64_t bytes,
                                     std::uint64_t stream);
  /// True when an async upload from this device's pinned memory (is_pinned) is read after the
  /// hook returns, by a DMA engine (CUDA, HIP): the SDK then waits for the stream after
  /// copy_h2d_async from pinned memory, so that its source is free at return as for any other;
  /// copy_h2d_async_retained does not wait. Default: false (the vendor stages or copies at once).
  virtual bool vendor_dma_reads_pinned() const noexcept { return false; }
  /// The caller keeps `src` until the stream has done the copy: nothing to stage. Default:
  /// vendor_copy_h2d_async.
  virtual void vendor_copy_h2d_async_retained(std::uint64_t dst, const void* src,
                                              std::uint64_t bytes, std::uint64_t stream);
  virtual void vendor_copy_d2h_async(void* dst, std::uint64_t src, std::uint64_t bytes,
                                     std::uint64_t stream);
  virtual void vendor_copy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                                     std::uint64_t stream);
  virtual void vendor_memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                                std::uint64_t stream) = 0;
  // Pitched 2D copies (ABI 1.3 slots copy_*_2d_async): `height` rows of `width` bytes, row r
  // from src + r * src_pitch to dst + r * dst_pitch, ordered on `stream`. Before a hook runs the
  // SDK has checked: width > 0 and height > 0, both pitches >= width, the spanned range of each
  // device side, [p, p + pitch * (height - 1) + width), inside memory of this device (which
  // covers every row; the arithmetic does not wrap), host pointers non-null and the stream 0 or
  // live. The defaults issue one vendor_copy_*_async per row; override them to make one call
  // (cuMemcpy2DAsync). h2d: `src` may be reused as soon as the hook returns (stage it, or let the
  // driver do so; the default holds this when vendor_copy_h2d_async does); d2h: `dst` stays
  // valid until the stream is synchronized.
  virtual void vendor_copy_h2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch,
                                        const void* src, std::uint64_t src_pitch,
                                        std::uint64_t width, std::uint64_t height,
                                        std::uint64_t stream);
  virtual void vendor_copy_d2h_2d_async(void* dst, std::uint64_t dst_pitch, std::uint64_t src,
                                        std::uint64_t src_pitch, std::uint64_t width,
                                        std::uint64_t height, std::uint64_t stream);
  virtual void vendor_copy_d2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch,
                                        std::uint64_t src, std::uint64_t src_pitch,
                                        std::uint64_t width, std::uint64_t height,
                                        std::uint64_t stream);

  // ---- vendor hooks: streams (the SDK's StreamSet keeps the live ones and checks handles)
  /// A new stream's opaque value, never 0.
  virtual std::uint64_t vendor_stream_create() = 0;
  /// A new stream with `flags`, GPUPLUG_STREAM_BLOCKING (0) or GPUPLUG_STREAM_NON_BLOCKING (1:
  /// not ordered with the default stream; the SDK has refused any other value). The default
  /// makes vendor_stream_create's stream whatever the flags: a blocking stream keeps every order
  /// a non-blocking one promises, so it is correct, only slower to overlap default-stream work.
  virtual std::uint64_t vendor_stream_create_flags(std::uint32_t flags);
  /// Waits for the stream's work, then destroys it (the ABI promises the work is done).
  virtual void vendor_stream_destroy(std::uint64_t stream) = 0;
  virtual void vendor_stream_synchronize(std::uint64_t stream) = 0;  // 0: the default stream
  virtual void vendor_synchronize() = 0;

  // ---- vendor hooks: events (ABI 1.1). Optional: the defaults fail UNSUPPORTED ("events are not
  // supported by <plugin>:<ordinal>"), which the host sees as a backend without events. The SDK's
  // EventSet keeps the live events: every event argument is live (created here, not destroyed)
  // and every stream argument 0 or live before a hook runs; elapsed_ms's events were recorded.
  /// A new event's opaque value, never 0.
  virtual std::uint64_t vendor_event_create();
  /// Destroys the event; work it was recorded after still completes.
  virtual void vendor_event_destroy(std::uint64_t event);
  /// Captures the work queued on `stream` so far (0: the legacy default stream).
  virtual void vendor_event_record(std::uint64_t event, std::uint64_t stream);
  /// Work queued on `stream` after this waits for the event's capture; must not block the host.
  virtual void vendor_stream_wait_event(std::uint64_t stream, std::uint64_t event);
  /// Blocks until the capture completes (an event never recorded: at once).
  virtual void vendor_event_synchronize(std::uint64_t event);
  /// True when the capture has completed (never recorded: true); never blocks.
  virtual bool vendor_event_query(std::uint64_t event);
  /// Milliseconds from `start`'s capture to `end`'s; Failure(UNAVAILABLE) when one has not
  /// completed.
  virtual float vendor_event_elapsed_ms(std::uint64_t start, std::uint64_t end);

  // ---- vendor hooks: graphs (ABI 1.3; docs/graphs.md): stream capture and replay. Optional:
  // the defaults fail UNSUPPORTED ("graphs are not supported by <plugin>:<ordinal>"); for
  // abort_capture and is_capturing the SDK's slots turn that into "nothing captures". The SDK's
  // GraphSet keeps the live graphs: every graph argument is live (made by vendor_end_capture,
  // not destroyed) and every stream argument 0 or live before a hook runs; the graphs left at
  // shutdown are destroyed after the streams. `mode` is a GPUPLUG_CAPTURE_MODE_* value (0..2).
  virtual void vendor_begin_capture(std::uint64_t stream, std::int32_t mode);
  /// The instantiated graph's opaque value, never 0.
  virtual std::uint64_t vendor_end_capture(std::uint64_t stream);
  virtual void vendor_graph_launch(std::uint64_t graph, std::uint64_t stream);
  /// Replays already queued complete normally.
  virtual void vendor_graph_destroy(std::uint64_t graph);
  /// Ends and discards a capture `stream` is part of; nothing when none is.
  virtual void vendor_abort_capture(std::uint64_t stream);
  virtual bool vendor_is_capturing(std::uint64_t stream);

  // ---- vendor hooks: interop handles (ABI 1.2; docs/interop.md). Optional: the defaults fail
  // UNSUPPORTED ("native handles are not supported by <plugin>:<ordinal>"). The SDK fills the
  // vendor name (DeviceConfig::plugin_name), keeps imported ranges on the ledger as
  // alloc_external and imported streams in the StreamSet.
  /// The runtime's device ordinal, context and the native stream of `stream` (0 or live).
  virtual NativeStreamHandles vendor_native_handles(std::uint64_t stream);
  /// Refuses memory at [address, address + bytes) that is not this device's: throws
  /// Failure(INVALID_ARGUMENT) naming the address, the device it is on and this one. address is
  /// non-null, the range does not wrap and overlaps nothing on the ledger.
  virtual void vendor_check_import(std::uint64_t address, std::uint64_t bytes);
  /// The stream value (never 0, not live) under which the native stream is known from now on;
  /// Failure(INVALID_ARGUMENT) for one the runtime does not know. `native` is non-null.
  virtual std::uint64_t vendor_import_stream(void* native);
  /// An imported stream leaves the instance (stream_destroy, or destroy): waits for its work and
  /// lets go of it, never destroying the native stream. Default: vendor_stream_synchronize.
  virtual void vendor_forget_stream(std::uint64_t stream);

  // ---- vendor hooks: modules (the SDK's ModuleRegistry owns names and calls these)
  /// Loads image bytes; Failure(INVALID_IMAGE, why) when they do not load.
  virtual VendorModule vendor_load_module(std::string_view name,
                                          std::span<const std::byte> image) = 0;
  /// Loads a module file: one the registry found in a module folder, or the one the
  /// load_module_file slot names. `image` is the whole of `file` (open, read through its
  /// descriptor). Default: vendor_load_module(name, image). The host backend overrides it to
  /// load by path, so that the module keeps its $ORIGIN.
  virtual VendorModule vendor_load_module_file(std::string_view name,
                                               std::span<const std::byte> image,
                                               const support::RegularFile& file);
  virtual void vendor_unload_module(VendorModule module) noexcept = 0;
  /// 0 when the module has no such function.
  virtual std::uint64_t vendor_get_function(VendorModule module, const std::string& func) = 0;
  /// Names of the module's kernels, for "not found" messages (may be empty if unknowable).
  virtual std::vector<std::string> vendor_list_functions(VendorModule module) = 0;
  /// The global `symbol` of `module`, nullopt when absent.
  virtual std::optional<VendorGlobal> vendor_get_global(VendorModule module,
                                                        const std::string& symbol) = 0;
  /// File extensions tried, in order, for `<modules_dir>/<name><ext>` (e.g. {".so"}).
  virtual std::vector<std::string> vendor_module_file_extensions() const = 0;

  // ---- vendor hook: launch (the hot path: no allocation, no lock in the SDK; `stream` unchecked)
  virtual void vendor_launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                             std::uint32_t shared_bytes, std::uint64_t stream, void** params) = 0;

  // ---- vendor hooks: peer copies and pinned host memory (ABI 1.2). The SDK fills the three
  // slots only for a plugin whose description struct declares `static constexpr bool
  // peer_copies = true;` (a null slot is the ABI's default: copy_peer stages through pageable
  // host memory); the defaults here fail UNSUPPORTED.
  /// Queues the copy of `bytes` from `src` on `source` (another device of this plugin: the SDK
  /// has checked its range, and this device's range and `stream`) to `dst` on `stream`.
  virtual void vendor_copy_peer_async(std::uint64_t dst, Device& source, std::uint64_t src,
                                      std::uint64_t bytes, std::uint64_t stream);
  /// Page-locked host memory every device of this plugin copies from and to (bytes > 0);
  /// Failure(OUT_OF_MEMORY) when none is left.
  virtual void* vendor_host_alloc_pinned(std::uint64_t bytes);
  /// Frees what vendor_host_alloc_pinned returned (the SDK knows it did).
  virtual void vendor_host_free_pinned(void* p) noexcept;

  // ---- vendor hooks: mapped host memory and host addresses (ABI 1.3; docs/memory.md). Optional:
  // the defaults fail UNSUPPORTED ("mapped host memory is not supported by <plugin>:<ordinal>").
  // The SDK keeps the mapped allocations on the ledger (alloc_kind_pinned, at their device address)
  // and in its own host-to-device record, checks every pointer against them and frees what is
  // left at sweep and shutdown; the hooks are only the driver's calls.
  /// `bytes` (> 0) of ZEROED page-locked host memory mapped into this device, and its device
  /// address (the vendor calls vendor_host_ptr_to_device itself if it needs to). Failure
  /// (OUT_OF_MEMORY) when the driver has none left.
  virtual MappedHost vendor_alloc_host_mapped(std::uint64_t bytes);
  /// Frees what vendor_alloc_host_mapped returned (the SDK knows it did, and has taken it off the
  /// ledger and its record first).
  virtual void vendor_free_host_mapped(void* host);
  /// The device address the driver gives the start of mapped allocation `host`
  /// (cuMemHostGetDevicePointer, hipHostGetDevicePointer); the SDK adds interior offsets itself.
  virtual std::uint64_t vendor_host_ptr_to_device(void* host);
  /// The host address of `ptr` inside live managed memory (the SDK has checked the ledger holds
  /// it as managed; mapped memory the SDK answers from its record). Default: `ptr` itself (one
  /// address on CUDA, HIP and host); a vendor whose host sees managed memory elsewhere overrides it.
  virtual void* vendor_host_address(std::uint64_t ptr);

  // ---- provided by the SDK (device.cpp): what the table's slots do around the vendor hooks.
  // A vendor has no need to call them; they are safe to call (the bookkeeping is theirs).
  /// alloc / alloc_managed / alloc_arena: reserves, calls the vendor (vendor_alloc for device
  /// memory and arenas, vendor_alloc_managed), records. A zero-byte request still gets
  /// a distinct, freeable pointer (the vendor is asked for one byte, the ledger records zero).
  std::uint64_t allocate(std::uint64_t bytes, const char* site, gpuplug_alloc_kind_t kind);
  /// free: out of the ledger first (the ordering rule), then vendor_free; an imported range
  /// (alloc_external) only leaves the ledger. An arena is refused (free_arena frees it).
  void release(std::uint64_t ptr);
  /// free_arena (ABI 1.3): an arena (allocate with alloc_kind_arena: vendor_alloc's memory) out
  /// of the ledger, then vendor_free as device memory; anything else is refused, named.
  void release_arena(std::uint64_t ptr);
  /// import_memory: checks the range (non-null, no wrap, nothing on the ledger overlaps it),
  /// asks vendor_check_import, then records it as alloc_external under `site`. Returns the
  /// pointer, which is the address.
  std::uint64_t import_range(std::uint64_t address, std::uint64_t bytes, const char* site);
  /// native_pointer: the address of `ptr` when it lies in a live allocation, an imported range,
  /// a module global or memory vendor_owns_range accepts; Failure(INVALID_ARGUMENT) naming it.
  void* native_address(std::uint64_t ptr);
  /// memory_info: the vendor's figures, capped by device_memory_limit when one is set.
  void memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes);
  /// host_alloc_pinned / host_free_pinned: the vendor's memory, kept in a per-device set so that
  /// a pointer this device did not return is refused (INVALID_ARGUMENT) and shutdown frees what
  /// is left (warning).
  void* alloc_pinned(std::uint64_t bytes);
  void free_pinned(void* p);
  /// True when [p, p + bytes) lies in page-locked memory this device handed out and has not
  /// freed (host_alloc_pinned, alloc_host_mapped): what a DMA engine reads after an async upload
  /// returns (vendor_dma_reads_pinned). Thread-safe; never throws.
  bool is_pinned(const void* p, std::uint64_t bytes) const noexcept;
  /// alloc_host_mapped / free_host_mapped / host_ptr_to_device / host_address (mapped.cpp): the
  /// ledger entry (alloc_kind_pinned at the device address, under `site`) and the host-to-device
  /// record around the vendor hooks; a pointer not from this device is Failure(INVALID_ARGUMENT)
  /// naming it.
  MappedHost alloc_mapped(std::uint64_t bytes, const char* site);
  void free_mapped(void* host);
  std::uint64_t mapped_device_address(const void* host);
  void* host_address_of(std::uint64_t ptr);
  /// Refuses a null `ptr`, a range that wraps, an overrun of the live allocation `ptr` lies in,
  /// and a range that is not memory of this device (asking the ledger, then the registry's
  /// globals, then vendor_owns_range), or read-only memory when `write`. Failure(INVALID_ARGUMENT)
  /// naming `op` and `role`.
  void check_range(const char* op, const char* role, std::uint64_t ptr, std::uint64_t bytes,
                   bool write);

 private:
  friend struct detail::DeviceAccess;

  /// sweep_unreleased: synchronizes (a failure is logged), then frees what the ledger holds.
  SweepResult sweep_unreleased();
  void synchronize_or_warn(const char* op) noexcept;
  SweepResult sweep_allocations() noexcept;  // every live allocation through vendor_free
  /// The calling thread's last failure message on this device ("" when none).
  void set_last_error(std::string message);
  std::string take_last_error();

  DeviceConfig config_;
  std::unique_ptr<AllocationLedger> ledger_;
  std::unique_ptr<ModuleRegistry> modules_;
  StreamSet streams_;
  std::unique_ptr<EventSet> events_;
  std::unique_ptr<GraphSet> graphs_;
  struct ErrorSlots;
  std::unique_ptr<ErrorSlots> errors_;
  struct PinnedSet;
  std::unique_ptr<PinnedSet> pinned_;
  struct MappedSet;  // mapped_set.hpp
  std::unique_ptr<MappedSet> mapped_;
  /// The sweep's free of a mapped allocation the ledger held at `device` (mapped.cpp).
  void free_swept_mapped(std::uint64_t device);
  bool shut_down_ = false;
};

}  // namespace gpuplug::sdk

// GPUPLUG_DEFINE_PLUGIN and the table it builds.
#include "plugin_entry.hpp"
