// SPDX-License-Identifier: Apache-2.0
// The CUDA driver loader: libcuda.so.1 opened with dlopen once per process, never linked.
#pragma once

// Why a loader: the plugin must load (and say why CUDA is unusable) on machines without an
// NVIDIA driver, so libgpuplug-cuda.so has no DT_NEEDED on libcuda. cuda.h is included only for
// its types and prototypes (the latter give each entry point's exact signature via decltype);
// every call goes through the table below.
//
// Driver minimum (the rule implemented by load()): the kernels in kernels/cuda are built by the
// toolkit GPUPLUG_CUDA_KERNEL_TOOLKIT_VERSION (from `nvcc --version` at configure time). CUDA's
// minor version compatibility lets code built by toolkit X.Y run on any driver of the same
// major release X.0 or newer, so a driver below X.0 is refused as "driver too old", naming
// both versions (CUDA 13.x: driver >= 13.0, i.e. r580). A driver of the same major but older
// than X.Y still runs the SASS (sm_80, sm_90) entries, but cannot JIT the X.Y PTX for newer
// GPUs; that is logged as a warning at create, not refused.

#include <cuda.h>
#include <gpuplug/abi.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace gpuplug::cuda {

// Entry points gpuplug cannot work without. X(member, symbol): symbol is the name passed to
// cuGetProcAddress (its base name; the driver picks the ABI version of the CUDA_VERSION we were
// compiled against, e.g. cuMemAlloc -> cuMemAlloc_v2, cuDeviceGetUuid -> cuDeviceGetUuid_v2).
#define GPUPLUG_CUDA_REQUIRED_ENTRY_POINTS(X)          \
  X(get_error_name, cuGetErrorName)                    \
  X(get_error_string, cuGetErrorString)                \
  X(device_get_count, cuDeviceGetCount)                \
  X(device_get, cuDeviceGet)                           \
  X(device_get_name, cuDeviceGetName)                  \
  X(device_get_uuid, cuDeviceGetUuid)                  \
  X(device_total_mem, cuDeviceTotalMem)                \
  X(device_get_attribute, cuDeviceGetAttribute)        \
  X(primary_ctx_retain, cuDevicePrimaryCtxRetain)      \
  X(primary_ctx_release, cuDevicePrimaryCtxRelease)    \
  X(primary_ctx_get_state, cuDevicePrimaryCtxGetState) \
  X(ctx_set_current, cuCtxSetCurrent)                  \
  X(ctx_get_current, cuCtxGetCurrent)                  \
  X(ctx_push_current, cuCtxPushCurrent)                \
  X(ctx_pop_current, cuCtxPopCurrent)                  \
  X(ctx_synchronize, cuCtxSynchronize)                 \
  X(mem_get_info, cuMemGetInfo)                        \
  X(mem_alloc, cuMemAlloc)                             \
  X(mem_alloc_managed, cuMemAllocManaged)              \
  X(mem_free, cuMemFree)                               \
  X(pointer_get_attribute, cuPointerGetAttribute)      \
  X(memcpy_htod, cuMemcpyHtoD)                         \
  X(memcpy_dtoh, cuMemcpyDtoH)                         \
  X(memcpy_dtod, cuMemcpyDtoD)                         \
  X(memcpy_htod_async, cuMemcpyHtoDAsync)              \
  X(memcpy_dtoh_async, cuMemcpyDtoHAsync)              \
  X(memcpy_dtod_async, cuMemcpyDtoDAsync)              \
  X(memset_d8_async, cuMemsetD8Async)                  \
  X(stream_create, cuStreamCreate)                     \
  X(stream_destroy, cuStreamDestroy)                   \
  X(stream_synchronize, cuStreamSynchronize)           \
  X(module_load_data_ex, cuModuleLoadDataEx)           \
  X(module_unload, cuModuleUnload)                     \
  X(module_get_function, cuModuleGetFunction)          \
  X(module_get_global, cuModuleGetGlobal)              \
  X(launch_kernel, cuLaunchKernel)

