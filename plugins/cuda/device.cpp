// SPDX-License-Identifier: Apache-2.0
// CudaDevice: the primary context, memory, copies, memset, streams, launch and device queries.
#include "device.hpp"

#include <cstdio>
#include <mutex>
#include <string>

#include "ledger.hpp"

namespace gpuplug::cuda {
namespace {

// Refuses a device that cannot be used, naming the reason (the driver's probe message).
void require_device(const DriverApi& api, std::uint32_t ordinal) {
  if (!api.available()) sdk::fail(GPUPLUG_STATUS_UNAVAILABLE, api.message);
  if (ordinal >= static_cast<std::uint32_t>(api.device_count)) {
    sdk::fail(GPUPLUG_STATUS_UNAVAILABLE, "no CUDA device " + std::to_string(ordinal) +
                                              " (the driver reports " +
                                              std::to_string(api.device_count) + ")");
  }
}

int attribute(const DriverApi& api, CUdevice device, CUdevice_attribute which, const char* what) {
  int value = 0;
  check(api.device_get_attribute(&value, which, device), what);
  return value;
}

// nvidia-smi's form: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
void format_uuid(const CUuuid& uuid, char* out, std::size_t size) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  std::snprintf(out, size,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
}

std::string bytes_op(const char* op, std::uint64_t bytes) {
  return std::string(op) + "(" + std::to_string(bytes) + " bytes)";
}

}  // namespace

void describe(const DriverApi& api, std::uint32_t ordinal, gpuplug_device_info_t& out) {
  require_device(api, ordinal);
  CUdevice device = 0;
  check(api.device_get(&device, static_cast<int>(ordinal)), "cuDeviceGet");
  out.ordinal = ordinal;
  check(api.device_get_name(out.name, sizeof out.name, device), "cuDeviceGetName");
  CUuuid uuid{};
  check(api.device_get_uuid(&uuid, device), "cuDeviceGetUuid");
  format_uuid(uuid, out.uuid, sizeof out.uuid);
  const int major =
      attribute(api, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability");
  const int minor =
      attribute(api, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability");
  // Compute capability 9.0 -> "sm_90", 12.0 -> "sm_120": nvcc's spelling.
  std::snprintf(out.arch, sizeof out.arch, "sm_%d%d", major, minor);
  std::size_t total = 0;
  check(api.device_total_mem(&total, device), "cuDeviceTotalMem");
  out.total_memory = total;
  out.compute_units = static_cast<std::uint32_t>(
      attribute(api, device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count"));
  out.managed_memory =
      attribute(api, device, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, "managed memory") == 1 ? 1 : 0;

  // Free memory needs a context; only borrow one that is already active (see device.hpp).
  out.free_memory = 0;
  unsigned int flags = 0;
  int active = 0;
  if (api.primary_ctx_get_state(device, &flags, &active) == CUDA_SUCCESS && active != 0) {
    // Pushed and popped, so the calling thread's current context is left as it was.
    CUcontext context = nullptr;
    if (api.primary_ctx_retain(&context, device) == CUDA_SUCCESS) {
      if (api.ctx_push_current(context) == CUDA_SUCCESS) {
        std::size_t free_bytes = 0;
        std::size_t total_bytes = 0;
        if (api.mem_get_info(&free_bytes, &total_bytes) == CUDA_SUCCESS)
          out.free_memory = free_bytes;
        CUcontext popped = nullptr;
        api.ctx_pop_current(&popped);
      }
      api.primary_ctx_release(device);
    }
  }
}

CudaDevice::CudaDevice(const sdk::DeviceConfig& config) : sdk::Device(config), api_(driver()) {
  require_device(api_, config.ordinal);
  check(api_.device_get(&device_, static_cast<int>(config.ordinal)), "cuDeviceGet");
  managed_memory_ =
      attribute(api_, device_, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, "managed memory attribute") == 1;
  if (api_.driver_version < kernel_toolkit_version()) {
    log(GPUPLUG_LOG_WARNING,
        "CUDA driver " + version_text(api_.driver_version) +
            " is older than the toolkit that built the kernels (" +
            version_text(kernel_toolkit_version()) +
            "): their SASS runs, but their PTX cannot be JIT-compiled for newer GPUs");
  }
  // Last, so that nothing can throw once the context is retained (the destructor releases it).
  check(api_.primary_ctx_retain(&context_, device_), "cuDevicePrimaryCtxRetain");
  if (const CUresult r = api_.ctx_set_current(context_); r != CUDA_SUCCESS) {
    api_.primary_ctx_release(device_);
    context_ = nullptr;
    check(r, "cuCtxSetCurrent");
  }
}

CudaDevice::~CudaDevice() {
  if (context_ == nullptr) return;
  api_.ctx_set_current(context_);
  std::unique_lock lock(streams_mutex_);
  for (CUstream s : streams_) {
    if (api_.stream_destroy(s) != CUDA_SUCCESS)
      log(GPUPLUG_LOG_WARNING, "cuStreamDestroy failed in destroy");
  }
  streams_.clear();
  lock.unlock();
  // Leave no dangling current context on this thread once the last retain goes away.
  api_.ctx_set_current(nullptr);
  if (const CUresult r = api_.primary_ctx_release(device_); r != CUDA_SUCCESS) {
    try {
      log(GPUPLUG_LOG_WARNING, describe_error("cuDevicePrimaryCtxRelease", r));
    } catch (...) {  // a destructor must not throw; the warning is all that is lost
    }
  }
}

void CudaDevice::make_current() const { check(api_.ctx_set_current(context_), "cuCtxSetCurrent"); }

CUstream CudaDevice::checked_stream(std::uint64_t stream) const {
  if (stream == 0) return nullptr;
  auto s = reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(stream));
  std::shared_lock lock(streams_mutex_);
  GPUPLUG_EXPECTS(
      streams_.contains(s), GPUPLUG_STATUS_INVALID_ARGUMENT,
      "unknown stream " + std::to_string(stream) + " (not created by this backend, or destroyed)");
  return s;
}

void CudaDevice::check_device_range(std::uint64_t ptr, std::uint64_t bytes, const char* op,
                                    const char* role) {
  // Zero bytes touch nothing; null and wrapping ranges the SDK has refused already.
  if (bytes == 0 || ptr == 0) return;
  // A ledger allocation: the SDK has checked the range against it.
  if (ledger().find(ptr)) return;
  {
    std::shared_lock lock(globals_mutex_);
    auto it = globals_.upper_bound(ptr);
    if (it != globals_.begin()) {
      --it;
      if (ptr - it->first < it->second.bytes && bytes <= it->second.bytes - (ptr - it->first))
        return;
    }
  }
  // Memory from elsewhere in this process (e.g. the application's own allocation): accepted
  // when the driver knows a live allocation holding the whole range.
  CUdeviceptr start = 0;
  std::size_t size = 0;
  if (api_.pointer_get_attribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr) ==
          CUDA_SUCCESS &&
      api_.pointer_get_attribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr) == CUDA_SUCCESS &&
      ptr >= start && ptr - start < size && bytes <= size - (ptr - start)) {
    return;
  }
  char text[64];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(ptr));
  sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
            std::string(op) + ": " + role + " " + text + " (" + std::to_string(bytes) +
                " bytes) is not device memory of this backend: not allocated here, already freed, "
                "or past the end of its allocation");
}

