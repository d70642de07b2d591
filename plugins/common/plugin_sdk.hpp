// SPDX-License-Identifier: Apache-2.0
// The plugin SDK: write a vendor as a C++ class; plugin_table<P>() turns it into the C table.
#pragma once

// A plugin author implements two things:
//  1. a class derived from gpuplug::sdk::Device (one instance = one device with its own state),
//     overriding the vendor hooks below; the SDK does the AllocationLedger, the ModuleRegistry
//     (by name, with lazy loading from `modules_dir`), option parsing, range checks, per-thread
//     error messages and logging around them;
//  2. a plugin description struct P with
//        static constexpr const char* name, vendor, version;
//        static void probe(gpuplug_probe_result_t& out);                 // fill reason/count/message
//        static void describe_device(uint32_t ordinal, gpuplug_device_info_t& out);
//        static std::unique_ptr<Device> create(const DeviceConfig& config);
//        static constexpr std::array<std::string_view, N> extra_options;  // keys beyond the common ones
//     and export it with GPUPLUG_DEFINE_PLUGIN(P).
// Hooks report failure by throwing sdk::Failure (see fail()); any other exception becomes
// GPUPLUG_STATUS_INTERNAL. Nothing ever propagates across the C boundary.
// Lifetimes: the table is a constant; plugins keep no static objects with destructors.

#include <gpuplug/abi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpuplug::sdk {

class AllocationLedger;
class ModuleRegistry;

/// The exception plugin code throws to return `status` with `message` across the ABI.
class Failure : public std::runtime_error {
 public:
  Failure(gpuplug_status_t status, std::string message);
  gpuplug_status_t status() const noexcept { return status_; }

 private:
  gpuplug_status_t status_;
};

[[noreturn]] void fail(gpuplug_status_t status, std::string message);

/// Checks a precondition; on failure throws Failure(status, message), which the table adapter
/// turns into the returned status and the calling thread's last_error. Use for argument checks
/// at the top of hooks; the message should name the argument and why it is refused.
#define GPUPLUG_EXPECTS(cond, status, message)                   \
  do {                                                           \
    if (!(cond)) ::gpuplug::sdk::fail((status), (message));      \
  } while (false)

/// "64M" -> 67108864. Accepts decimal digits with an optional K/M/G/T suffix (binary units,
/// optionally followed by "B" or "iB"). Throws Failure(INVALID_ARGUMENT) naming `key`.
std::uint64_t parse_byte_size(std::string_view key, std::string_view text);

/// Options every plugin understands, parsed once at create.
struct DeviceConfig {
  std::uint32_t ordinal = 0;
  std::string plugin_name;                           // P::name, set by the SDK before P::create
  std::optional<std::uint64_t> device_memory_limit;  // "device_memory_limit"
  std::optional<std::filesystem::path> modules_dir;  // "modules_dir"
  std::map<std::string, std::string> options;        // every key=value given, extras included
  const gpuplug_host_services_t* services = nullptr; // may be null (then logging is dropped)
};

/// Parses the options array. Unknown keys (not common, not in `extra_keys`) are a Failure
/// naming the key and listing the known ones.
DeviceConfig parse_config(std::uint32_t ordinal, const gpuplug_option_t* options, std::uint32_t count,
                          const gpuplug_host_services_t* services, std::span<const std::string_view> extra_keys);

/// What a hook returns for a loaded image: an opaque vendor handle (CUmodule, hipModule_t, void*).
using VendorModule = std::uint64_t;

/// One device instance. Derive, override the hooks, let the SDK do the bookkeeping.
/// Thread-safety: hooks are called concurrently from many threads (except from the destructor).
class Device {
 public:
  explicit Device(const DeviceConfig& config);
  virtual ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceConfig& config() const noexcept { return config_; }
  /// Sends a message to the host's log (Boost.Log in the core). Never throws.
  void log(gpuplug_log_level_t level, std::string_view message) const noexcept;

