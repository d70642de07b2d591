// SPDX-License-Identifier: Apache-2.0
// CudaDevice: one CUDA device as a gpuplug backend instance (context, memory, copies, streams,
// launch).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capture_uploads.hpp"
#include "driver.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::cuda {

/// The driver's handles behind the ABI's opaque values (0: the legacy default stream).
inline CUstream as_stream(std::uint64_t stream) noexcept {
  return reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(stream));
}
inline CUevent as_event(std::uint64_t event) noexcept {
  return reinterpret_cast<CUevent>(static_cast<std::uintptr_t>(event));
}

/// Fills `out` for device `ordinal` (which the SDK has checked) without creating a context:
/// free_memory is reported only when the device's primary context is already active (this
/// plugin has held it since a backend of that device was first created, or the application
/// holds it), else 0, because listing devices must not pay for (and
/// hold memory for) a context per GPU. Throws sdk::Failure on a driver error.
void describe(const DriverApi& api, std::uint32_t ordinal, gpuplug_device_info_t& out);

/// Makes a context current on the calling thread for a scope, then restores the thread's own:
/// nothing to do when it is current already (one cuCtxGetCurrent), else cuCtxPushCurrent now
/// and cuCtxPopCurrent at the end of the scope. This is how every CUDA hook runs, so that a host
/// application's current context (its own cuCtxCreate'd context, or another device's) is never
/// replaced by calling into gpuplug, destroy included.
class [[nodiscard]] ContextScope {
 public:
  /// Throws sdk::Failure when the context cannot be made current.
  ContextScope(const DriverApi& api, CUcontext context);
  /// Never throws: check result() (CUDA_SUCCESS when the context is current).
  ContextScope(const DriverApi& api, CUcontext context, std::nothrow_t) noexcept;
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

  CUresult result() const noexcept { return result_; }

 private:
  const DriverApi& api_;
  CUresult result_ = CUDA_SUCCESS;
  bool pushed_ = false;  // a cuCtxPopCurrent is owed
};

/// One backend instance: device `config.ordinal` with its own ledger, modules and streams (the
/// SDK's); this class is only the calls into the driver.
///
/// Context: the device's primary context, which the driver state retains once per process
/// (retained_primary_context), so instances of the same ordinal share it, as CUDA runtime users
/// do, and creating and destroying backends builds no context after the first. Every hook makes
/// it current for its own duration only (ContextScope), on whichever thread calls it: the
/// calling thread's current context is as it was when the hook returns.
/// Streams: created with default flags, so the legacy default stream (stream 0) orders them as
/// the ABI specifies.
/// Device addresses the ledger and the module globals do not know are accepted when the driver
/// knows a live allocation holding the whole range (cuPointerGetAttribute): a bad address must
/// not reach an asynchronous copy or memset, where it would fault later and poison the context.
/// Thread-safety: every hook may run concurrently; the instance has no lock of its own.
class CudaDevice final : public sdk::Device {
 public:
  /// Finds (on first use: retains) the primary context of `config.ordinal` (a device the SDK
  /// has checked). Leaves the calling thread's current context alone. Throws sdk::Failure on a
  /// driver error.
  explicit CudaDevice(const sdk::DeviceConfig& config);
  /// Nothing to release: the primary context stays retained for the process (see above). The
  /// SDK's shutdown() has already synchronized, unloaded the modules, swept the ledger and
  /// destroyed the streams, each hook restoring the thread's current context. Never throws.
  ~CudaDevice() override = default;

