// SPDX-License-Identifier: Apache-2.0
// CudaDevice: the primary context, memory, copies, memset, launch and device queries (streams
// and events in streams.cpp).
#include "device.hpp"

#include <cstdio>
#include <string>

#include "gpuplug/support/text.hpp"

namespace gpuplug::cuda {
namespace {

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

// FP32 lanes per SM by compute capability (the CUDA C++ Programming Guide's "Arithmetic
// Instructions" table); 0 where not known, and then no peak is claimed.
int fp32_lanes_per_sm(int major, int minor) noexcept {
  switch (major) {
    case 7:
      return 64;  // Volta, Turing
    case 8:
      return minor == 0 ? 64 : 128;  // A100: 64; GA10x, Orin, Ada: 128
    case 9:
    case 10:
    case 12:
      return 128;  // Hopper, Blackwell
    default:
      return 0;
  }
}

// The ABI 1.1 fields. CUDA's PCI "device id" attribute is the slot number (the d of
// domain:bus:device.function), not the PCI device id, which the driver API does not report: 0.
void describe_identity(const DriverApi& api, CUdevice device, int major, int minor,
                       gpuplug_device_info_t& out) {
  out.has_pci = 1;
  out.pci_domain = static_cast<std::uint32_t>(
      attribute(api, device, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, "PCI domain"));
  out.pci_bus =
      static_cast<std::uint32_t>(attribute(api, device, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, "PCI bus"));
  out.pci_device = static_cast<std::uint32_t>(
      attribute(api, device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, "PCI device"));
  out.pci_function = 0;  // CUDA devices are function 0 (nvidia-smi prints ".0" too)
  out.pci_vendor_id = 0x10de;
  out.pci_device_id = 0;
  out.warp_size =
      static_cast<std::uint32_t>(attribute(api, device, CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size"));
  // What a launch may ask once the kernel opts in (cuFuncSetAttribute); the default 48 KiB
  // where the device has no opt-in maximum.
  int shared = 0;
  if (api.device_get_attribute(&shared, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                               device) != CUDA_SUCCESS ||
      shared <= 0)
    shared = attribute(api, device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
                       "max shared memory per block");
  out.max_shared_memory_per_block = shared > 0 ? static_cast<std::uint64_t>(shared) : 0;
  std::snprintf(out.driver_version, sizeof out.driver_version, "%s",
                version_text(api.driver_version).c_str());
  out.runtime_version[0] = '\0';  // the plugin calls the driver API only
  out.device_class = attribute(api, device, CU_DEVICE_ATTRIBUTE_INTEGRATED, "integrated") == 1
                         ? GPUPLUG_DEVICE_CLASS_INTEGRATED_GPU
                         : GPUPLUG_DEVICE_CLASS_DISCRETE_GPU;
  // SMs x FP32 lanes x 2 (an FMA) x the peak clock, when the driver still reports the clock.
  int clock_khz = 0;
  if (api.device_get_attribute(&clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device) != CUDA_SUCCESS)
    clock_khz = 0;
  const int lanes = fp32_lanes_per_sm(major, minor);
  out.peak_gflops = clock_khz > 0 && lanes > 0
                        ? static_cast<std::uint64_t>(out.compute_units) *
                              static_cast<std::uint64_t>(lanes) * 2 *
                              static_cast<std::uint64_t>(clock_khz) / 1000000
                        : 0;
}

// Allocation failures name the size; "cuMemAlloc(4096 bytes): CUDA_ERROR_OUT_OF_MEMORY (...)".
void check_allocation(CUresult result, const char* operation, std::uint64_t bytes) {
  if (result != CUDA_SUCCESS)
    throw_error(result, std::string(operation) + "(" + std::to_string(bytes) + " bytes)");
}

}  // namespace

void describe(const DriverApi& api, std::uint32_t ordinal, gpuplug_device_info_t& out) {
  CUdevice device = 0;
  check(api.device_get(&device, static_cast<int>(ordinal)), "cuDeviceGet");
  out.ordinal = ordinal;
  check(api.device_get_name(out.name, sizeof out.name, device), "cuDeviceGetName");
  CUuuid uuid{};
  // cuDeviceGetUuid_v2 (cuGetProcAddress resolves the name at CUDA_VERSION 13.0: driver.hpp).
  check(api.device_get_uuid(&uuid, device), "cuDeviceGetUuid_v2");
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
  // 0 (e.g. Windows, consumer GPUs under some drivers): the host must not touch managed memory
  // while kernels run on the device; see docs/architecture.md.
  out.concurrent_managed_access =
      out.managed_memory != 0 &&
              attribute(api, device, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
                        "concurrent managed access") == 1
          ? 1
          : 0;
  describe_identity(api, device, major, minor, out);

  // Free memory needs a context: the one this plugin holds, else only borrow one that is already
  // active (see device.hpp). Pushed and popped, so the calling thread's current context is left
  // as it was.
  out.free_memory = 0;
  auto read_free_memory = [&](CUcontext context) {
    if (api.ctx_push_current(context) != CUDA_SUCCESS) return;
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    if (api.mem_get_info(&free_bytes, &total_bytes) == CUDA_SUCCESS) out.free_memory = free_bytes;
    CUcontext popped = nullptr;
    api.ctx_pop_current(&popped);
  };
  if (CUcontext held = held_primary_context(ordinal); held != nullptr) {
    read_free_memory(held);
    return;
  }
  unsigned int flags = 0;
  int active = 0;
  if (api.primary_ctx_get_state(device, &flags, &active) == CUDA_SUCCESS && active != 0) {
    CUcontext context = nullptr;
    if (api.primary_ctx_retain(&context, device) == CUDA_SUCCESS) {
      read_free_memory(context);
      api.primary_ctx_release(device);
    }
  }
}

CudaDevice::CudaDevice(const sdk::DeviceConfig& config) : sdk::Device(config), api_(driver()) {
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
  // Retained once per process; the calling thread's current context is left alone.
  context_ = retained_primary_context(api_, config.ordinal, device_);
}

ContextScope::ContextScope(const DriverApi& api, CUcontext context)
    : ContextScope(api, context, std::nothrow) {
  check(result_, "cuCtxPushCurrent");
}

ContextScope::ContextScope(const DriverApi& api, CUcontext context, std::nothrow_t) noexcept
    : api_(api) {
  CUcontext current = nullptr;
  result_ = api_.ctx_get_current(&current);
  if (result_ != CUDA_SUCCESS || current == context) return;
  result_ = api_.ctx_push_current(context);
  pushed_ = result_ == CUDA_SUCCESS;
}

ContextScope::~ContextScope() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  api_.ctx_pop_current(&popped);  // cannot fail: the push above is the top of the stack
}

// ---- memory ---------------------------------------------------------------------------------

std::uint64_t CudaDevice::vendor_alloc(std::uint64_t bytes) {
  const ContextScope current = make_current();
  CUdeviceptr p = 0;
  check_allocation(api_.mem_alloc(&p, bytes), "cuMemAlloc", bytes);
  return p;
}

std::uint64_t CudaDevice::vendor_alloc_managed(std::uint64_t bytes) {
  GPUPLUG_EXPECTS(managed_memory_, GPUPLUG_STATUS_UNSUPPORTED, "device has no managed memory");
  const ContextScope current = make_current();
  CUdeviceptr p = 0;
  check_allocation(api_.mem_alloc_managed(&p, bytes, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged",
                   bytes);
  return p;
}

void CudaDevice::vendor_free(std::uint64_t ptr,
                             gpuplug_alloc_kind_t /*kind: cuMemFree frees both*/) {
  const ContextScope current = make_current();
  check(api_.mem_free(static_cast<CUdeviceptr>(ptr)), "cuMemFree");
}

void CudaDevice::vendor_memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) {
  const ContextScope current = make_current();
  std::size_t f = 0;
  std::size_t t = 0;
  check(api_.mem_get_info(&f, &t), "cuMemGetInfo");
  free_bytes = f;
  total_bytes = t;
}

void CudaDevice::vendor_device_info(gpuplug_device_info_t& out) {
  // The context is retained, so describe() finds it active and fills free_memory too.
  describe(api_, config().ordinal, out);
}

sdk::Access CudaDevice::vendor_owns_range(std::uint64_t ptr, std::uint64_t bytes) {
  // Memory from elsewhere in this process (e.g. the application's own allocation): accepted
  // when the driver knows a live allocation holding the whole range.
  const ContextScope current = make_current();
  CUdeviceptr start = 0;
  std::size_t size = 0;
  const bool known =
      api_.pointer_get_attribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr) ==
          CUDA_SUCCESS &&
      api_.pointer_get_attribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr) == CUDA_SUCCESS;
  const bool inside = known && ptr >= start && ptr - start < size && bytes <= size - (ptr - start);
  return inside ? sdk::Access::read_write : sdk::Access::none;
}

