// SPDX-License-Identifier: Apache-2.0
// VulkanDevice: identity, the VkDevice and its queue.
#include "device.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

namespace gpuplug::vulkan {
namespace {

// The RFC 4122 text form: xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
void format_uuid(const std::uint8_t* b, char* out, std::size_t size) {
  std::snprintf(out, size, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                b[13], b[14], b[15]);
}

gpuplug_device_class_t class_of(VkPhysicalDeviceType type) noexcept {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return GPUPLUG_DEVICE_CLASS_DISCRETE_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return GPUPLUG_DEVICE_CLASS_INTEGRATED_GPU;
    // A Vulkan driver on the CPU (lavapipe, SwiftShader) emulates a GPU: `auto` must rank the
    // host backend, which runs the same CPU natively, above it.
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return GPUPLUG_DEVICE_CLASS_EMULATOR;
    default:
      return GPUPLUG_DEVICE_CLASS_ACCELERATOR;
  }
}

std::uint64_t device_local_bytes(const VkPhysicalDeviceMemoryProperties& m) noexcept {
  std::uint64_t total = 0;
  for (std::uint32_t i = 0; i < m.memoryHeapCount; ++i)
    if ((m.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0)
      total += m.memoryHeaps[i].size;
  return total;
}


}  // namespace

void describe(const DriverApi& api, std::uint32_t ordinal, gpuplug_device_info_t& out) {
  const PhysicalDevice& device = api.devices[ordinal];
  VkPhysicalDevicePCIBusInfoPropertiesEXT pci{};
  pci.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT;
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  subgroup.pNext = device.pci_bus_info ? &pci : nullptr;
  VkPhysicalDeviceDriverProperties driver_props{};
  driver_props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  driver_props.pNext = &subgroup;
  VkPhysicalDeviceIDProperties id{};
  id.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
  id.pNext = &driver_props;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = &id;
  api.get_physical_device_properties2(device.handle, &props);
  const VkPhysicalDeviceProperties& p = props.properties;

  out.ordinal = ordinal;
  std::snprintf(out.name, sizeof out.name, "%s", p.deviceName);
  format_uuid(id.deviceUUID, out.uuid, sizeof out.uuid);
  // The Vulkan version the device speaks: what a kernel module's SPIR-V is built against.
  std::snprintf(out.arch, sizeof out.arch, "vulkan%u.%u", VK_API_VERSION_MAJOR(p.apiVersion),
                VK_API_VERSION_MINOR(p.apiVersion));
  VkPhysicalDeviceMemoryProperties memory{};
  api.get_physical_device_memory_properties(device.handle, &memory);
  out.total_memory = device_local_bytes(memory);
  out.free_memory = 0;  // known to an instance (memory_info), not to a listing
  // Vulkan reports no compute-unit count. A CPU driver (lavapipe) runs on the host's threads, so
  // those are its units; a GPU is reported as 1 until a vendor extension gives the real count.
  out.compute_units = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU
                          ? std::max(1u, std::thread::hardware_concurrency())
                          : 1;
  out.managed_memory = 1;             // host-visible, coherent blocks
  // Managed memory is host-visible and coherent: the host may read and write it while a kernel
  // runs (as the sync gate's flags would be, on a plugin that ships the gate).
  out.concurrent_managed_access = 1;
  out.has_pci = device.pci_bus_info ? 1 : 0;
  out.pci_domain = pci.pciDomain;
  out.pci_bus = pci.pciBus;
  out.pci_device = pci.pciDevice;
  out.pci_function = pci.pciFunction;
  out.pci_vendor_id = p.vendorID <= 0xFFFF ? p.vendorID : 0;  // above: a Khronos vendor id
  out.pci_device_id = p.vendorID <= 0xFFFF ? p.deviceID : 0;
  out.warp_size = subgroup.subgroupSize;
  out.max_shared_memory_per_block = p.limits.maxComputeSharedMemorySize;
  std::snprintf(out.driver_version, sizeof out.driver_version, "%.31s %.31s",
                driver_props.driverName, driver_props.driverInfo);
  std::snprintf(out.runtime_version, sizeof out.runtime_version, "Vulkan %s",
                version_text(p.apiVersion).c_str());
  out.device_class = class_of(p.deviceType);
  out.reserved0 = 0;
  out.peak_gflops = 0;
}

VulkanDevice::VulkanDevice(const sdk::DeviceConfig& config)
    : sdk::Device(config), api_(driver()), physical_(api_.devices[config.ordinal]) {
  api_.get_physical_device_memory_properties(physical_.handle, &memory_props_);
  VkPhysicalDeviceMaintenance4Properties m4{};
  m4.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES;
  VkPhysicalDeviceMaintenance3Properties m3{};
  m3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = &m3;
  VkPhysicalDeviceProperties base{};
  api_.get_physical_device_properties(physical_.handle, &base);
  limits_ = base.limits;
  // maxBufferSize is Vulkan 1.3 (maintenance4); a 1.2 device's buffers are bounded by the
  // allocation limit only.
  if (base.apiVersion >= VK_API_VERSION_1_3) m3.pNext = &m4;
  api_.get_physical_device_properties2(physical_.handle, &props);
  max_allocation_ = m3.maxMemoryAllocationSize;
  if (base.apiVersion >= VK_API_VERSION_1_3 && m4.maxBufferSize < max_allocation_)
    max_allocation_ = m4.maxBufferSize;

  auto find_type = [&](VkMemoryPropertyFlags want, const char* what) {
    for (std::uint32_t i = 0; i < memory_props_.memoryTypeCount; ++i)
      if ((memory_props_.memoryTypes[i].propertyFlags & want) == want) return i;
    sdk::fail(GPUPLUG_STATUS_UNAVAILABLE,
              std::string("the device has no ") + what + " memory type");
  };
  device_type_ = find_type(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, "device-local");
  host_type_ = find_type(VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                         "host-visible coherent");

  // The default stream's queue and up to kMaxQueues - 1 more, which the other streams share.
  const std::uint32_t queue_count = std::clamp(physical_.queue_count, 1u, kMaxQueues);
  const std::vector<float> priorities(queue_count, 1.0f);
  VkDeviceQueueCreateInfo queue{};
  queue.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue.queueFamilyIndex = physical_.compute_family;
  queue.queueCount = queue_count;
  queue.pQueuePriorities = priorities.data();
  // The required features (driver.cpp checked them), and the optional ones kernels' SPIR-V
  // capabilities need, wherever offered (missing_capability names what a module lacks).
  VkPhysicalDeviceShaderClockFeaturesKHR offered_clock{};
  offered_clock.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR;
  VkPhysicalDeviceVulkan12Features offered12{};
  offered12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  offered12.pNext = physical_.shader_clock ? &offered_clock : nullptr;
  VkPhysicalDeviceVulkan11Features offered11{};
  offered11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  offered11.pNext = &offered12;
  VkPhysicalDeviceFeatures2 offered{};
  offered.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  offered.pNext = &offered11;
  api_.get_physical_device_features2(physical_.handle, &offered);
  features_.int8 = offered12.shaderInt8 == VK_TRUE;
  features_.float16 = offered12.shaderFloat16 == VK_TRUE;
  features_.push_constant8 = offered12.storagePushConstant8 == VK_TRUE;
  features_.memory_model = offered12.vulkanMemoryModel == VK_TRUE;
  features_.storage_buffer16 = offered11.storageBuffer16BitAccess == VK_TRUE;
  features_.push_constant16 = offered11.storagePushConstant16 == VK_TRUE;
  features_.int16 = offered.features.shaderInt16 == VK_TRUE;
  features_.device_clock = offered_clock.shaderDeviceClock == VK_TRUE;
  features_.float64 = offered.features.shaderFloat64 == VK_TRUE;
  const bool device_clock = features_.device_clock;
  VkPhysicalDeviceVulkan11Features v11{};
  v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  v11.storageBuffer16BitAccess = offered11.storageBuffer16BitAccess;
  v11.storagePushConstant16 = offered11.storagePushConstant16;
  VkPhysicalDeviceVulkan12Features v12{};
  v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  v12.bufferDeviceAddress = VK_TRUE;
  v12.timelineSemaphore = VK_TRUE;
  v12.storageBuffer8BitAccess = VK_TRUE;
  v12.shaderInt8 = offered12.shaderInt8;
  v12.shaderFloat16 = offered12.shaderFloat16;
  v12.storagePushConstant8 = offered12.storagePushConstant8;
  v12.vulkanMemoryModel = offered12.vulkanMemoryModel;
  // With the memory model on, a barrier at device scope (GLSL's memoryBarrierBuffer) is valid
  // only with this too.
  v12.vulkanMemoryModelDeviceScope = offered12.vulkanMemoryModelDeviceScope;
  VkPhysicalDeviceShaderClockFeaturesKHR clock{};
  clock.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR;
  clock.shaderDeviceClock = VK_TRUE;
  clock.shaderSubgroupClock = offered_clock.shaderSubgroupClock;
  v12.pNext = device_clock ? &clock : nullptr;
  v11.pNext = &v12;
  const char* clock_extension = VK_KHR_SHADER_CLOCK_EXTENSION_NAME;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &v11;
  features.features.shaderInt64 = VK_TRUE;
  features.features.shaderInt16 = offered.features.shaderInt16;
  features.features.shaderFloat64 = offered.features.shaderFloat64;
  VkDeviceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  info.pNext = &features;
  info.enabledExtensionCount = device_clock ? 1 : 0;
  info.ppEnabledExtensionNames = &clock_extension;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  check(api_.create_device(physical_.handle, &info, nullptr, &device_), "vkCreateDevice");
  try {
    vk_ = load_device_api(api_, device_);
    queues_.resize(queue_count);
    lingering_.resize(queue_count);
    for (std::uint32_t i = 0; i < queue_count; ++i)
      vk_.get_device_queue(device_, physical_.compute_family, i, &queues_[i]);
    VkCommandPoolCreateInfo pool{};
    pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pool.queueFamilyIndex = physical_.compute_family;
    check(vk_.create_command_pool(device_, &pool, nullptr, &pool_), "vkCreateCommandPool");
    const std::uint32_t bits = physical_.timestamp_bits;
    if (bits > 0) {
      timestamp_mask_ = bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
      timestamp_period_ns_ = limits_.timestampPeriod;
    }
    streams_.emplace(0, std::make_shared<Stream>(vk_, device_, 0, true, queues_[0], 0));
    staging_ = make_block(kStagingBytes, true);
    fill_handles();
  } catch (...) {
    release();  // what was made so far; the base is destroyed by the throw
    throw;
  }
}

VulkanDevice::~VulkanDevice() { release(); }

void VulkanDevice::release() noexcept {
  if (device_ == VK_NULL_HANDLE) return;
  if (vk_.device_wait_idle != nullptr) vk_.device_wait_idle(device_);
  // Idle: no submission holds a stream, command buffer or query pool any more.
  submissions_.clear();
  lingering_.clear();
  ring_ = StagingRing<Point>(kStagingBytes);
  for (auto& [id, s] : streams_) s->waits.clear();  // streams waiting on each other's events
  streams_.clear();
  for (auto& [id, e] : events_)
    if (e.pool != VK_NULL_HANDLE) vk_.destroy_query_pool(device_, e.pool, nullptr);
  events_.clear();
  if (vk_.destroy_buffer != nullptr) {
    for (auto& block : blocks_) destroy_block(*block);
    blocks_.clear();
    destroy_block(staging_);
  }
  if (pool_ != VK_NULL_HANDLE) vk_.destroy_command_pool(device_, pool_, nullptr);
  if (vk_.destroy_device != nullptr) vk_.destroy_device(device_, nullptr);
  device_ = VK_NULL_HANDLE;
}

void VulkanDevice::vendor_device_info(gpuplug_device_info_t& out) {
  describe(api_, config().ordinal, out);
  std::uint64_t total = 0;
  vendor_memory_info(out.free_memory, total);
}

}  // namespace gpuplug::vulkan