// Entry points used when the driver has them (null otherwise): listing a module's kernels for
// "not found" messages needs CUDA 12.4 (enumeration) and 12.3 (cuFuncGetName). The event entry
// points (ABI 1.1 events) are in every driver gpuplug accepts, but a driver (or a shim) without
// them must not make the plugin unloadable: CudaDevice then reports events as UNSUPPORTED
// naming the one missing (has_events). Without cuMemcpy2DAsync the pitched 2D copies fall back
// to one async copy per row (the SDK's default). The graph entry points (ABI 1.3 graphs,
// graphs.cpp) are optional the same way: without one CudaDevice reports graphs UNSUPPORTED naming
// it (missing_graph_entry_point). cuStreamBeginCapture resolves to cuStreamBeginCapture_v2 (with
// a mode), cuStreamGetCaptureInfo to cuStreamGetCaptureInfo_v3.
#define GPUPLUG_CUDA_OPTIONAL_ENTRY_POINTS(X)               \
  X(module_get_function_count, cuModuleGetFunctionCount)    \
  X(module_enumerate_functions, cuModuleEnumerateFunctions) \
  X(func_get_name, cuFuncGetName)                           \
  X(event_create, cuEventCreate)                            \
  X(event_destroy, cuEventDestroy)                          \
  X(event_record, cuEventRecord)                            \
  X(event_synchronize, cuEventSynchronize)                  \
  X(event_query, cuEventQuery)                              \
  X(event_elapsed_time, cuEventElapsedTime)                 \
  X(stream_wait_event, cuStreamWaitEvent)                   \
  X(memcpy_peer_async, cuMemcpyPeerAsync)                   \
  X(mem_host_alloc, cuMemHostAlloc)                         \
  X(mem_free_host, cuMemFreeHost)                           \
  X(memcpy_2d_async, cuMemcpy2DAsync)                       \
  X(mem_host_get_device_pointer, cuMemHostGetDevicePointer)  \
  X(stream_begin_capture, cuStreamBeginCapture)             \
  X(stream_end_capture, cuStreamEndCapture)                 \
  X(stream_is_capturing, cuStreamIsCapturing)               \
  X(stream_get_capture_info, cuStreamGetCaptureInfo)        \
  X(graph_instantiate, cuGraphInstantiateWithFlags)         \
  X(graph_destroy, cuGraphDestroy)                          \
  X(graph_launch, cuGraphLaunch)                            \
  X(graph_exec_destroy, cuGraphExecDestroy)

/// The loaded driver: why it is (un)usable and its entry points.
///
/// Lifetime: one per process, built on first use by driver() and never destroyed; it is
/// trivially destructible (plain function pointers and fixed buffers), so it adds no exit-time
/// destructor to the plugin, as the plugin rules require. This is driver state, not backend
/// state: every CudaDevice holds its own streams, modules and ledger (the primary contexts are
/// the driver's too: see retained_primary_context). libcuda.so.1 is
/// never dlclose'd (the NVIDIA driver does not support being unloaded and loaded again within a
/// process), so the pointers stay valid even across unloading and reloading this plugin.
struct DriverApi {
  gpuplug_probe_reason_t reason = GPUPLUG_PROBE_ERROR;  // GPUPLUG_PROBE_AVAILABLE when usable
  char message[480] = {};  // why unusable, or a summary: "CUDA driver 13.0, 1 device"
  int driver_version = 0;  // cuDriverGetVersion (e.g. 13000); 0 when unknown
  int device_count = 0;    // cuDeviceGetCount after cuInit; 0 unless available

// NOLINTNEXTLINE(bugprone-macro-parentheses): a declaration, not an expression
#define GPUPLUG_CUDA_MEMBER(member, symbol) decltype(&::symbol) member = nullptr;
  GPUPLUG_CUDA_REQUIRED_ENTRY_POINTS(GPUPLUG_CUDA_MEMBER)
  GPUPLUG_CUDA_OPTIONAL_ENTRY_POINTS(GPUPLUG_CUDA_MEMBER)
#undef GPUPLUG_CUDA_MEMBER