// ---- interop handles (ABI 1.2) ------------------------------------------------------------

sdk::NativeStreamHandles CudaDevice::vendor_native_handles(std::uint64_t stream) {
  // The primary context is retained for the process (see the class comment): valid for as long
  // as any backend of this device lives, and the one the CUDA runtime (cudaSetDevice) uses.
  return sdk::NativeStreamHandles{static_cast<std::int32_t>(device_), context_, as_stream(stream)};
}

void CudaDevice::vendor_check_import(std::uint64_t address, std::uint64_t bytes) {
  const auto where = [&] {
    return "import_memory: " + support::hex(address) + " + " + std::to_string(bytes) + " bytes";
  };
  const ContextScope current = make_current();
  int ordinal = -1;
  if (const CUresult error =
          api_.pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address);
      error != CUDA_SUCCESS)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              where() + " is not memory the CUDA driver knows (" +
                  describe_error("cuPointerGetAttribute(DEVICE_ORDINAL)", error) + ")");
  if (ordinal != static_cast<int>(config().ordinal))
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              where() + " is memory of CUDA device " + std::to_string(ordinal) + ", not of cuda:" +
                  std::to_string(config().ordinal) + " (import it on the backend of that device)");
  CUdeviceptr start = 0;
  std::size_t size = 0;
  if (api_.pointer_get_attribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, address) ==
          CUDA_SUCCESS &&
      api_.pointer_get_attribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, address) ==
          CUDA_SUCCESS &&
      (address < start || bytes > size - (address - start)))
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              where() + " runs past the end of its CUDA allocation of " + std::to_string(size) +
                  " bytes at " + support::hex(start));
}

