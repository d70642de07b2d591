// SPDX-License-Identifier: Apache-2.0
// PluginBackend (core-private): the GpuBackend that forwards every operation to a plugin's C table.
#pragma once

#include <gpuplug/abi.h>

#include <gpuplug/backend.hpp>
#include <memory>
#include <string>

#include "import_callbacks.hpp"
#include "layer_catalog.hpp"
#include "plugin_table.hpp"

namespace boost::dll {
class shared_library;
}  // namespace boost::dll

namespace gpuplug::detail {

/// One plugin instance (one device). Keeps the plugin library loaded for as long as it lives.
/// Thread-safety: as GpuBackend (the plugin's slots are thread-safe by the ABI's contract).
class LayerStack;

class PluginBackend final : public GpuBackend {
 public:
  /// Calls table.create(ordinal, options, services), then stacks the layers `options` (or
  /// GPUPLUG_LAYERS) enables from `layers` over the instance (docs/layers.md); the plugin never
  /// sees "layers" or a layer's option keys. Throws Error(status, "<plugin>:<ordinal>", "create",
  /// <why>) when the plugin or a layer refuses, Error(invalid_argument, ..., "create", ...) for
  /// a layers option that names no known layer; nothing is left created.
  PluginBackend(std::shared_ptr<const boost::dll::shared_library> library,
                const gpuplug_plugin_v1& table, std::uint32_t ordinal, const Options& options,
                const LayerCatalog& layers = LayerCatalog());
  /// Releases the OpCache (failures logged, through the layers), then destroys the layers, top
  /// first, then the plugin instance. Never throws.
  ~PluginBackend() override;

  std::string_view name() const noexcept override { return name_; }
  std::string_view plugin_name() const noexcept override { return plugin_name_; }
  std::uint32_t ordinal() const noexcept override { return ordinal_; }

  DevicePtr alloc(std::size_t bytes, const char* site) override;
  DevicePtr alloc_managed(std::size_t bytes, const char* site) override;
  void free(DevicePtr p) override;
  void copy_h2d(DevicePtr dst, const void* src, std::size_t bytes) override;
  void copy_d2h(void* dst, DevicePtr src, std::size_t bytes) override;
  void copy_d2d(DevicePtr dst, DevicePtr src, std::size_t bytes) override;
  void copy_h2d_async(DevicePtr dst, const void* src, std::size_t bytes, Stream stream) override;
  void copy_d2h_async(void* dst, DevicePtr src, std::size_t bytes, Stream stream) override;
  void copy_d2d_async(DevicePtr dst, DevicePtr src, std::size_t bytes, Stream stream) override;
  void memset(DevicePtr dst, std::uint8_t value, std::size_t bytes, Stream stream) override;
  Stream create_stream() override;
  void destroy_stream(Stream stream) override;
  void synchronize(Stream stream) override;
  void synchronize() override;
  Event create_event() override;
  void destroy_event(Event event) override;
  void record(Event event, Stream stream) override;
  void wait(Stream stream, Event event) override;
  void synchronize(Event event) override;
  bool query(Event event) override;
  float elapsed_ms(Event start, Event end) override;
  void load_module(std::string_view name, std::span<const std::byte> image) override;
  void unload_module(std::string_view name) override;
  bool has_module(std::string_view name) override;
  KernelHandle kernel(std::string_view module, std::string_view func) override;
  std::optional<DeviceSymbol> device_symbol(std::string_view module,
                                            std::string_view symbol) override;
  void launch(KernelHandle f, Dim3 grid, Dim3 block, std::uint32_t shared_bytes, Stream stream,
              void** params) override;
  MemoryInfo memory_info() override;
  DeviceInfo device_info() override;
  LedgerStats ledger_stats() override;
  std::string alloc_report(std::size_t top_n) override;
  LedgerStats sweep_unreleased() override;
  void reset_peak() override;
  // Interop handles (plugin_backend_interop.cpp): the ABI 1.2 slots or their defaults.
  NativeHandles native(Stream stream) override;
  void* native_pointer(DevicePtr ptr) override;
  DevicePtr import_memory(void* native, std::size_t bytes, std::function<void()> on_release,
                          std::string_view site) override;
  Stream import_stream(void* native_stream) override;