  bool available() const noexcept { return reason == GPUPLUG_PROBE_AVAILABLE; }
  /// The first event entry point the driver lacks (nullptr: it has them all).
  const char* missing_event_entry_point() const noexcept {
    if (event_create == nullptr) return "cuEventCreate";
    if (event_destroy == nullptr) return "cuEventDestroy";
    if (event_record == nullptr) return "cuEventRecord";
    if (event_synchronize == nullptr) return "cuEventSynchronize";
    if (event_query == nullptr) return "cuEventQuery";
    if (event_elapsed_time == nullptr) return "cuEventElapsedTime";
    if (stream_wait_event == nullptr) return "cuStreamWaitEvent";
    return nullptr;
  }
  /// The first graph entry point (ABI 1.3 graphs) the driver lacks (nullptr: it has them all).
  const char* missing_graph_entry_point() const noexcept {
    if (stream_begin_capture == nullptr) return "cuStreamBeginCapture";
    if (stream_end_capture == nullptr) return "cuStreamEndCapture";
    if (stream_is_capturing == nullptr) return "cuStreamIsCapturing";
    if (stream_get_capture_info == nullptr) return "cuStreamGetCaptureInfo";
    if (graph_instantiate == nullptr) return "cuGraphInstantiateWithFlags";
    if (graph_destroy == nullptr) return "cuGraphDestroy";
    if (graph_launch == nullptr) return "cuGraphLaunch";
    if (graph_exec_destroy == nullptr) return "cuGraphExecDestroy";
    return nullptr;
  }
};
static_assert(std::is_trivially_destructible_v<DriverApi>,
              "driver state must add no exit-time destructor");

/// The process's driver, loaded (dlopen, version check, entry points, cuInit, device count) on
/// the first call. Thread-safe (a function-local static); never throws; never fails: check
/// available() and read reason/message.
const DriverApi& driver() noexcept;

/// The primary context of device `ordinal` (`device` its CUdevice), retained on the first call
/// for that device and then held for the rest of the process: libcuda stays loaded for the
/// process's life (see DriverApi), so the context is never released, and backends created and
/// destroyed one after another share one context instead of each building and tearing one down
/// (which costs tens to hundreds of milliseconds and drops every loaded module). The table is
/// trivially destructible and guarded by a mutex; nothing runs at exit (the driver tears the
/// context down with the process). Throws sdk::Failure when the retain fails (a later call
/// tries again).
CUcontext retained_primary_context(const DriverApi& api, std::uint32_t ordinal, CUdevice device);

/// The primary context of device `ordinal` when retained_primary_context has retained it, else
/// null. Retains nothing; never throws.
CUcontext held_primary_context(std::uint32_t ordinal) noexcept;

/// The driver version the kernels need (X.0 of the toolkit that built them; see the top).
int minimum_driver_version() noexcept;
/// The toolkit version that built the kernels (e.g. 13000), for the PTX JIT warning.
int kernel_toolkit_version() noexcept;

/// "13.0" for 13000.
std::string version_text(int cuda_version);

// The error helpers: the same three, with the same signatures, in every driver.hpp.

/// "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)": the operation, the error's name and
/// its description. Uses the driver's cuGetErrorName/String when loaded.
std::string describe_error(std::string_view operation, CUresult result);

/// Maps a CUresult to the ABI status an operation reports (OUT_OF_MEMORY, INVALID_IMAGE, ...).
/// The stream-capture errors that end or poison a capture (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
/// 900, _INVALIDATED 901, _MERGE 902, _UNJOINED 904, _ISOLATION 905, _IMPLICIT 906 and
/// CUDA_ERROR_CAPTURED_EVENT 907) map to CAPTURE_INVALIDATED; _UNMATCHED 903 (end on a stream
/// that did not begin the capture) and _WRONG_THREAD 908 to INVALID_ARGUMENT. Kernel faults map to LAUNCH_FAILED everywhere (they surface at the next synchronising call);
/// `launching` also maps the other errors of a launch to LAUNCH_FAILED, except invalid
/// arguments (a bad grid, block or handle), which stay INVALID_ARGUMENT.
gpuplug_status_t status_of(CUresult result, bool launching = false) noexcept;

/// Throws sdk::Failure(status_of(result, launching), describe_error(operation, result)).
[[noreturn]] void throw_error(CUresult result, std::string_view operation, bool launching = false);

/// Returns when `result` is CUDA_SUCCESS, else throw_error. The message is only built on failure.
inline void check(CUresult result, std::string_view operation, bool launching = false) {
  if (result != CUDA_SUCCESS) [[unlikely]]
    throw_error(result, operation, launching);
}

}  // namespace gpuplug::cuda