  // memory
  std::uint64_t vendor_alloc(std::uint64_t bytes) override;
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
  // pitched 2D copies (ABI 1.3; pitched.cpp): one cuMemcpy2DAsync each, or the SDK's one copy
  // per row when the driver lacks it
  void vendor_copy_h2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch, const void* src,
                                std::uint64_t src_pitch, std::uint64_t width,
                                std::uint64_t height, std::uint64_t stream) override;
  void vendor_copy_d2h_2d_async(void* dst, std::uint64_t dst_pitch, std::uint64_t src,
                                std::uint64_t src_pitch, std::uint64_t width,
                                std::uint64_t height, std::uint64_t stream) override;
  void vendor_copy_d2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch, std::uint64_t src,
                                std::uint64_t src_pitch, std::uint64_t width,
                                std::uint64_t height, std::uint64_t stream) override;
  // peer copies (ABI 1.2): cuMemcpyPeerAsync between the two primary contexts, and portable
  // cuMemHostAlloc staging memory. UNSUPPORTED naming the entry point when the driver lacks it
  // (the core then stages through pageable memory).
  void vendor_copy_peer_async(std::uint64_t dst, sdk::Device& source, std::uint64_t src,
                              std::uint64_t bytes, std::uint64_t stream) override;
  void* vendor_host_alloc_pinned(std::uint64_t bytes) override;
  void vendor_host_free_pinned(void* p) noexcept override;
  // mapped host memory (ABI 1.3, mapped.cpp): cuMemHostAlloc with DEVICEMAP | PORTABLE, zeroed
  // here (the driver does not), and cuMemHostGetDevicePointer; managed memory's host address is
  // its own (unified addressing). UNSUPPORTED naming the entry point a driver lacks.
  sdk::MappedHost vendor_alloc_host_mapped(std::uint64_t bytes) override;
  void vendor_free_host_mapped(void* host) override;
  std::uint64_t vendor_host_ptr_to_device(void* host) override;
  void* vendor_host_address(std::uint64_t ptr) override;

  // streams
  std::uint64_t vendor_stream_create() override;
  std::uint64_t vendor_stream_create_flags(std::uint32_t flags) override;
  void vendor_stream_destroy(std::uint64_t stream) override;
  void vendor_stream_synchronize(std::uint64_t stream) override;
  void vendor_synchronize() override;

  // interop handles (ABI 1.2): the retained primary context, CUstream and CUdevice; imports are
  // checked with cuPointerGetAttribute (device ordinal, allocation range).
  sdk::NativeStreamHandles vendor_native_handles(std::uint64_t stream) override;
  void vendor_check_import(std::uint64_t address, std::uint64_t bytes) override;
  std::uint64_t vendor_import_stream(void* native) override;

  // events: cuEvent* (timing enabled) and cuStreamWaitEvent; UNSUPPORTED naming the missing
  // entry point when the driver lacks one.
  std::uint64_t vendor_event_create() override;
  void vendor_event_destroy(std::uint64_t event) override;
  void vendor_event_record(std::uint64_t event, std::uint64_t stream) override;
  void vendor_stream_wait_event(std::uint64_t stream, std::uint64_t event) override;
  void vendor_event_synchronize(std::uint64_t event) override;
  bool vendor_event_query(std::uint64_t event) override;
  float vendor_event_elapsed_ms(std::uint64_t start, std::uint64_t end) override;

  // graphs (ABI 1.3, graphs.cpp): cuStreamBeginCapture_v2 with the ABI's mode (the values are
  // CUDA's), cuStreamEndCapture then cuGraphInstantiateWithFlags (the CUgraph destroyed at once;
  // the graph value is the CUgraphExec), cuGraphLaunch, cuGraphExecDestroy, cuStreamIsCapturing
  // (active or invalidated: capturing). Abort ends the capture on its origin and drops what comes
  // back. UNSUPPORTED naming the entry point a driver lacks.
  void vendor_begin_capture(std::uint64_t stream, std::int32_t mode) override;
  std::uint64_t vendor_end_capture(std::uint64_t stream) override;
  void vendor_graph_launch(std::uint64_t graph, std::uint64_t stream) override;
  void vendor_graph_destroy(std::uint64_t graph) override;
  void vendor_abort_capture(std::uint64_t stream) override;
  bool vendor_is_capturing(std::uint64_t stream) override;

  // modules (modules.cpp)
  sdk::VendorModule vendor_load_module(std::string_view name,
                                       std::span<const std::byte> image) override;
  void vendor_unload_module(sdk::VendorModule module) noexcept override;
  std::uint64_t vendor_get_function(sdk::VendorModule module, const std::string& func) override;
  std::vector<std::string> vendor_list_functions(sdk::VendorModule module) override;
  std::optional<sdk::VendorGlobal> vendor_get_global(sdk::VendorModule module,
                                                     const std::string& symbol) override;
  std::vector<std::string> vendor_module_file_extensions() const override;

  // launch: a ContextScope and one cuLaunchKernel; allocates only to describe a failure.
  void vendor_launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                     std::uint32_t shared_bytes, std::uint64_t stream, void** params) override;

 private:
  /// Makes this device's primary context current on the calling thread until the returned
  /// scope ends (cheap: TLS reads and stores in the driver). Throws sdk::Failure.
  ContextScope make_current() const { return ContextScope(api_, context_); }
  /// Failure(UNSUPPORTED) when the driver lacks an event entry point, naming it.
  void require_events(const char* op) const;

  /// Failure(UNSUPPORTED) when the driver lacks a graph entry point, naming it.
  void require_graphs(const char* op) const;
  /// `src` itself, or (while `stream` captures, the context current) a copy of its `bytes` that
  /// the capture keeps and hands to its graph: a replay uploads what `src` held at capture, as
  /// the ABI promises for copy_h2d_async (the driver would read `src` at every replay).
  const void* stage_for_capture(const void* src, std::uint64_t bytes, std::uint64_t stream);
  /// Frees the staged uploads of destroyed graphs; called when every replay has completed.
  void release_retired_uploads() noexcept;
  /// Ends the capture `stream` is part of (on its origin when `stream` was forked into it) and
  /// drops its staged uploads; *graph is what cuStreamEndCapture returned. Returns its result.
  CUresult end_capture_of(std::uint64_t stream, std::uint64_t id, CUgraph* graph);

  const DriverApi& api_;
  sdk::CaptureUploads uploads_;  // graphs.cpp: staged upload sources, by capture and by graph
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;  // the primary context, retained by the driver state
  bool managed_memory_ = false;  // CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY
};

}  // namespace gpuplug::cuda
