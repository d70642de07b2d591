// SPDX-License-Identifier: Apache-2.0
// HipDevice: memory, copies, streams, events, interop handles and launch through the loaded
// runtime (its identity and properties are in identity.cpp).
#include "device.hpp"

#include <cstdio>
#include <string>

#include "gpuplug/support/text.hpp"

namespace gpuplug::hip {
namespace {

void* as_ptr(std::uint64_t p) noexcept { return reinterpret_cast<void*>(p); }

hipEvent_t as_event(std::uint64_t event) noexcept { return reinterpret_cast<hipEvent_t>(event); }

}  // namespace

HipDevice::HipDevice(const sdk::DeviceConfig& config, const DriverApi& hip)
    : sdk::Device(config), hip_(hip), ordinal_(static_cast<int>(config.ordinal)) {
  make_current();
  arch_ = device_arch(hip_, ordinal_);
  managed_memory_ =
      device_attribute(hip_, hipDeviceAttributeManagedMemory, "ManagedMemory", ordinal_) == 1;
  log(GPUPLUG_LOG_DEBUG, "hip:" + std::to_string(ordinal_) + " opened (" +
                             (arch_.empty() ? std::string("arch unknown") : arch_) + ", " +
                             hip_.message + ")");
}

bool HipDevice::try_make_current() const noexcept {
  int current = -1;
  if (hip_.get_device(&current) == hipSuccess && current == ordinal_) return true;
  return hip_.set_device(ordinal_) == hipSuccess;
}

void HipDevice::make_current() const {
  int current = -1;
  if (hip_.get_device(&current) == hipSuccess && current == ordinal_) return;
  if (const hipError_t error = hip_.set_device(ordinal_); error != hipSuccess) [[unlikely]]
    throw_error(error, with_ordinal("hipSetDevice", ordinal_));
}

// ---- memory ----------------------------------------------------------------------------------

std::uint64_t HipDevice::vendor_alloc(std::uint64_t bytes) {
  make_current();
  void* ptr = nullptr;
  const hipError_t error = hip_.malloc(&ptr, bytes);
  if (error != hipSuccess) throw_error(error, "hipMalloc(" + std::to_string(bytes) + " bytes)");
  return reinterpret_cast<std::uint64_t>(ptr);
}

std::uint64_t HipDevice::vendor_alloc_managed(std::uint64_t bytes) {
  const std::string where =
      "hip:" + std::to_string(ordinal_) + " (" + (arch_.empty() ? "arch unknown" : arch_) + ")";
  if (!managed_memory_)
    sdk::fail(GPUPLUG_STATUS_UNSUPPORTED, "managed memory is not supported on " + where +
                                              ": hipDeviceAttributeManagedMemory is 0");
  if (arch_.find("xnack+") == std::string::npos && !xnack_warned_.exchange(true))
    log(GPUPLUG_LOG_WARNING,
        "managed memory on " + where +
            " with XNACK off: pages will not migrate on GPU access, so the GPU reads them over "
            "the bus (enable XNACK with HSA_XNACK=1 on a kernel that supports it)");
  make_current();
  void* ptr = nullptr;
  const hipError_t error = hip_.malloc_managed(&ptr, bytes, hipMemAttachGlobal);
  if (error != hipSuccess)
    throw_error(error, "hipMallocManaged(" + std::to_string(bytes) + " bytes)");
  return reinterpret_cast<std::uint64_t>(ptr);
}

void HipDevice::vendor_free(std::uint64_t ptr, gpuplug_alloc_kind_t /*kind: hipFree frees both*/) {
  make_current();
  check(hip_.free(as_ptr(ptr)), "hipFree");
}

void HipDevice::vendor_memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) {
  make_current();
  std::size_t free_now = 0;
  std::size_t total = 0;
  check(hip_.mem_get_info(&free_now, &total), "hipMemGetInfo");
  free_bytes = free_now;
  total_bytes = total;
}

void HipDevice::vendor_device_info(gpuplug_device_info_t& out) { describe(hip_, ordinal_, out); }