// ---- memory ---------------------------------------------------------------------------------

std::uint64_t CudaDevice::vendor_alloc(std::uint64_t bytes) {
  make_current();
  CUdeviceptr p = 0;
  check(api_.mem_alloc(&p, bytes), bytes_op("cuMemAlloc", bytes).c_str());
  return p;
}

std::uint64_t CudaDevice::vendor_alloc_managed(std::uint64_t bytes) {
  GPUPLUG_EXPECTS(managed_memory_, GPUPLUG_STATUS_UNSUPPORTED, "device has no managed memory");
  make_current();
  CUdeviceptr p = 0;
  check(api_.mem_alloc_managed(&p, bytes, CU_MEM_ATTACH_GLOBAL),
        bytes_op("cuMemAllocManaged", bytes).c_str());
  return p;
}

void CudaDevice::vendor_free(std::uint64_t ptr,
                             gpuplug_alloc_kind_t /*kind: cuMemFree frees both*/) {
  make_current();
  check(api_.mem_free(static_cast<CUdeviceptr>(ptr)), "cuMemFree");
}

void CudaDevice::memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) {
  make_current();
  std::size_t f = 0;
  std::size_t t = 0;
  check(api_.mem_get_info(&f, &t), "cuMemGetInfo");
  free_bytes = f;
  total_bytes = t;
}

void CudaDevice::device_info(gpuplug_device_info_t& out) {
  // The context is retained, so describe() finds it active and fills free_memory too.
  describe(api_, config().ordinal, out);
}

// ---- copies and memset ---------------------------------------------------------------------
// Synchronous copies go through the legacy default stream, so they are ordered after earlier
// work on every stream of this backend (all are blocking streams).

void CudaDevice::copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) {
  make_current();
  check_device_range(dst, bytes, "copy_h2d", "destination");
  check(api_.memcpy_htod(dst, src, bytes), bytes_op("cuMemcpyHtoD", bytes).c_str());
}

void CudaDevice::copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) {
  make_current();
  check_device_range(src, bytes, "copy_d2h", "source");
  check(api_.memcpy_dtoh(dst, src, bytes), bytes_op("cuMemcpyDtoH", bytes).c_str());
}