std::uint64_t CudaDevice::vendor_import_stream(void* native) {
  const ContextScope current = make_current();
  // The driver refuses a stream it does not know (the SDK then keeps nothing).
  if (const CUresult error = api_.stream_synchronize(static_cast<CUstream>(native));
      error != CUDA_SUCCESS)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "import_stream: native stream " +
                  support::hex(reinterpret_cast<std::uintptr_t>(native)) + " is not a stream of cuda:" +
                  std::to_string(config().ordinal) + " (" +
                  describe_error("cuStreamSynchronize", error) + ")");
  return reinterpret_cast<std::uintptr_t>(native);
}

// ---- copies and memset ---------------------------------------------------------------------
// Synchronous copies go through the legacy default stream, so they are ordered after earlier
// work on every stream of this backend (all are blocking streams). The ABI promises the data is
// in place when they return. cuMemcpyHtoD from pageable memory may return once the source is
// staged, before the DMA lands in device memory, so it is followed by a synchronize of the
// legacy default stream (cheap: the copy already waited for that stream). cuMemcpyDtoH returns
// only once the copy has completed, pageable or pinned destination alike (CUDA's "API
// synchronization behavior"), so it needs nothing more.

void CudaDevice::vendor_copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) {
  const ContextScope current = make_current();
  check(api_.memcpy_htod(dst, src, bytes), "cuMemcpyHtoD");
  check(api_.stream_synchronize(nullptr), "cuStreamSynchronize after cuMemcpyHtoD");
}

void CudaDevice::vendor_copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) {
  const ContextScope current = make_current();
  check(api_.memcpy_dtoh(dst, src, bytes), "cuMemcpyDtoH");
}

void CudaDevice::vendor_copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) {
  const ContextScope current = make_current();
  check(api_.memcpy_dtod(dst, src, bytes), "cuMemcpyDtoD");
  // cuMemcpyDtoD is asynchronous with respect to the host; the ABI's synchronous copy is not.
  check(api_.stream_synchronize(nullptr), "cuStreamSynchronize after cuMemcpyDtoD");
}

