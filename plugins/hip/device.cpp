// SPDX-License-Identifier: Apache-2.0
// HipDevice: device properties, memory, copies, streams and launch through the loaded runtime.
#include "device.hpp"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

namespace gpuplug::hip {
namespace {

std::string with_ordinal(const char* operation, int ordinal) {
  return std::string(operation) + "(device " + std::to_string(ordinal) + ")";
}

int attribute(const DriverApi& hip, hipDeviceAttribute_t which, const char* name, int ordinal) {
  int value = 0;
  const hipError_t error = hip.device_get_attribute(&value, which, ordinal);
  if (error != hipSuccess)
    fail_hip(
        hip,
        std::string("hipDeviceGetAttribute(") + name + ", device " + std::to_string(ordinal) + ")",
        error);
  return value;
}

// gcnArchName ("gfx90a:sramecc+:xnack-"), the one field read from hipDeviceProp_t. The buffer is
// far larger than any release's structure (see driver.hpp on layouts), and the result is only
// trusted when it looks like an AMDGPU target, so a layout surprise yields "" rather than junk.
std::string arch_name(const DriverApi& hip, int ordinal) {
  std::vector<std::uint64_t> buffer(2048, 0);  // 16 KiB, 8-byte aligned, zeroed
  auto* props = reinterpret_cast<hipDeviceProp_t*>(buffer.data());
  const hipError_t error = hip.get_device_properties(props, ordinal);
  if (error != hipSuccess) fail_hip(hip, with_ordinal("hipGetDeviceProperties", ordinal), error);
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

std::string hex(std::uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

void copy_text(char* dst, std::size_t size, const std::string& text) {
  std::snprintf(dst, size, "%s", text.c_str());
}

}  // namespace

void describe(const DriverApi& hip, int ordinal, gpuplug_device_info_t& out) {
  out.ordinal = static_cast<std::uint32_t>(ordinal);
  char name[256] = {};
  const hipError_t named = hip.device_get_name(name, sizeof name - 1, ordinal);
  if (named != hipSuccess) fail_hip(hip, with_ordinal("hipDeviceGetName", ordinal), named);
  copy_text(out.name, sizeof out.name, name);
  copy_text(out.arch, sizeof out.arch, arch_name(hip, ordinal));

  out.uuid[0] = '\0';
  if (hip.device_get_uuid != nullptr) {  // optional: older runtimes lack it
    hipUUID uuid{};
    if (hip.device_get_uuid(&uuid, ordinal) == hipSuccess)
      copy_text(out.uuid, sizeof out.uuid, uuid_text(uuid));
  }

  std::size_t total = 0;
  const hipError_t totalled = hip.device_total_mem(&total, ordinal);
  if (totalled != hipSuccess) fail_hip(hip, with_ordinal("hipDeviceTotalMem", ordinal), totalled);
  out.total_memory = total;
  out.compute_units = static_cast<std::uint32_t>(
      attribute(hip, hipDeviceAttributeMultiprocessorCount, "MultiprocessorCount", ordinal));
  out.managed_memory =
      attribute(hip, hipDeviceAttributeManagedMemory, "ManagedMemory", ordinal) == 1 ? 1 : 0;

  // hipMemGetInfo answers for the calling thread's current device: switch, ask, switch back.
  int previous = -1;
  const bool known = hip.get_device(&previous) == hipSuccess;
  const bool restore = known && previous != ordinal;
  if (!known || previous != ordinal) {
    const hipError_t set = hip.set_device(ordinal);
    if (set != hipSuccess) fail_hip(hip, with_ordinal("hipSetDevice", ordinal), set);
  }
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  const hipError_t queried = hip.mem_get_info(&free_bytes, &total_bytes);
  if (restore) (void)hip.set_device(previous);
  if (queried != hipSuccess) fail_hip(hip, with_ordinal("hipMemGetInfo", ordinal), queried);
  out.free_memory = free_bytes;
}

HipDevice::HipDevice(const sdk::DeviceConfig& config, const DriverApi& hip)
    : sdk::Device(config), hip_(hip), ordinal_(static_cast<int>(config.ordinal)) {
  if (!hip_.available()) sdk::fail(GPUPLUG_STATUS_UNAVAILABLE, hip_.message);
  if (config.ordinal >= static_cast<std::uint32_t>(hip_.device_count))
    sdk::fail(GPUPLUG_STATUS_UNAVAILABLE,
              "no device hip:" + std::to_string(config.ordinal) + " (" +
                  std::to_string(hip_.device_count) +
                  (hip_.device_count == 1 ? " AMD GPU)" : " AMD GPUs)"));
  make_current();
  arch_ = arch_name(hip_, ordinal_);
  managed_memory_ =
      attribute(hip_, hipDeviceAttributeManagedMemory, "ManagedMemory", ordinal_) == 1;
  log(GPUPLUG_LOG_DEBUG, "hip:" + std::to_string(ordinal_) + " opened (" +
                             (arch_.empty() ? std::string("arch unknown") : arch_) + ", " +
                             hip_.message + ")");
}

HipDevice::~HipDevice() {
  // The SDK's shutdown() already synchronized and freed everything else; streams are ours.
  int current = -1;
  if (hip_.get_device(&current) != hipSuccess || current != ordinal_)
    (void)hip_.set_device(ordinal_);
  for (hipStream_t stream : streams_) (void)hip_.stream_destroy(stream);
}

void HipDevice::make_current() const {
  int current = -1;
  if (hip_.get_device(&current) == hipSuccess && current == ordinal_) return;
  const hipError_t error = hip_.set_device(ordinal_);
  if (error != hipSuccess) [[unlikely]]
    fail_hip(hip_, with_ordinal("hipSetDevice", ordinal_), error);
}

hipStream_t HipDevice::stream_of(std::uint64_t stream, const char* operation) const {
  if (stream == 0) return nullptr;
  auto* handle = reinterpret_cast<hipStream_t>(stream);
  std::shared_lock lock(streams_mutex_);
  if (streams_.find(handle) == streams_.end())
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT, std::string(operation) + ": unknown stream " +
                                                   hex(stream) +
                                                   " (not created by this backend, or destroyed)");
  return handle;
}

// ---- memory ----------------------------------------------------------------------------------

std::uint64_t HipDevice::vendor_alloc(std::uint64_t bytes) {
  make_current();
  void* ptr = nullptr;
  const hipError_t error = hip_.malloc(&ptr, bytes);
  if (error != hipSuccess) fail_hip(hip_, "hipMalloc(" + std::to_string(bytes) + " bytes)", error);
  return reinterpret_cast<std::uint64_t>(ptr);
}

std::uint64_t HipDevice::vendor_alloc_managed(std::uint64_t bytes) {
  if (!managed_memory_)
    sdk::fail(GPUPLUG_STATUS_UNSUPPORTED,
              "managed memory is not supported on hip:" + std::to_string(ordinal_) + " (" +
                  (arch_.empty() ? std::string("arch unknown") : arch_) +
                  "): hipDeviceAttributeManagedMemory is 0");
  if (arch_.find("xnack+") == std::string::npos && !xnack_warned_.exchange(true))
    log(GPUPLUG_LOG_WARNING,
        "managed memory on hip:" + std::to_string(ordinal_) + " (" +
            (arch_.empty() ? std::string("arch unknown") : arch_) +
            ") with XNACK off: pages will not migrate on GPU access, so the GPU reads them over "
            "the bus (enable XNACK with HSA_XNACK=1 on a kernel that supports it)");
  make_current();
  void* ptr = nullptr;
  const hipError_t error = hip_.malloc_managed(&ptr, bytes, hipMemAttachGlobal);
  if (error != hipSuccess)
    fail_hip(hip_, "hipMallocManaged(" + std::to_string(bytes) + " bytes)", error);
  return reinterpret_cast<std::uint64_t>(ptr);
}

void HipDevice::vendor_free(std::uint64_t ptr, gpuplug_alloc_kind_t /*kind: hipFree frees both*/) {
  make_current();
  check(hip_, hip_.free(reinterpret_cast<void*>(ptr)), "hipFree");
}

void HipDevice::memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) {
  make_current();
  std::size_t free_now = 0;
  std::size_t total = 0;
  check(hip_, hip_.mem_get_info(&free_now, &total), "hipMemGetInfo");
  free_bytes = free_now;
  total_bytes = total;
}

void HipDevice::device_info(gpuplug_device_info_t& out) { describe(hip_, ordinal_, out); }

// ---- copies and memset -----------------------------------------------------------------------
// hipMemcpy is synchronous for the host and ordered on the null stream, which is how the ABI's
// synchronous copies are specified. Managed pointers are valid device pointers for every kind.

void HipDevice::copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) {
  make_current();
  check(hip_, hip_.memcpy(reinterpret_cast<void*>(dst), src, bytes, hipMemcpyHostToDevice),
        "hipMemcpy(host to device)");
}