  // ---- vendor hooks: memory. Throw Failure(OUT_OF_MEMORY, ...) when the vendor is out of memory.
  virtual std::uint64_t vendor_alloc(std::uint64_t bytes) = 0;          // bytes > 0
  virtual std::uint64_t vendor_alloc_managed(std::uint64_t bytes);      // default: UNSUPPORTED
  virtual void vendor_free(std::uint64_t ptr, gpuplug_alloc_kind_t kind) = 0;
  virtual void memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) = 0;
  virtual void device_info(gpuplug_device_info_t& out) = 0;

  // ---- vendor hooks: copies and memset (range-checked against the ledger beforehand)
  virtual void copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) = 0;
  virtual void copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) = 0;
  virtual void copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) = 0;
  virtual void copy_h2d_async(std::uint64_t dst, const void* src, std::uint64_t bytes, std::uint64_t stream) = 0;
  virtual void copy_d2h_async(void* dst, std::uint64_t src, std::uint64_t bytes, std::uint64_t stream) = 0;
  virtual void copy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes, std::uint64_t stream) = 0;
  virtual void memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes, std::uint64_t stream) = 0;

  // ---- vendor hooks: streams
  virtual std::uint64_t stream_create() = 0;
  virtual void stream_destroy(std::uint64_t stream) = 0;  // unknown stream: Failure(INVALID_ARGUMENT)
  virtual void stream_synchronize(std::uint64_t stream) = 0;
  virtual void synchronize() = 0;

  // ---- vendor hooks: modules (the SDK's ModuleRegistry owns names and calls these)
  /// Loads image bytes; Failure(INVALID_IMAGE, why) when they do not load.
  virtual VendorModule vendor_load_module(std::string_view name, std::span<const std::byte> image) = 0;
  virtual void vendor_unload_module(VendorModule module) noexcept = 0;
  /// 0 when the module has no such function.
  virtual std::uint64_t vendor_get_function(VendorModule module, const std::string& func) = 0;
  /// Names of the module's kernels, for "not found" messages (may be empty if unknowable).
  virtual std::vector<std::string> vendor_list_functions(VendorModule module) = 0;
  /// {address, size} of a global, nullopt when absent.
  virtual std::optional<std::pair<std::uint64_t, std::uint64_t>> vendor_get_global(VendorModule module,
                                                                                  const std::string& symbol) = 0;
  /// File extensions tried, in order, for `<modules_dir>/<name><ext>` (e.g. {".so"}).
  virtual std::vector<std::string> module_file_extensions() const = 0;

  // ---- vendor hooks: launch (the hot path: no allocation, no lock in the SDK)
  virtual void launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block, std::uint32_t shared_bytes,
                      std::uint64_t stream, void** params) = 0;

  // ---- provided by the SDK (used by the table adapter; plugins may call them too)
  AllocationLedger& ledger() noexcept { return *ledger_; }
  ModuleRegistry& modules() noexcept { return *modules_; }
  /// Synchronizes, unloads every module and sweeps the ledger (warning with count, bytes and
  /// top call sites). Called by `destroy` before the object is deleted; derived destructors
  /// then release the vendor context. Never throws; idempotent.
  void shutdown() noexcept;
  /// The calling thread's last failure message on this device ("" when none).
  void set_last_error(std::string message);
  std::string take_last_error();

 private:
  DeviceConfig config_;
  std::unique_ptr<AllocationLedger> ledger_;
  std::unique_ptr<ModuleRegistry> modules_;
  struct ErrorSlots;
  std::unique_ptr<ErrorSlots> errors_;
  bool shut_down_ = false;
};

namespace detail {
/// What GPUPLUG_DEFINE_PLUGIN gathers from a plugin description struct.
struct PluginHooks {
  const char* name;
  const char* vendor;
  const char* version;
  void (*probe)(gpuplug_probe_result_t&);
  void (*describe_device)(std::uint32_t, gpuplug_device_info_t&);
  std::unique_ptr<Device> (*create)(const DeviceConfig&);
  std::span<const std::string_view> extra_options;
};

// Plugin-level slots, run against one plugin's hooks; each catches everything (plugin_sdk.cpp).
gpuplug_status_t probe_with(const PluginHooks& hooks, gpuplug_probe_result_t* out) noexcept;
gpuplug_status_t describe_with(const PluginHooks& hooks, std::uint32_t ordinal, gpuplug_device_info_t* out) noexcept;
gpuplug_status_t create_with(const PluginHooks& hooks, std::uint32_t ordinal, const gpuplug_option_t* options,
                             std::uint32_t option_count, const gpuplug_host_services_t* services,
                             gpuplug_instance_t* out, char* error, std::size_t error_size) noexcept;
/// Fills every slot that takes an instance (they need no per-plugin state: the instance is a Device).
void fill_instance_slots(gpuplug_plugin_v1& table) noexcept;
/// The table to hand to a host speaking `host_abi_version`: ours (v1.0) in every case; the host
/// refuses it when the majors differ, which names both versions there.
const gpuplug_plugin_v1* negotiate(const gpuplug_plugin_v1* table, std::uint32_t host_abi_version) noexcept;

template <class P>
inline constexpr PluginHooks hooks_of{P::name,   P::vendor, P::version, &P::probe, &P::describe_device,
                                      &P::create, std::span<const std::string_view>(P::extra_options)};

template <class P>
gpuplug_plugin_v1 make_table() noexcept {
  gpuplug_plugin_v1 t{};
  t.struct_size = sizeof(gpuplug_plugin_v1);
  t.abi_version = GPUPLUG_ABI_VERSION;
  t.name = P::name;
  t.vendor = P::vendor;
  t.version = P::version;
  t.probe = [](gpuplug_probe_result_t* out) noexcept { return probe_with(hooks_of<P>, out); };
  t.describe_device = [](std::uint32_t ordinal, gpuplug_device_info_t* out) noexcept {
    return describe_with(hooks_of<P>, ordinal, out);
  };
  t.create = [](std::uint32_t ordinal, const gpuplug_option_t* options, std::uint32_t count,
                const gpuplug_host_services_t* services, gpuplug_instance_t* out, char* error,
                std::size_t error_size) noexcept {
    return create_with(hooks_of<P>, ordinal, options, count, services, out, error, error_size);
  };
  fill_instance_slots(t);
  return t;
}
}  // namespace detail

}  // namespace gpuplug::sdk

/// Exports gpuplug_plugin_entry for plugin description struct P (see the top of this file).
/// The table is a function-local constant with a trivial destructor.
#define GPUPLUG_DEFINE_PLUGIN(P)                                                                  \
  extern "C" GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) { \
    static const gpuplug_plugin_v1 table = ::gpuplug::sdk::detail::make_table<P>();             \
    return ::gpuplug::sdk::detail::negotiate(&table, host_abi_version);                         \
  }