void CudaDevice::vendor_copy_h2d_async(std::uint64_t dst, const void* src, std::uint64_t bytes,
                                       std::uint64_t stream) {
  const ContextScope current = make_current();
  const void* from = stage_for_capture(src, bytes, stream);  // graphs.cpp
  check(api_.memcpy_htod_async(dst, from, bytes, as_stream(stream)), "cuMemcpyHtoDAsync");
}

void CudaDevice::vendor_copy_h2d_async_retained(std::uint64_t dst, const void* src,
                                                std::uint64_t bytes, std::uint64_t stream) {
  const ContextScope current = make_current();
  check(api_.memcpy_htod_async(dst, src, bytes, as_stream(stream)), "cuMemcpyHtoDAsync");
}

void CudaDevice::vendor_copy_d2h_async(void* dst, std::uint64_t src, std::uint64_t bytes,
                                       std::uint64_t stream) {
  const ContextScope current = make_current();
  check(api_.memcpy_dtoh_async(dst, src, bytes, as_stream(stream)), "cuMemcpyDtoHAsync");
}

void CudaDevice::vendor_copy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                                       std::uint64_t stream) {
  const ContextScope current = make_current();
  check(api_.memcpy_dtod_async(dst, src, bytes, as_stream(stream)), "cuMemcpyDtoDAsync");
}

void CudaDevice::vendor_copy_peer_async(std::uint64_t dst, sdk::Device& source,
                                        std::uint64_t src, std::uint64_t bytes,
                                        std::uint64_t stream) {
  if (api_.memcpy_peer_async == nullptr)
    sdk::fail(GPUPLUG_STATUS_UNSUPPORTED,
              "copy_peer_async: the CUDA driver lacks cuMemcpyPeerAsync");
  // The core passes only devices of this plugin (abi.h): the source is a CudaDevice.
  const CUcontext src_context = static_cast<const CudaDevice&>(source).context_;
  const ContextScope current = make_current();
  check(api_.memcpy_peer_async(dst, context_, src, src_context, bytes, as_stream(stream)),
        "cuMemcpyPeerAsync");
}

void* CudaDevice::vendor_host_alloc_pinned(std::uint64_t bytes) {
  if (api_.mem_host_alloc == nullptr || api_.mem_free_host == nullptr)
    sdk::fail(GPUPLUG_STATUS_UNSUPPORTED,
              "host_alloc_pinned: the CUDA driver lacks cuMemHostAlloc or cuMemFreeHost");
  const ContextScope current = make_current();
  void* p = nullptr;
  // Portable: the staging memory of a copy between two devices is used by both contexts.
  check(api_.mem_host_alloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
  return p;
}

void CudaDevice::vendor_host_free_pinned(void* p) noexcept {
  if (api_.mem_free_host == nullptr) return;
  try {
    const ContextScope current = make_current();
    api_.mem_free_host(p);
  } catch (...) {  // the context could not be made current: the memory stays (it is the process's)
  }
}

void CudaDevice::vendor_memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                                  std::uint64_t stream) {
  const ContextScope current = make_current();
  check(api_.memset_d8_async(dst, value, bytes, as_stream(stream)), "cuMemsetD8Async");
}

// ---- launch ------------------------------------------------------------------------------------

void CudaDevice::vendor_launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                               std::uint32_t shared_bytes, std::uint64_t stream, void** params) {
  // The SDK leaves launch's stream to the vendor. A destroyed or never-created CUstream handed
  // to cuLaunchKernel is undefined behaviour (a freed object, a wild pointer), so it is refused
  // here: a shared lock, nothing beside the driver call's cost.
  if (stream != 0) streams().check("launch", stream);
  const ContextScope current(api_, context_, std::nothrow);
  CUresult r = current.result();
  if (r == CUDA_SUCCESS) {
    r = api_.launch_kernel(reinterpret_cast<CUfunction>(static_cast<std::uintptr_t>(function)),
                           grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes,
                           as_stream(stream), params, nullptr);
  }
  if (r != CUDA_SUCCESS) [[unlikely]] {
    char dims[160];
    std::snprintf(dims, sizeof dims,
                  "cuLaunchKernel(grid %ux%ux%u, block %ux%ux%u, %u shared bytes)", grid.x, grid.y,
                  grid.z, block.x, block.y, block.z, shared_bytes);
    throw_error(r, dims, /*launching=*/true);
  }
}

}  // namespace gpuplug::cuda
