// SPDX-License-Identifier: Apache-2.0
// PluginBackend (core-private): the GpuBackend that forwards every operation to a plugin's C table.
#pragma once

#include <gpuplug/abi.h>

#include <atomic>

#include <gpuplug/backend.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "launch/kernel_signatures.hpp"
#include "table/import_callbacks.hpp"
#include "layers/layer_catalog.hpp"
#include "table/plugin_table.hpp"

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
  std::uint64_t device_free_memory() override;
  void copy_h2d_async_retained(DevicePtr dst, const void* src, std::size_t bytes,
                               Stream stream) override;
  void copy_d2h_async(void* dst, DevicePtr src, std::size_t bytes, Stream stream) override;
  void copy_d2d_async(DevicePtr dst, DevicePtr src, std::size_t bytes, Stream stream) override;
  // Pitched 2D copies (plugin_backend_pitched.cpp): the plugin's 1.3 slot, or one 1D async
  // copy per row where it has none.
  void copy_h2d_2d_async(DevicePtr dst, std::size_t dst_pitch, const void* src,
                         std::size_t src_pitch, std::size_t width_bytes, std::size_t height,
                         Stream stream) override;
  void copy_d2h_2d_async(void* dst, std::size_t dst_pitch, DevicePtr src, std::size_t src_pitch,
                         std::size_t width_bytes, std::size_t height, Stream stream) override;
  void copy_d2d_2d_async(DevicePtr dst, std::size_t dst_pitch, DevicePtr src,
                         std::size_t src_pitch, std::size_t width_bytes, std::size_t height,
                         Stream stream) override;
  void memset(DevicePtr dst, std::uint8_t value, std::size_t bytes, Stream stream) override;
  Stream create_stream() override;
  Stream create_stream(StreamFlags flags) override;
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
  // Graphs (plugin_backend_graphs.cpp): the ABI 1.3 graph slots or their defaults.
  void begin_capture(Stream stream, CaptureMode mode) override;
  Graph end_capture(Stream stream) override;
  void launch_graph(Graph graph, Stream stream) override;
  void destroy_graph(Graph graph) override;
  void abort_capture_if_active(Stream stream) noexcept override;
  bool stream_is_capturing(Stream stream) override;
  void load_module(std::string_view name, std::span<const std::byte> image) override;
  void unload_module(std::string_view name) override;
  bool has_module(std::string_view name) override;
  KernelHandle kernel(std::string_view module, std::string_view func) override;
  std::optional<DeviceSymbol> device_symbol(std::string_view module,
                                            std::string_view symbol) override;
  using GpuBackend::launch;
  void launch(KernelHandle f, Dim3 grid, Dim3 block, std::uint32_t shared_bytes, Stream stream,
              void** params) override;
  const KernelSignature* kernel_signature(KernelHandle f) const noexcept override;
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
  // Arenas (plugin_backend_memory.cpp): the plugin's 1.3 slots, or unsupported.
  DevicePtr alloc_arena(std::size_t bytes, const char* site) override;
  void free_arena(DevicePtr p) override;
  // Mapped host memory and host addresses (plugin_backend_mapped.cpp): the ABI 1.3 slots or their
  // defaults.
  void* alloc_host_pinned(std::size_t bytes, const char* site) override;
  void free_host_pinned(void* p) override;
  DevicePtr host_ptr_to_device(const void* p) override;
  void* host_address(DevicePtr ptr) override;

  // ---- ABI 1.2 peer copies (core/peer_copy.cpp, docs/interop.md) ----
  /// True when `src` comes from the same loaded plugin as this backend (the plugin's own
  /// copy_peer_async is the same function) and that plugin has the slot.
  bool has_peer_copy_from(const PluginBackend& src) const noexcept {
    return plugin_copy_peer_ != nullptr && plugin_copy_peer_ == src.plugin_copy_peer_;
  }
  /// Queues the plugin's peer copy from `src_ptr` on `src` to `dst` on `stream` of this backend.
  /// Precondition: has_peer_copy_from(src). Throws the plugin's Error for "copy_peer_async".
  void copy_peer_async(DevicePtr dst, const PluginBackend& src, DevicePtr src_ptr,
                       std::size_t bytes, Stream stream);
  /// True when the plugin allocates page-locked host memory (host_alloc_pinned).
  bool has_pinned_memory() const noexcept { return optional_.host_alloc_pinned != nullptr; }
  /// `bytes` of page-locked host memory: a buffer of exactly that size kept from an earlier
  /// copy, else a new one (a vendor's pinned allocation costs milliseconds, far more than a
  /// chunk's copy). Precondition: has_pinned_memory(). Throws the plugin's Error (out_of_memory
  /// when none is left).
  void* take_pinned(std::size_t bytes);
  /// Gives back what take_pinned returned: kept for the next copy (at most kKeptPinned buffers),
  /// else freed (a failure is logged: it runs in destructors). Everything kept is freed before
  /// the instance is destroyed.
  void give_back_pinned(void* p, std::size_t bytes) noexcept;
  static constexpr std::size_t kKeptPinned = 4;

  /// "validate, trace": the layers this backend runs with, top first; "" when none.
  std::string layer_names() const;
  /// True when the built-in validate layer is among them: the OpCaches bound to this backend
  /// then also check that `release` has the cache to itself (docs/layers.md, "validate").
  bool validates() const noexcept { return validates_; }
  /// GpuBackend::scan_redzones: the validate layer's broken guard bands now; 0 without it.
  /// Throws Error naming "scan_redzones" when they cannot be read back.
  std::size_t scan_guard_bands();

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
  /// Frees pinned memory now (host_free_pinned); a failure is logged.
  void free_pinned(void* p) noexcept;

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
  enum class AllocOp : std::uint8_t { alloc, alloc_managed, alloc_arena };
  [[gnu::cold]] DevicePtr alloc_out_of_memory(std::size_t bytes, const char* site, AllocOp op);
  /// The plugin's slot for `op` (the retry of alloc_out_of_memory calls it again).
  gpuplug_status_t call_alloc(AllocOp op, std::size_t bytes, const char* site, std::uint64_t* out);
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
  // The plugin's own copy_peer_async (never a layer's): which plugin made this backend, for
  // has_peer_copy_from. Null when the plugin has none.
  decltype(gpuplug_plugin_v1::copy_peer_async) plugin_copy_peer_ = nullptr;
  // Pinned staging buffers kept between copies (take_pinned / give_back_pinned): this backend's,
  // freed through its own instance.
  std::mutex pinned_mutex_;
  std::vector<std::pair<void*, std::size_t>> kept_pinned_;
  KernelSignatures signatures_;  // `<func>_args` of every kernel resolved, by handle
  bool validates_ = false;
  gpuplug_instance_t validate_instance_ = nullptr;  // the validate layer's level, when enabled
  // memory_info's integrated-GPU rule: whether device_memory_limit was given (then the limit is
  // the budget), and the device's class, asked once.
  bool memory_limited_ = false;
  std::atomic<int> integrated_{-1};  // -1: not asked yet; then 0 or 1
  bool integrated();
  ImportCallbacks imports_;  // import_memory's on_release, run by free, sweep and destroy
};

}  // namespace gpuplug::detail
