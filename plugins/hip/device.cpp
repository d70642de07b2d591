// SPDX-License-Identifier: Apache-2.0
// HipDevice: device properties, memory, copies, streams and launch through the loaded runtime.
#include "device.hpp"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gpuplug/support/text.hpp"

namespace gpuplug::hip {
namespace {

std::string with_ordinal(const char* operation, int ordinal) {
  return std::string(operation) + "(device " + std::to_string(ordinal) + ")";
}

int attribute(const DriverApi& hip, hipDeviceAttribute_t which, const char* name, int ordinal) {
  int value = 0;
  const hipError_t error = hip.device_get_attribute(&value, which, ordinal);
  if (error != hipSuccess)
    throw_error(error, std::string("hipDeviceGetAttribute(") + name + ", device " +
                           std::to_string(ordinal) + ")");
  return value;
}

// gcnArchName ("gfx90a:sramecc+:xnack-"), the one field read from hipDeviceProp_t. The buffer is
// far larger than any release's structure (see driver.hpp on layouts), and the result is only
// trusted when it looks like an AMDGPU target, so a layout surprise yields "" rather than junk.
std::string arch_name(const DriverApi& hip, int ordinal) {
  std::vector<std::uint64_t> buffer(2048, 0);  // 16 KiB, 8-byte aligned, zeroed
  auto* props = reinterpret_cast<hipDeviceProp_t*>(buffer.data());
  const hipError_t error = hip.get_device_properties(props, ordinal);
  if (error != hipSuccess) throw_error(error, with_ordinal("hipGetDeviceProperties", ordinal));
  char arch[sizeof props->gcnArchName + 1] = {};
  std::memcpy(arch,
              reinterpret_cast<const char*>(buffer.data()) + offsetof(hipDeviceProp_t, gcnArchName),
              sizeof props->gcnArchName);
  if (std::strncmp(arch, "gfx", 3) != 0) return {};
  return arch;
}

// HIP on AMD reports the 16 characters of the GPU's unique id (rocm-smi's "GPU-<hex>") as the
// UUID bytes; those read back as "GPU-<16 hex digits>". Anything else is printed in the
// canonical 8-4-4-4-12 form. All zero (no id) is "".
std::string uuid_text(const hipUUID& uuid) {
  bool zero = true;
  bool hex_text = true;
  for (char c : uuid.bytes) {
    zero = zero && c == 0;
    hex_text =
        hex_text && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'));
  }
  if (zero) return {};
  if (hex_text) return "GPU-" + std::string(uuid.bytes, sizeof uuid.bytes);
  char out[37];
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  std::snprintf(out, sizeof out,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

void copy_text(char* dst, std::size_t size, const std::string& text) {
  std::snprintf(dst, size, "%s", text.c_str());
}

// "6.1.41134" for 60141134 (HIP_VERSION = major * 10000000 + minor * 100000 + patch); "" for 0.
std::string full_version_text(int version) {
  if (version <= 0) return {};
  return std::to_string(version / 10000000) + "." + std::to_string(version / 100000 % 100) + "." +
         std::to_string(version % 100000);
}

// An attribute a runtime may not know (older releases, other platforms): `fallback` then.
int attribute_or(const DriverApi& hip, hipDeviceAttribute_t which, int ordinal, int fallback) {
  int value = 0;
  return hip.device_get_attribute(&value, which, ordinal) == hipSuccess ? value : fallback;
}

// hipDeviceGetPCIBusId's "0000:c1:00.0" (domain:bus:device.function, hex). The runtime's text is
// read within the buffer and only believed when it is exactly that form; else no address.
void read_pci_address(const DriverApi& hip, int ordinal, gpuplug_device_info_t& out) {
  out.has_pci = 0;
  if (hip.device_get_pci_bus_id == nullptr) return;
  char text[64] = {};
  if (hip.device_get_pci_bus_id(text, sizeof text - 1, ordinal) != hipSuccess) return;
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  int used = 0;
  if (std::sscanf(text, "%8x:%2x:%2x.%1x%n", &domain, &bus, &device, &function, &used) != 4 ||
      text[used] != '\0' || device > 0x1f || function > 7)
    return;
  out.has_pci = 1;
  out.pci_domain = domain;
  out.pci_bus = bus;
  out.pci_device = device;
  out.pci_function = function;
}

void* as_ptr(std::uint64_t p) noexcept { return reinterpret_cast<void*>(p); }

hipStream_t as_stream(std::uint64_t stream) noexcept {
  return reinterpret_cast<hipStream_t>(stream);
}

hipEvent_t as_event(std::uint64_t event) noexcept { return reinterpret_cast<hipEvent_t>(event); }

}  // namespace

void describe(const DriverApi& hip, int ordinal, gpuplug_device_info_t& out) {
  out.ordinal = static_cast<std::uint32_t>(ordinal);
  char name[256] = {};
  check(hip.device_get_name(name, sizeof name - 1, ordinal),
        with_ordinal("hipDeviceGetName", ordinal));
  copy_text(out.name, sizeof out.name, name);
  copy_text(out.arch, sizeof out.arch, arch_name(hip, ordinal));

  out.uuid[0] = '\0';
  if (hip.device_get_uuid != nullptr) {  // optional: older runtimes lack it
    hipUUID uuid{};
    if (hip.device_get_uuid(&uuid, ordinal) == hipSuccess)
      copy_text(out.uuid, sizeof out.uuid, uuid_text(uuid));
  }

  std::size_t total = 0;
  check(hip.device_total_mem(&total, ordinal), with_ordinal("hipDeviceTotalMem", ordinal));
  out.total_memory = total;
  out.compute_units = static_cast<std::uint32_t>(
      attribute(hip, hipDeviceAttributeMultiprocessorCount, "MultiprocessorCount", ordinal));
  out.managed_memory =
      attribute(hip, hipDeviceAttributeManagedMemory, "ManagedMemory", ordinal) == 1 ? 1 : 0;
  // Whether the host may touch managed memory while kernels run (XNACK-enabled MI200/MI300 and
  // APUs). Asked leniently: a runtime that does not know the attribute answers "no", the safe
  // reading (synchronize before touching managed memory from the host).
  int concurrent = 0;
  if (out.managed_memory != 0 &&
      hip.device_get_attribute(&concurrent, hipDeviceAttributeConcurrentManagedAccess, ordinal) !=
          hipSuccess)
    concurrent = 0;
  out.concurrent_managed_access = concurrent == 1 ? 1 : 0;

  // ABI 1.1 identity and capabilities. The PCI device id is not in HIP's API: 0.
  read_pci_address(hip, ordinal, out);
  out.pci_vendor_id = 0x1002;  // AMD
  out.pci_device_id = 0;
  out.warp_size = static_cast<std::uint32_t>(
      attribute(hip, hipDeviceAttributeWarpSize, "WarpSize", ordinal));
  out.max_shared_memory_per_block = static_cast<std::uint32_t>(attribute(
      hip, hipDeviceAttributeMaxSharedMemoryPerBlock, "MaxSharedMemoryPerBlock", ordinal));
  int driver_version = 0;
  if (hip.driver_get_version == nullptr || hip.driver_get_version(&driver_version) != hipSuccess)
    driver_version = 0;
  copy_text(out.driver_version, sizeof out.driver_version, full_version_text(driver_version));
  copy_text(out.runtime_version, sizeof out.runtime_version,
            full_version_text(hip.runtime_version));
  out.device_class = attribute_or(hip, hipDeviceAttributeIntegrated, ordinal, 0) == 1
                         ? GPUPLUG_DEVICE_CLASS_INTEGRATED_GPU
                         : GPUPLUG_DEVICE_CLASS_DISCRETE_GPU;
  // FP32 lanes per CU differ by generation (packed FP32 on CDNA2+, dual issue on RDNA3): no
  // honest number from the attributes alone.
  out.peak_gflops = 0;

  // hipMemGetInfo answers for the calling thread's current device: switch, ask, switch back.
  int previous = -1;
  const bool known = hip.get_device(&previous) == hipSuccess;
  const bool restore = known && previous != ordinal;
  if (!known || previous != ordinal)
    check(hip.set_device(ordinal), with_ordinal("hipSetDevice", ordinal));
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  const hipError_t queried = hip.mem_get_info(&free_bytes, &total_bytes);
  if (restore) (void)hip.set_device(previous);
  check(queried, with_ordinal("hipMemGetInfo", ordinal));
  out.free_memory = free_bytes;
}

HipDevice::HipDevice(const sdk::DeviceConfig& config, const DriverApi& hip)
    : sdk::Device(config), hip_(hip), ordinal_(static_cast<int>(config.ordinal)) {
  make_current();
  arch_ = arch_name(hip_, ordinal_);
  managed_memory_ =
      attribute(hip_, hipDeviceAttributeManagedMemory, "ManagedMemory", ordinal_) == 1;
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

void HipDevice::vendor_memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                                 std::uint64_t stream) {
  make_current();
  check(hip_.memset_d8_async(as_ptr(dst), value, bytes, as_stream(stream)), "hipMemsetD8Async");
}

// ---- streams ---------------------------------------------------------------------------------

std::uint64_t HipDevice::vendor_stream_create() {
  make_current();
  hipStream_t stream = nullptr;
  check(hip_.stream_create(&stream), "hipStreamCreate");
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
  check(hip_.stream_synchronize(as_stream(stream)), "hipStreamSynchronize");
}

void HipDevice::vendor_synchronize() {
  make_current();
  check(hip_.stream_synchronize(nullptr), "hipStreamSynchronize(default stream)");
  for (const std::uint64_t s : streams().list())
    check(hip_.stream_synchronize(as_stream(s)), "hipStreamSynchronize");
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

std::string device_arch(const DriverApi& hip, int ordinal) { return arch_name(hip, ordinal); }

}  // namespace gpuplug::hip
