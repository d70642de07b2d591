// SPDX-License-Identifier: Apache-2.0
// HipDevice: one AMD GPU as a gpuplug backend instance (memory, copies, streams, modules, launch).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capture_uploads.hpp"
#include "driver.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::hip {

/// The runtime's stream behind the ABI's opaque value (0: the null stream).
inline hipStream_t as_stream(std::uint64_t stream) noexcept {
  return reinterpret_cast<hipStream_t>(stream);
}

// ---- identity and properties (identity.cpp)

/// Fills `out` for device `ordinal` (which the SDK has checked): name, UUID, gcnArchName, memory,
/// CUs, managed memory. The free-memory query needs the device current, so it is made current on
/// the calling thread for the call and the thread's previous device restored. Throws sdk::Failure.
void describe(const DriverApi& hip, int ordinal, gpuplug_device_info_t& out);
/// The device's gcnArchName ("gfx942:sramecc+:xnack-"), "" when the runtime's answer does not
/// look like one. Throws sdk::Failure on a runtime error. (Kernel preflight, inspect.cpp.)
std::string device_arch(const DriverApi& hip, int ordinal);
/// hipDeviceGetAttribute(which) of device `ordinal`. Throws sdk::Failure naming the attribute
/// (`name`) and the device.
int device_attribute(const DriverApi& hip, hipDeviceAttribute_t which, const char* name,
                     int ordinal);
/// "operation(device N)": how a message names a runtime call on one device.
std::string with_ordinal(const char* operation, int ordinal);

/// One device with its own streams, modules and ledger (the SDK's); this class is only the calls
/// into the runtime. Device addresses the ledger and the module globals do not know are accepted
/// only when hipPointerGetAttributes says they are memory of this device (and, where the runtime
/// has hipMemGetAddressRange, the whole range lies in that allocation).
/// Thread-safety: every hook may run concurrently from many threads; each makes the device current
/// on its calling thread first (HIP's current device is per thread), so callers need no HIP calls
/// of their own.
class HipDevice final : public sdk::Device {
 public:
  /// Opens device `config.ordinal` (which the SDK has checked). Throws sdk::Failure.
  HipDevice(const sdk::DeviceConfig& config, const DriverApi& hip);

