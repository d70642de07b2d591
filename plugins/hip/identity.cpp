// SPDX-License-Identifier: Apache-2.0
// A HIP device's identity and properties (describe_device, kernel preflight's architecture):
// name, UUID, gcnArchName, memory, CUs, PCI address, versions, read through the loaded runtime.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "device.hpp"

namespace gpuplug::hip {

std::string with_ordinal(const char* operation, int ordinal) {
  return std::string(operation) + "(device " + std::to_string(ordinal) + ")";
}

int device_attribute(const DriverApi& hip, hipDeviceAttribute_t which, const char* name,
                     int ordinal) {
  int value = 0;
  const hipError_t error = hip.device_get_attribute(&value, which, ordinal);
  if (error != hipSuccess)
    throw_error(error, std::string("hipDeviceGetAttribute(") + name + ", device " +
                           std::to_string(ordinal) + ")");
  return value;
}

namespace {

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
      device_attribute(hip, hipDeviceAttributeMultiprocessorCount, "MultiprocessorCount", ordinal));
  out.managed_memory =
      device_attribute(hip, hipDeviceAttributeManagedMemory, "ManagedMemory", ordinal) == 1 ? 1 : 0;
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
      device_attribute(hip, hipDeviceAttributeWarpSize, "WarpSize", ordinal));
  out.max_shared_memory_per_block = static_cast<std::uint32_t>(device_attribute(
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

std::string device_arch(const DriverApi& hip, int ordinal) { return arch_name(hip, ordinal); }

}  // namespace gpuplug::hip