void CudaDevice::copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) {
  make_current();
  check_device_range(dst, bytes, "copy_d2d", "destination");
  check_device_range(src, bytes, "copy_d2d", "source");
  check(api_.memcpy_dtod(dst, src, bytes), bytes_op("cuMemcpyDtoD", bytes).c_str());
  // cuMemcpyDtoD is asynchronous with respect to the host; the ABI's synchronous copy is not.
  check(api_.stream_synchronize(nullptr), "cuStreamSynchronize after cuMemcpyDtoD");
}

void CudaDevice::copy_h2d_async(std::uint64_t dst, const void* src, std::uint64_t bytes,
                                std::uint64_t stream) {
  const CUstream s = checked_stream(stream);
  make_current();
  check_device_range(dst, bytes, "copy_h2d_async", "destination");
  check(api_.memcpy_htod_async(dst, src, bytes, s), bytes_op("cuMemcpyHtoDAsync", bytes).c_str());
}

void CudaDevice::copy_d2h_async(void* dst, std::uint64_t src, std::uint64_t bytes,
                                std::uint64_t stream) {
  const CUstream s = checked_stream(stream);
  make_current();
  check_device_range(src, bytes, "copy_d2h_async", "source");
  check(api_.memcpy_dtoh_async(dst, src, bytes, s), bytes_op("cuMemcpyDtoHAsync", bytes).c_str());
}

void CudaDevice::copy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                                std::uint64_t stream) {
  const CUstream s = checked_stream(stream);
  make_current();
  check_device_range(dst, bytes, "copy_d2d_async", "destination");
  check_device_range(src, bytes, "copy_d2d_async", "source");
  check(api_.memcpy_dtod_async(dst, src, bytes, s), bytes_op("cuMemcpyDtoDAsync", bytes).c_str());
}

void CudaDevice::memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                           std::uint64_t stream) {
  const CUstream s = checked_stream(stream);
  make_current();
  check_device_range(dst, bytes, "memset_d8", "destination");
  check(api_.memset_d8_async(dst, value, bytes, s), bytes_op("cuMemsetD8Async", bytes).c_str());
}

// ---- streams ---------------------------------------------------------------------------------

std::uint64_t CudaDevice::stream_create() {
  make_current();
  CUstream s = nullptr;
  check(api_.stream_create(&s, CU_STREAM_DEFAULT), "cuStreamCreate");
  try {
    std::unique_lock lock(streams_mutex_);
    streams_.insert(s);
  } catch (...) {
    api_.stream_destroy(s);
    throw;
  }
  return reinterpret_cast<std::uintptr_t>(s);
}

void CudaDevice::stream_destroy(std::uint64_t stream) {
  GPUPLUG_EXPECTS(stream != 0, GPUPLUG_STATUS_INVALID_ARGUMENT,
                  "the default stream cannot be destroyed");
  auto s = reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(stream));
  {
    // Taken out of the set first, so a concurrent destroy of the same handle cannot pass too.
    std::unique_lock lock(streams_mutex_);
    GPUPLUG_EXPECTS(streams_.erase(s) == 1, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "unknown stream " + std::to_string(stream) +
                        " (not created by this backend, or destroyed)");
  }
  make_current();
  // The ABI promises the stream's work is done when destroy returns; cuStreamDestroy alone
  // returns at once and lets the work finish later.
  const CUresult synced = api_.stream_synchronize(s);
  check(api_.stream_destroy(s), "cuStreamDestroy");
  check(synced, "cuStreamSynchronize before cuStreamDestroy");
}

void CudaDevice::stream_synchronize(std::uint64_t stream) {
  const CUstream s = checked_stream(stream);
  make_current();
  check(api_.stream_synchronize(s), "cuStreamSynchronize");
}

void CudaDevice::synchronize() {
  make_current();
  check(api_.ctx_synchronize(), "cuCtxSynchronize");
}

// ---- launch ------------------------------------------------------------------------------------

void CudaDevice::launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                        std::uint32_t shared_bytes, std::uint64_t stream, void** params) {
  CUresult r = api_.ctx_set_current(context_);
  if (r == CUDA_SUCCESS) {
    r = api_.launch_kernel(reinterpret_cast<CUfunction>(static_cast<std::uintptr_t>(function)),
                           grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes,
                           reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(stream)), params,
                           nullptr);
  }
  if (r != CUDA_SUCCESS) [[unlikely]] {
    char dims[160];
    std::snprintf(dims, sizeof dims,
                  "cuLaunchKernel(grid %ux%ux%u, block %ux%ux%u, %u shared bytes)", grid.x, grid.y,
                  grid.z, block.x, block.y, block.z, shared_bytes);
    sdk::fail(status_of(r, /*launching=*/true), describe_error(dims, r));
  }
}

}  // namespace gpuplug::cuda