  // memory
  std::uint64_t vendor_alloc(std::uint64_t bytes) override;
  /// UNSUPPORTED unless hipDeviceAttributeManagedMemory is 1; warns once per backend when XNACK
  /// is off, since managed pages then do not migrate on GPU page faults.
  std::uint64_t vendor_alloc_managed(std::uint64_t bytes) override;
  void vendor_free(std::uint64_t ptr, gpuplug_alloc_kind_t kind) override;
  void vendor_memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) override;
  void vendor_device_info(gpuplug_device_info_t& out) override;
  sdk::Access vendor_owns_range(std::uint64_t ptr, std::uint64_t bytes) override;

  // copies and memset
  void vendor_copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) override;
  void vendor_copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) override;
  void vendor_copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) override;
  bool vendor_dma_reads_pinned() const noexcept override { return true; }
  // During a capture an upload's source is staged (stage_for_capture); a retained one is not.
  void vendor_copy_h2d_async(std::uint64_t dst, const void* src, std::uint64_t bytes,
                             std::uint64_t stream) override;
  void vendor_copy_h2d_async_retained(std::uint64_t dst, const void* src, std::uint64_t bytes,
                                      std::uint64_t stream) override;
  void vendor_copy_d2h_async(void* dst, std::uint64_t src, std::uint64_t bytes,
                             std::uint64_t stream) override;
  void vendor_copy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                             std::uint64_t stream) override;
  void vendor_memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                        std::uint64_t stream) override;
  // pitched 2D copies (ABI 1.3; pitched.cpp): one hipMemcpy2DAsync each, or the SDK's one copy
  // per row when the runtime lacks it
  void vendor_copy_h2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch, const void* src,
                                std::uint64_t src_pitch, std::uint64_t width,
                                std::uint64_t height, std::uint64_t stream) override;
  void vendor_copy_d2h_2d_async(void* dst, std::uint64_t dst_pitch, std::uint64_t src,
                                std::uint64_t src_pitch, std::uint64_t width,
                                std::uint64_t height, std::uint64_t stream) override;
  void vendor_copy_d2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch, std::uint64_t src,
                                std::uint64_t src_pitch, std::uint64_t width,
                                std::uint64_t height, std::uint64_t stream) override;
  // peer copies (ABI 1.2): hipMemcpyPeerAsync between two devices' memory, and hipHostMalloc'd
  // portable staging memory. UNSUPPORTED naming the entry point when the runtime lacks it (the
  // core then stages through pageable memory).
  void vendor_copy_peer_async(std::uint64_t dst, sdk::Device& source, std::uint64_t src,
                              std::uint64_t bytes, std::uint64_t stream) override;
  void* vendor_host_alloc_pinned(std::uint64_t bytes) override;
  void vendor_host_free_pinned(void* p) noexcept override;
  // mapped host memory (ABI 1.3, mapped.cpp): hipHostMalloc with hipHostMallocMapped | Portable,
  // zeroed here (the runtime does not), and hipHostGetDevicePointer; managed memory's host
  // address is its own. UNSUPPORTED naming the entry point a runtime lacks.
  sdk::MappedHost vendor_alloc_host_mapped(std::uint64_t bytes) override;
  void vendor_free_host_mapped(void* host) override;
  std::uint64_t vendor_host_ptr_to_device(void* host) override;
  void* vendor_host_address(std::uint64_t ptr) override;

  // streams
  std::uint64_t vendor_stream_create() override;
  std::uint64_t vendor_stream_create_flags(std::uint32_t flags) override;
  void vendor_stream_destroy(std::uint64_t stream) override;
  void vendor_stream_synchronize(std::uint64_t stream) override;
  /// Waits for the default stream and every stream this backend created (not for work other
  /// code queued on the same GPU).
  void vendor_synchronize() override;

  // interop handles (ABI 1.2): hipStream_t and the HIP device ordinal; imports are checked with
  // hipPointerGetAttributes (and hipMemGetAddressRange where the runtime has it).
  sdk::NativeStreamHandles vendor_native_handles(std::uint64_t stream) override;
  void vendor_check_import(std::uint64_t address, std::uint64_t bytes) override;
  std::uint64_t vendor_import_stream(void* native) override;

  // events: hipEvent* (timing enabled) and hipStreamWaitEvent; UNSUPPORTED naming the missing
  // entry point when the runtime lacks one.
  std::uint64_t vendor_event_create() override;
  void vendor_event_destroy(std::uint64_t event) override;
  void vendor_event_record(std::uint64_t event, std::uint64_t stream) override;
  void vendor_stream_wait_event(std::uint64_t stream, std::uint64_t event) override;
  void vendor_event_synchronize(std::uint64_t event) override;
  bool vendor_event_query(std::uint64_t event) override;
  float vendor_event_elapsed_ms(std::uint64_t start, std::uint64_t end) override;

  // modules (modules.cpp)
  sdk::VendorModule vendor_load_module(std::string_view name,
                                       std::span<const std::byte> image) override;
  void vendor_unload_module(sdk::VendorModule module) noexcept override;
  std::uint64_t vendor_get_function(sdk::VendorModule module, const std::string& func) override;
  std::vector<std::string> vendor_list_functions(sdk::VendorModule module) override;
  std::optional<sdk::VendorGlobal> vendor_get_global(sdk::VendorModule module,
                                                     const std::string& symbol) override;
  /// {".hsaco", ".co"}: offload bundles from hipcc --genco, or bare code objects.
  std::vector<std::string> vendor_module_file_extensions() const override;

  /// The hot path: one hipGetDevice (and hipSetDevice only when another device is current),
  /// then hipModuleLaunchKernel. No allocation, no lock. `function` comes from
  /// vendor_get_function.
  void vendor_launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                     std::uint32_t shared_bytes, std::uint64_t stream, void** params) override;

  // graphs (ABI 1.3, graphs.cpp): hipStreamBeginCapture with the ABI's mode (the values are
  // HIP's), hipStreamEndCapture then hipGraphInstantiateWithFlags (the hipGraph_t destroyed at
  // once; the graph value is the hipGraphExec_t), hipGraphLaunch, hipGraphExecDestroy,
  // hipStreamIsCapturing (active or invalidated: capturing). Abort ends the capture on its origin
  // and drops what comes back. UNSUPPORTED naming the entry point a runtime lacks.
  void vendor_begin_capture(std::uint64_t stream, std::int32_t mode) override;
  std::uint64_t vendor_end_capture(std::uint64_t stream) override;
  void vendor_graph_launch(std::uint64_t graph, std::uint64_t stream) override;
  void vendor_graph_destroy(std::uint64_t graph) override;
  void vendor_abort_capture(std::uint64_t stream) override;
  bool vendor_is_capturing(std::uint64_t stream) override;

 private:
  /// Makes this device current on the calling thread (hipSetDevice when it is not already).
  void make_current() const;
  /// Failure(UNSUPPORTED) when the runtime lacks an event entry point, naming it.
  void require_events(const char* op) const;
  /// As make_current, for noexcept paths: false when hipSetDevice failed.
  bool try_make_current() const noexcept;
  /// Failure(UNSUPPORTED) when the runtime lacks a graph entry point, naming it.
  void require_graphs(const char* op) const;
  /// `src` itself, or (while `stream` captures, the device current) a copy of its `bytes` that
  /// the capture keeps and hands to its graph: a replay uploads what `src` held at capture, as
  /// the ABI promises for copy_h2d_async (the runtime would read `src` at every replay).
  const void* stage_for_capture(const void* src, std::uint64_t bytes, std::uint64_t stream);
  /// Frees the staged uploads of destroyed graphs; called when every replay has completed.
  void release_retired_uploads() noexcept { uploads_.release_retired(); }
  /// Ends the capture `stream` is part of (on its origin when `stream` was forked into it) and
  /// drops its staged uploads; *graph is what hipStreamEndCapture returned. Returns its result.
  hipError_t end_capture_of(std::uint64_t stream, unsigned long long id, hipGraph_t* graph);

  const DriverApi& hip_;
  sdk::CaptureUploads uploads_;  // graphs.cpp: staged upload sources, by capture and by graph
  const int ordinal_;
  std::string arch_;             // gcnArchName, e.g. "gfx90a:sramecc+:xnack-" ("" if unreadable)
  bool managed_memory_ = false;  // hipDeviceAttributeManagedMemory == 1
  std::atomic<bool> xnack_warned_{false};  // the XNACK-off warning is logged once per backend
};

}  // namespace gpuplug::hip