void HipDevice::copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) {
  make_current();
  check(hip_, hip_.memcpy(dst, reinterpret_cast<const void*>(src), bytes, hipMemcpyDeviceToHost),
        "hipMemcpy(device to host)");
}

void HipDevice::copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) {
  make_current();
  check(hip_,
        hip_.memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes,
                    hipMemcpyDeviceToDevice),
        "hipMemcpy(device to device)");
}

void HipDevice::copy_h2d_async(std::uint64_t dst, const void* src, std::uint64_t bytes,
                               std::uint64_t stream) {
  hipStream_t s = stream_of(stream, "hipMemcpyAsync(host to device)");
  make_current();
  check(hip_, hip_.memcpy_async(reinterpret_cast<void*>(dst), src, bytes, hipMemcpyHostToDevice, s),
        "hipMemcpyAsync(host to device)");
}

void HipDevice::copy_d2h_async(void* dst, std::uint64_t src, std::uint64_t bytes,
                               std::uint64_t stream) {
  hipStream_t s = stream_of(stream, "hipMemcpyAsync(device to host)");
  make_current();
  check(hip_,
        hip_.memcpy_async(dst, reinterpret_cast<const void*>(src), bytes, hipMemcpyDeviceToHost, s),
        "hipMemcpyAsync(device to host)");
}

