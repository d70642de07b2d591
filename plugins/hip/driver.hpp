// SPDX-License-Identifier: Apache-2.0
// The HIP runtime loader: libamdhip64.so opened with dlopen once per process, never linked.
#pragma once

// Why a loader: the plugin must load (and say why HIP is unusable) on machines without ROCm, so
// libgpuplug-hip.so has no DT_NEEDED on libamdhip64. hip_runtime_api.h is included (with
// __HIP_PLATFORM_AMD__) only for its types and prototypes; the prototypes give each entry
// point's exact signature through decltype, and every call goes through the table below.
//
// Runtime versions: the names tried are libamdhip64.so, .so.6 and .so.5. Only entry points whose
// C signature is the same in ROCm 5 and 6 are used. Of the structures read, hipDeviceProp_t
// (for gcnArchName and nothing else) changed layout in ROCm 6; there `hipGetDeviceProperties`
// is a macro for hipGetDevicePropertiesR0600 while the exported symbol of the plain name keeps
// the ROCm 5 layout, which is exactly the layout of the 5.x headers we compile against. The
// buffer handed to it is oversized anyway, and the arch string is only trusted when it reads
// like one (see device.cpp). hipPointerAttribute_t kept its layout (ROCm 6 renamed the first
// field and renumbered hipMemoryType, which is why only `device` is read from it).

#include <gpuplug/abi.h>
#include <hip/hip_runtime_api.h>

#include <string>
#include <string_view>
#include <type_traits>

namespace gpuplug::hip {

// Entry points gpuplug cannot work without. X(member, symbol). A runtime that lacks one is
// reported as "driver too old", naming the symbol.
#define GPUPLUG_HIP_REQUIRED_ENTRY_POINTS(X)         \
  X(get_error_name, hipGetErrorName)                 \
  X(get_error_string, hipGetErrorString)             \
  X(init, hipInit)                                   \
  X(runtime_get_version, hipRuntimeGetVersion)       \
  X(get_device_count, hipGetDeviceCount)             \
  X(get_device, hipGetDevice)                        \
  X(set_device, hipSetDevice)                        \
  X(device_get_name, hipDeviceGetName)               \
  X(device_total_mem, hipDeviceTotalMem)             \
  X(device_get_attribute, hipDeviceGetAttribute)     \
  X(get_device_properties, hipGetDeviceProperties)   \
  X(mem_get_info, hipMemGetInfo)                     \
  X(pointer_get_attributes, hipPointerGetAttributes) \
  X(free, hipFree)                                   \
  X(memcpy, hipMemcpy)                               \
  X(memcpy_async, hipMemcpyAsync)                    \
  X(memset_d8_async, hipMemsetD8Async)               \
  X(stream_create, hipStreamCreate)                  \
  X(stream_create_with_flags, hipStreamCreateWithFlags) \
  X(stream_destroy, hipStreamDestroy)                \
  X(stream_synchronize, hipStreamSynchronize)        \
  X(module_load_data, hipModuleLoadData)             \
  X(module_unload, hipModuleUnload)                  \
  X(module_get_function, hipModuleGetFunction)       \
  X(module_get_global, hipModuleGetGlobal)           \
  X(module_launch_kernel, hipModuleLaunchKernel)

// Entry points used when the runtime has them (null otherwise).
#define GPUPLUG_HIP_OPTIONAL_ENTRY_POINTS(X)      \
  X(device_get_uuid, hipDeviceGetUuid)            \
  X(driver_get_version, hipDriverGetVersion)      \
  X(mem_get_address_range, hipMemGetAddressRange) \
  X(device_get_pci_bus_id, hipDeviceGetPCIBusId)  \
  X(event_create, hipEventCreate)                 \
  X(event_destroy, hipEventDestroy)               \
  X(event_record, hipEventRecord)                 \
  X(event_synchronize, hipEventSynchronize)       \
  X(event_query, hipEventQuery)                   \
  X(event_elapsed_time, hipEventElapsedTime)      \
  X(stream_wait_event, hipStreamWaitEvent)       \
  X(memcpy_peer_async, hipMemcpyPeerAsync)        \
  X(host_free, hipHostFree)                       \
  X(memcpy_2d_async, hipMemcpy2DAsync)            \
  X(host_get_device_pointer, hipHostGetDevicePointer)  \
  X(stream_begin_capture, hipStreamBeginCapture)      \
  X(stream_end_capture, hipStreamEndCapture)          \
  X(stream_is_capturing, hipStreamIsCapturing)        \
  X(stream_get_capture_info, hipStreamGetCaptureInfo) \
  X(graph_instantiate, hipGraphInstantiateWithFlags)  \
  X(graph_destroy, hipGraphDestroy)                   \
  X(graph_launch, hipGraphLaunch)                     \
  X(graph_exec_destroy, hipGraphExecDestroy)

// hipMalloc and hipMallocManaged are overloaded in C++ (template helpers in the header), so their
// C signatures are spelled out; the static_cast checks them against the header's declaration.
using MallocFn = decltype(static_cast<hipError_t (*)(void**, size_t)>(&::hipMalloc));
using MallocManagedFn =
    decltype(static_cast<hipError_t (*)(void**, size_t, unsigned int)>(&::hipMallocManaged));
using HostMallocFn =
    decltype(static_cast<hipError_t (*)(void**, size_t, unsigned int)>(&::hipHostMalloc));

/// The loaded runtime: why it is (un)usable and its entry points.
///
/// Lifetime: one per process, built on first use by driver() and never destroyed; it is
/// trivially destructible (plain function pointers and fixed buffers), so it adds no exit-time
/// destructor to the plugin, as the plugin rules require. This is driver state, not backend
/// state: every HipDevice holds its own streams, modules and ledger. libamdhip64 is never
/// dlclose'd (the ROCm runtime keeps process-wide threads and state and does not support being
/// unloaded and loaded again), so the pointers stay valid even across reloading this plugin.
struct DriverApi {
  gpuplug_probe_reason_t reason = GPUPLUG_PROBE_ERROR;  // GPUPLUG_PROBE_AVAILABLE when usable
  // Why unusable, or a summary: "HIP runtime 5.2 (libamdhip64.so), 1 device".
  char message[480] = {};
  // The name or path that loaded: "libamdhip64.so.6", "/opt/rocm/lib/libamdhip64.so"; "" when
  // none did (see driver.cpp for the places tried, in order).
  char library[256] = {};
  int runtime_version = 0;  // hipRuntimeGetVersion (e.g. 50221153); 0 when unknown
  int device_count = 0;     // hipGetDeviceCount; 0 unless available

#define GPUPLUG_HIP_MEMBER(member, symbol) decltype(&::symbol) member = nullptr;
  GPUPLUG_HIP_REQUIRED_ENTRY_POINTS(GPUPLUG_HIP_MEMBER)
  GPUPLUG_HIP_OPTIONAL_ENTRY_POINTS(GPUPLUG_HIP_MEMBER)
#undef GPUPLUG_HIP_MEMBER
  MallocFn malloc = nullptr;
  MallocManagedFn malloc_managed = nullptr;
  HostMallocFn host_malloc = nullptr;  // optional, with host_free (pinned staging, ABI 1.2)