  /// "validate, trace": the layers this backend runs with, top first; "" when none.
  std::string layer_names() const;
  /// True when the built-in validate layer is among them: the OpCaches bound to this backend
  /// then also check that `release` has the cache to itself (docs/layers.md, "validate").
  bool validates() const noexcept { return validates_; }

  // For the optional-slot thunks and defaults: the top level's table and instance (the plugin's
  // when no layer is enabled).
  const gpuplug_plugin_v1& table() const noexcept { return table_; }
  gpuplug_instance_t instance() const noexcept { return instance_; }
  /// Throws Error(status, name(), operation, <plugin's last_error>) unless status is success; the
  /// message does not repeat the operation even when the plugin's does.
  void check(gpuplug_status_t status, std::string_view operation) const {
    if (status != GPUPLUG_STATUS_SUCCESS) [[unlikely]]
      throw_status(status, operation);
  }
  [[noreturn]] void throw_status(gpuplug_status_t status, std::string_view operation) const;

 protected:
  /// The plugin's load_module_file slot with the path, or the default (read + load_module).
  void load_module_path(std::string_view name, const std::filesystem::path& file) override;
  // Memory you can see (plugin_backend_memory.cpp): the ABI 1.2 slots or their defaults.
  MemorySnapshot ledger_snapshot() override;
  std::uint64_t begin_memory_scope() override;
  MemoryScopeResult end_memory_scope(std::uint64_t scope) override;

 private:
  static void log_callback(void* user, gpuplug_log_level_t level, const char* message);
  /// gpuplug_layer_services_t::set_error: the message of the failure a layer returns next on
  /// this thread, which last_error() reports once instead of the plugin's.
  static void set_error_callback(void* user, const char* message);
  /// The message of this thread's last failure: a layer's (set_error) when one set it, else the
  /// plugin's last_error slot (through the layers). Reading a layer's message clears it.
  std::string last_error() const;
  /// alloc's cold path after OUT_OF_MEMORY: the report and the observer
  /// (GpuBackend::out_of_memory).
  [[gnu::cold]] DevicePtr alloc_out_of_memory(std::size_t bytes, const char* site);
  std::string c_name(std::string_view name, const char* op, const char* what) const;
  /// Runs the on_release callbacks `imports_` still holds after the plugin forgot every range
  /// (`when`: "sweep_unreleased", "destroy"), warning with their count. Never throws: a callback
  /// that throws is logged.
  void release_all_imports(const char* when) noexcept;
  /// Refuses the null event before the plugin sees it, naming `operation` and the role.
  void check_event(Event event, const char* operation, const char* role = "event") const;

  // Order matters: the library is declared first so it is released last, after the instance.
  std::shared_ptr<const boost::dll::shared_library> library_;
  gpuplug_plugin_v1 table_;
  OptionalSlots optional_;
  std::string plugin_name_;
  std::uint32_t ordinal_;
  std::string name_;                  // "<plugin>:<ordinal>"; the log channel of the plugin
  gpuplug_host_services_t services_;  // must stay valid until destroy returns
  gpuplug_instance_t instance_ = nullptr;
  // With layers: table_ and instance_ are the top layer's; the plugin's own are kept for destroy.
  gpuplug_layer_services_t layer_services_{};  // must stay valid until the layers are destroyed
  std::unique_ptr<LayerStack> layers_;
  void (*plugin_destroy_)(gpuplug_instance_t) = nullptr;
  gpuplug_instance_t plugin_instance_ = nullptr;
  bool validates_ = false;
  ImportCallbacks imports_;  // import_memory's on_release, run by free, sweep and destroy
};

}  // namespace gpuplug::detail