void HipDevice::copy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                               std::uint64_t stream) {
  hipStream_t s = stream_of(stream, "hipMemcpyAsync(device to device)");
  make_current();
  check(hip_,
        hip_.memcpy_async(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes,
                          hipMemcpyDeviceToDevice, s),
        "hipMemcpyAsync(device to device)");
}

void HipDevice::memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                          std::uint64_t stream) {
  hipStream_t s = stream_of(stream, "hipMemsetD8Async");
  make_current();
  check(hip_, hip_.memset_d8_async(reinterpret_cast<hipDeviceptr_t>(dst), value, bytes, s),
        "hipMemsetD8Async");
}

// ---- streams ---------------------------------------------------------------------------------

std::uint64_t HipDevice::stream_create() {
  make_current();
  hipStream_t stream = nullptr;
  check(hip_, hip_.stream_create(&stream), "hipStreamCreate");
  try {
    std::unique_lock lock(streams_mutex_);
    streams_.insert(stream);
  } catch (...) {
    (void)hip_.stream_destroy(stream);
    throw;
  }
  return reinterpret_cast<std::uint64_t>(stream);
}

void HipDevice::stream_destroy(std::uint64_t stream) {
  if (stream == 0)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "hipStreamDestroy: the default stream (0) is not "
              "destroyable");
  hipStream_t handle = stream_of(stream, "hipStreamDestroy");
  {
    std::unique_lock lock(streams_mutex_);
    if (streams_.erase(handle) == 0)  // destroyed by another thread since stream_of
      sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "hipStreamDestroy: stream already destroyed");
  }
  make_current();
  // The ABI promises the stream's work is done when this returns; hipStreamDestroy alone does
  // not wait. The stream is destroyed even when its work failed, and that failure reported.
  const hipError_t waited = hip_.stream_synchronize(handle);
  const hipError_t destroyed = hip_.stream_destroy(handle);
  check(hip_, waited, "hipStreamSynchronize (before hipStreamDestroy)");
  check(hip_, destroyed, "hipStreamDestroy");
}

void HipDevice::stream_synchronize(std::uint64_t stream) {
  hipStream_t s = stream_of(stream, "hipStreamSynchronize");
  make_current();
  check(hip_, hip_.stream_synchronize(s), "hipStreamSynchronize");
}

void HipDevice::synchronize() {
  make_current();
  std::vector<hipStream_t> streams;
  {
    std::shared_lock lock(streams_mutex_);
    streams.assign(streams_.begin(), streams_.end());
  }
  check(hip_, hip_.stream_synchronize(nullptr), "hipStreamSynchronize(default stream)");
  for (hipStream_t s : streams) check(hip_, hip_.stream_synchronize(s), "hipStreamSynchronize");
}

// ---- launch ----------------------------------------------------------------------------------

void HipDevice::launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                       std::uint32_t shared_bytes, std::uint64_t stream, void** params) {
  make_current();
  const hipError_t error = hip_.module_launch_kernel(
      reinterpret_cast<hipFunction_t>(function), grid.x, grid.y, grid.z, block.x, block.y, block.z,
      shared_bytes, reinterpret_cast<hipStream_t>(stream), params, nullptr);
  if (error != hipSuccess) [[unlikely]] {
    char what[160];
    std::snprintf(what, sizeof what,
                  "hipModuleLaunchKernel(grid %ux%ux%u, block %ux%ux%u, %u shared bytes)", grid.x,
                  grid.y, grid.z, block.x, block.y, block.z, shared_bytes);
    fail_hip(hip_, what, error, /*launching=*/true);
  }
}

}  // namespace gpuplug::hip