  bool available() const noexcept { return reason == GPUPLUG_PROBE_AVAILABLE; }
  /// The first event entry point (ABI 1.1 events) the runtime lacks; nullptr: it has them all.
  /// A runtime without them still loads; HipDevice reports events as UNSUPPORTED naming it.
  const char* missing_event_entry_point() const noexcept {
    if (event_create == nullptr) return "hipEventCreate";
    if (event_destroy == nullptr) return "hipEventDestroy";
    if (event_record == nullptr) return "hipEventRecord";
    if (event_synchronize == nullptr) return "hipEventSynchronize";
    if (event_query == nullptr) return "hipEventQuery";
    if (event_elapsed_time == nullptr) return "hipEventElapsedTime";
    if (stream_wait_event == nullptr) return "hipStreamWaitEvent";
    return nullptr;
  }
  /// The first graph entry point (ABI 1.3 graphs, graphs.cpp) the runtime lacks; nullptr: it has
  /// them all. A runtime without them still loads; HipDevice reports graphs as UNSUPPORTED.
  const char* missing_graph_entry_point() const noexcept {
    if (stream_begin_capture == nullptr) return "hipStreamBeginCapture";
    if (stream_end_capture == nullptr) return "hipStreamEndCapture";
    if (stream_is_capturing == nullptr) return "hipStreamIsCapturing";
    if (stream_get_capture_info == nullptr) return "hipStreamGetCaptureInfo";
    if (graph_instantiate == nullptr) return "hipGraphInstantiateWithFlags";
    if (graph_destroy == nullptr) return "hipGraphDestroy";
    if (graph_launch == nullptr) return "hipGraphLaunch";
    if (graph_exec_destroy == nullptr) return "hipGraphExecDestroy";
    return nullptr;
  }
};
static_assert(std::is_trivially_destructible_v<DriverApi>,
              "driver state must add no exit-time destructor");

/// The process's runtime, loaded (dlopen, entry points, hipInit, device count) on the first
/// call. Thread-safe; never throws; never fails: check available() and read reason/message.
/// Reasons: DRIVER_MISSING (no library), DRIVER_TOO_OLD (an entry point is missing), NO_DEVICE
/// ("no AMD GPU (hipErrorNoDevice)"), PROBE_ERROR (any other runtime error, named).
const DriverApi& driver() noexcept;

// The error helpers: the same three, with the same signatures, in every driver.hpp.

/// "hipMalloc(4096 bytes): hipErrorOutOfMemory (out of memory)": the operation, the error's name
/// and its description (the description is left out where the runtime repeats the name).
std::string describe_error(std::string_view operation, hipError_t result);

/// Maps a hipError_t to the ABI status an operation reports (OUT_OF_MEMORY, INVALID_IMAGE, ...).
/// Kernel faults map to LAUNCH_FAILED everywhere (they surface at the next synchronizing call);
/// `launching` maps every other error of a launch to LAUNCH_FAILED too.
gpuplug_status_t status_of(hipError_t result, bool launching = false) noexcept;

/// Throws sdk::Failure(status_of(result, launching), describe_error(operation, result)).
[[noreturn]] void throw_error(hipError_t result, std::string_view operation,
                              bool launching = false);

/// Returns when `result` is hipSuccess, else throw_error. The message is only built on failure.
inline void check(hipError_t result, std::string_view operation, bool launching = false) {
  if (result != hipSuccess) [[unlikely]]
    throw_error(result, operation, launching);
}

}  // namespace gpuplug::hip