sdk::Access HipDevice::vendor_owns_range(std::uint64_t ptr, std::uint64_t bytes) {
  // Memory from elsewhere in this process (another backend's, the application's): accepted when
  // the runtime says it belongs to this device, and, where it can say, holds the whole range.
  hipPointerAttribute_t attributes{};
  if (hip_.pointer_get_attributes(&attributes, as_ptr(ptr)) != hipSuccess ||
      attributes.device != ordinal_ || attributes.devicePointer == nullptr)
    return sdk::Access::none;
  if (hip_.mem_get_address_range != nullptr) {
    hipDeviceptr_t base = nullptr;
    std::size_t size = 0;
    if (hip_.mem_get_address_range(&base, &size, as_ptr(ptr)) != hipSuccess)
      return sdk::Access::none;
    const auto start = reinterpret_cast<std::uint64_t>(base);
    if (ptr < start || ptr - start >= size || bytes > size - (ptr - start))
      return sdk::Access::none;
  }
  return sdk::Access::read_write;
}

// ---- interop handles (ABI 1.2) --------------------------------------------------------------

sdk::NativeStreamHandles HipDevice::vendor_native_handles(std::uint64_t stream) {
  // HIP has no context to hand out: the device ordinal is what hipSetDevice takes.
  return sdk::NativeStreamHandles{ordinal_, nullptr, as_stream(stream)};
}

void HipDevice::vendor_check_import(std::uint64_t address, std::uint64_t bytes) {
  const auto where = [&] {
    return "import_memory: " + support::hex(address) + " + " + std::to_string(bytes) + " bytes";
  };
  make_current();
  hipPointerAttribute_t attributes{};
  if (const hipError_t error = hip_.pointer_get_attributes(&attributes, as_ptr(address));
      error != hipSuccess)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              where() + " is not memory the HIP runtime knows (" +
                  describe_error("hipPointerGetAttributes", error) + ")");
  if (attributes.device != ordinal_ || attributes.devicePointer == nullptr)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              where() + " is memory of HIP device " + std::to_string(attributes.device) +
                  ", not of hip:" + std::to_string(ordinal_) +
                  " (import it on the backend of that device)");
  if (hip_.mem_get_address_range != nullptr) {
    hipDeviceptr_t base = nullptr;
    std::size_t size = 0;
    if (hip_.mem_get_address_range(&base, &size, as_ptr(address)) == hipSuccess) {
      const auto start = reinterpret_cast<std::uint64_t>(base);
      if (address < start || bytes > size - (address - start))
        sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
                  where() + " runs past the end of its HIP allocation of " +
                      std::to_string(size) + " bytes at " + support::hex(start));
    }
  }
}

std::uint64_t HipDevice::vendor_import_stream(void* native) {
  make_current();
  // The runtime refuses a stream it does not know, or one of another device (the SDK then keeps
  // nothing); synchronizing also orders the import after the stream's earlier work.
  if (const hipError_t error = hip_.stream_synchronize(static_cast<hipStream_t>(native));
      error != hipSuccess)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "import_stream: native stream " +
                  support::hex(reinterpret_cast<std::uintptr_t>(native)) +
                  " is not a stream of hip:" + std::to_string(ordinal_) + " (" +
                  describe_error("hipStreamSynchronize", error) + ")");
  return reinterpret_cast<std::uint64_t>(native);
}

// ---- copies and memset -----------------------------------------------------------------------
// hipMemcpy is synchronous for the host and ordered on the null stream, which is how the ABI's
// synchronous copies are specified. Managed pointers are valid device pointers for every kind.

void HipDevice::vendor_copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) {
  make_current();
  check(hip_.memcpy(as_ptr(dst), src, bytes, hipMemcpyHostToDevice), "hipMemcpy(host to device)");
  // From pageable memory hipMemcpy may return once the source is staged, before the DMA lands;
  // the synchronous copy promises the data is in place, as on CUDA.
  check(hip_.stream_synchronize(nullptr), "hipStreamSynchronize after hipMemcpy(host to device)");
}

void HipDevice::vendor_copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) {
  make_current();
  check(hip_.memcpy(dst, as_ptr(src), bytes, hipMemcpyDeviceToHost), "hipMemcpy(device to host)");
}

void HipDevice::vendor_copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) {
  make_current();
  check(hip_.memcpy(as_ptr(dst), as_ptr(src), bytes, hipMemcpyDeviceToDevice),
        "hipMemcpy(device to device)");
}

void HipDevice::vendor_copy_h2d_async(std::uint64_t dst, const void* src, std::uint64_t bytes,
                                      std::uint64_t stream) {
  make_current();
  const void* from = stage_for_capture(src, bytes, stream);  // graphs.cpp
  check(hip_.memcpy_async(as_ptr(dst), from, bytes, hipMemcpyHostToDevice, as_stream(stream)),
        "hipMemcpyAsync(host to device)");
}

void HipDevice::vendor_copy_h2d_async_retained(std::uint64_t dst, const void* src,
                                               std::uint64_t bytes, std::uint64_t stream) {
  make_current();
  check(hip_.memcpy_async(as_ptr(dst), src, bytes, hipMemcpyHostToDevice, as_stream(stream)),
        "hipMemcpyAsync(host to device)");
}

void HipDevice::vendor_copy_d2h_async(void* dst, std::uint64_t src, std::uint64_t bytes,
                                      std::uint64_t stream) {
  make_current();
  check(hip_.memcpy_async(dst, as_ptr(src), bytes, hipMemcpyDeviceToHost, as_stream(stream)),
        "hipMemcpyAsync(device to host)");
}

void HipDevice::vendor_copy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                                      std::uint64_t stream) {
  make_current();
  check(hip_.memcpy_async(as_ptr(dst), as_ptr(src), bytes, hipMemcpyDeviceToDevice,
                          as_stream(stream)),
        "hipMemcpyAsync(device to device)");
}

void HipDevice::vendor_copy_peer_async(std::uint64_t dst, sdk::Device& source, std::uint64_t src,
                                       std::uint64_t bytes, std::uint64_t stream) {
  if (hip_.memcpy_peer_async == nullptr)
    sdk::fail(GPUPLUG_STATUS_UNSUPPORTED,
              "copy_peer_async: the HIP runtime lacks hipMemcpyPeerAsync");
  // The core passes only devices of this plugin (abi.h): the source is a HipDevice.
  const int src_device = static_cast<const HipDevice&>(source).ordinal_;
  make_current();
  check(hip_.memcpy_peer_async(as_ptr(dst), ordinal_, as_ptr(src), src_device, bytes,
                               as_stream(stream)),
        "hipMemcpyPeerAsync");
}

void* HipDevice::vendor_host_alloc_pinned(std::uint64_t bytes) {
  if (hip_.host_malloc == nullptr || hip_.host_free == nullptr)
    sdk::fail(GPUPLUG_STATUS_UNSUPPORTED,
              "host_alloc_pinned: the HIP runtime lacks hipHostMalloc or hipHostFree");
  make_current();
  void* p = nullptr;
  // Portable: the staging memory of a copy between two devices is used by both.
  check(hip_.host_malloc(&p, bytes, hipHostMallocPortable), "hipHostMalloc");
  return p;
}

void HipDevice::vendor_host_free_pinned(void* p) noexcept {
  if (hip_.host_free != nullptr) static_cast<void>(hip_.host_free(p));  // nothing to report to
}

void HipDevice::vendor_memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                                 std::uint64_t stream) {
  make_current();
  check(hip_.memset_d8_async(as_ptr(dst), value, bytes, as_stream(stream)), "hipMemsetD8Async");
}

// ---- streams ---------------------------------------------------------------------------------

// The ABI's stream flags are HIP's, value for value.
static_assert(GPUPLUG_STREAM_BLOCKING == hipStreamDefault);
static_assert(GPUPLUG_STREAM_NON_BLOCKING == hipStreamNonBlocking);

std::uint64_t HipDevice::vendor_stream_create() {
  make_current();
  hipStream_t stream = nullptr;
  check(hip_.stream_create(&stream), "hipStreamCreate");
  return reinterpret_cast<std::uint64_t>(stream);
}

std::uint64_t HipDevice::vendor_stream_create_flags(std::uint32_t flags) {
  make_current();
  hipStream_t stream = nullptr;
  check(hip_.stream_create_with_flags(&stream, flags), "hipStreamCreateWithFlags");
  return reinterpret_cast<std::uint64_t>(stream);
}

void HipDevice::vendor_stream_destroy(std::uint64_t stream) {
  make_current();
  // The ABI promises the stream's work is done when this returns; hipStreamDestroy alone does
  // not wait. The stream is destroyed even when its work failed, and that failure reported.
  const hipError_t waited = hip_.stream_synchronize(as_stream(stream));
  const hipError_t destroyed = hip_.stream_destroy(as_stream(stream));
  check(waited, "hipStreamSynchronize (before hipStreamDestroy)");
  check(destroyed, "hipStreamDestroy");
}

void HipDevice::vendor_stream_synchronize(std::uint64_t stream) {
  make_current();
  if (const hipError_t e = hip_.stream_synchronize(as_stream(stream)); e != hipSuccess)
    throw_error(e, "hipStreamSynchronize of stream " + std::to_string(stream));
}

void HipDevice::vendor_synchronize() {
  make_current();
  check(hip_.stream_synchronize(nullptr), "hipStreamSynchronize(default stream)");
  streams().for_each_live(
      [&](std::uint64_t s) { check(hip_.stream_synchronize(as_stream(s)), "hipStreamSynchronize"); });
  release_retired_uploads();  // every replay has completed
}

// ---- events ----------------------------------------------------------------------------------
// The SDK's EventSet has checked every handle, so the runtime only sees events of this backend.

void HipDevice::require_events(const char* op) const {
  if (const char* missing = hip_.missing_event_entry_point(); missing != nullptr) [[unlikely]]
    sdk::fail(GPUPLUG_STATUS_UNSUPPORTED, std::string(op) +
                                              ": events are not supported: the HIP runtime " +
                                              hip_.library + " does not provide " + missing);
}

std::uint64_t HipDevice::vendor_event_create() {
  require_events("event_create");
  make_current();
  hipEvent_t e = nullptr;
  check(hip_.event_create(&e), "hipEventCreate");  // default flags: timing enabled
  return reinterpret_cast<std::uint64_t>(e);
}

void HipDevice::vendor_event_destroy(std::uint64_t event) {
  require_events("event_destroy");
  make_current();
  check(hip_.event_destroy(as_event(event)), "hipEventDestroy");
}

void HipDevice::vendor_event_record(std::uint64_t event, std::uint64_t stream) {
  require_events("event_record");
  make_current();
  check(hip_.event_record(as_event(event), as_stream(stream)), "hipEventRecord");
}

void HipDevice::vendor_stream_wait_event(std::uint64_t stream, std::uint64_t event) {
  require_events("stream_wait_event");
  make_current();
  check(hip_.stream_wait_event(as_stream(stream), as_event(event), 0), "hipStreamWaitEvent");
}

void HipDevice::vendor_event_synchronize(std::uint64_t event) {
  require_events("event_synchronize");
  make_current();
  check(hip_.event_synchronize(as_event(event)), "hipEventSynchronize");
}

bool HipDevice::vendor_event_query(std::uint64_t event) {
  require_events("event_query");
  make_current();
  const hipError_t r = hip_.event_query(as_event(event));
  if (r == hipErrorNotReady) return false;
  check(r, "hipEventQuery");
  return true;
}

float HipDevice::vendor_event_elapsed_ms(std::uint64_t start, std::uint64_t end) {
  require_events("event_elapsed_ms");
  make_current();
  float ms = 0;
  const hipError_t r = hip_.event_elapsed_time(&ms, as_event(start), as_event(end));
  if (r == hipErrorNotReady)
    sdk::fail(GPUPLUG_STATUS_UNAVAILABLE,
              "hipEventElapsedTime: an event has not completed (not ready)");
  check(r, "hipEventElapsedTime");
  return ms;
}

// ---- launch ----------------------------------------------------------------------------------

void HipDevice::vendor_launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                              std::uint32_t shared_bytes, std::uint64_t stream, void** params) {
  // The SDK leaves launch's stream to the vendor. A destroyed or never-created hipStream_t handed
  // to hipModuleLaunchKernel is undefined behaviour (a freed object, a wild pointer), so it is
  // refused here: a shared lock, nothing beside the runtime call's cost.
  if (stream != 0) streams().check("launch", stream);
  make_current();
  const hipError_t error = hip_.module_launch_kernel(
      reinterpret_cast<hipFunction_t>(function), grid.x, grid.y, grid.z, block.x, block.y, block.z,
      shared_bytes, as_stream(stream), params, nullptr);
  if (error != hipSuccess) [[unlikely]] {
    char what[160];
    std::snprintf(what, sizeof what,
                  "hipModuleLaunchKernel(grid %ux%ux%u, block %ux%ux%u, %u shared bytes)", grid.x,
                  grid.y, grid.z, block.x, block.y, block.z, shared_bytes);
    throw_error(error, what, /*launching=*/true);
  }
}

}  // namespace gpuplug::hip
