// SPDX-License-Identifier: Apache-2.0
// The Vulkan loader: libvulkan.so.1 opened with dlopen once per process, never linked; one
// process-wide VkInstance and the physical devices gpuplug can use.
#pragma once

// vulkan.h is included for its types only (VK_NO_PROTOTYPES): every call goes through the
// tables below, resolved with vkGetInstanceProcAddr / vkGetDeviceProcAddr, so the plugin loads
// (and says why Vulkan is unusable) where no Vulkan loader is installed.
#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <gpuplug/abi.h>
#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace gpuplug::vulkan {

// Instance-level entry points (vkGetInstanceProcAddr with the instance). X(member, symbol).
#define GPUPLUG_VK_INSTANCE_ENTRY_POINTS(X)                                                \
  X(destroy_instance, vkDestroyInstance)                                                   \
  X(enumerate_physical_devices, vkEnumeratePhysicalDevices)                                \
  X(get_physical_device_properties, vkGetPhysicalDeviceProperties)                         \
  X(get_physical_device_properties2, vkGetPhysicalDeviceProperties2)                       \
  X(get_physical_device_features2, vkGetPhysicalDeviceFeatures2)                           \
  X(get_physical_device_memory_properties, vkGetPhysicalDeviceMemoryProperties)            \
  X(get_physical_device_queue_family_properties, vkGetPhysicalDeviceQueueFamilyProperties) \
  X(enumerate_device_extension_properties, vkEnumerateDeviceExtensionProperties)           \
  X(create_device, vkCreateDevice)                                                         \
  X(get_device_proc_addr, vkGetDeviceProcAddr)

// Device-level entry points (vkGetDeviceProcAddr with the device), resolved per VkDevice.
#define GPUPLUG_VK_DEVICE_ENTRY_POINTS(X)                          \
  X(destroy_device, vkDestroyDevice)                               \
  X(device_wait_idle, vkDeviceWaitIdle)                            \
  X(get_device_queue, vkGetDeviceQueue)                            \
  X(queue_submit, vkQueueSubmit)                                   \
  X(create_command_pool, vkCreateCommandPool)                      \
  X(destroy_command_pool, vkDestroyCommandPool)                    \
  X(allocate_command_buffers, vkAllocateCommandBuffers)            \
  X(reset_command_buffer, vkResetCommandBuffer)                    \
  X(begin_command_buffer, vkBeginCommandBuffer)                    \
  X(end_command_buffer, vkEndCommandBuffer)                        \
  X(cmd_copy_buffer, vkCmdCopyBuffer)                              \
  X(cmd_fill_buffer, vkCmdFillBuffer)                              \
  X(cmd_pipeline_barrier, vkCmdPipelineBarrier)                    \
  X(create_semaphore, vkCreateSemaphore)                           \
  X(destroy_semaphore, vkDestroySemaphore)                         \
  X(get_semaphore_counter_value, vkGetSemaphoreCounterValue)       \
  X(wait_semaphores, vkWaitSemaphores)                             \
  X(create_buffer, vkCreateBuffer)                                 \
  X(destroy_buffer, vkDestroyBuffer)                               \
  X(get_buffer_memory_requirements, vkGetBufferMemoryRequirements) \
  X(allocate_memory, vkAllocateMemory)                             \
  X(free_memory, vkFreeMemory)                                     \
  X(bind_buffer_memory, vkBindBufferMemory)                        \
  X(map_memory, vkMapMemory)                                       \
  X(get_buffer_device_address, vkGetBufferDeviceAddress)          \
  X(create_shader_module, vkCreateShaderModule)                    \
  X(destroy_shader_module, vkDestroyShaderModule)                  \
  X(create_pipeline_layout, vkCreatePipelineLayout)                \
  X(destroy_pipeline_layout, vkDestroyPipelineLayout)              \
  X(create_compute_pipelines, vkCreateComputePipelines)            \
  X(destroy_pipeline, vkDestroyPipeline)                           \
  X(cmd_bind_pipeline, vkCmdBindPipeline)                          \
  X(cmd_push_constants, vkCmdPushConstants)                        \
  X(cmd_dispatch_base, vkCmdDispatchBase)                          \
  X(create_query_pool, vkCreateQueryPool)                          \
  X(destroy_query_pool, vkDestroyQueryPool)                        \
  X(cmd_reset_query_pool, vkCmdResetQueryPool)                     \
  X(cmd_write_timestamp, vkCmdWriteTimestamp)                      \
  X(get_query_pool_results, vkGetQueryPoolResults)

/// One physical device the instance enumerated, usable or not.
struct PhysicalDevice {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE] = {};
  const char* missing = nullptr;     // the first required feature it lacks (nullptr: usable)
  std::uint32_t compute_family = 0;  // a queue family with VK_QUEUE_COMPUTE_BIT
  std::uint32_t queue_count = 1;     // its queueCount
  std::uint32_t timestamp_bits = 0;  // its timestampValidBits (0: no timestamps)
  bool pci_bus_info = false;         // VK_EXT_pci_bus_info is offered
  bool shader_clock = false;         // VK_KHR_shader_clock is offered (the sync gate's clock)
};

/// The loaded library, the process's instance and its devices.
///
/// Lifetime: one per process, built on first use by driver() and never destroyed (the instance
/// stays for the process: backends created one after another share it, and no code runs at
/// exit). Trivially destructible, as the plugin rules require.
struct DriverApi {
  static constexpr std::uint32_t kMaxDevices = 64;
  gpuplug_probe_reason_t reason = GPUPLUG_PROBE_ERROR;  // GPUPLUG_PROBE_AVAILABLE when usable
  char message[480] = {};                               // why unusable, or a summary
  std::uint32_t loader_version = 0;                     // vkEnumerateInstanceVersion
  std::uint32_t instance_version = 0;                   // the API version the instance asked for
  VkInstance instance = VK_NULL_HANDLE;
  PFN_vkGetInstanceProcAddr get_instance_proc_addr = nullptr;
  // The usable devices, in enumeration order: gpuplug's ordinals.
  PhysicalDevice devices[kMaxDevices] = {};
  std::uint32_t device_count = 0;

// NOLINTNEXTLINE(bugprone-macro-parentheses): a declaration, not an expression
#define GPUPLUG_VK_MEMBER(member, symbol) PFN_##symbol member = nullptr;
  GPUPLUG_VK_INSTANCE_ENTRY_POINTS(GPUPLUG_VK_MEMBER)
#undef GPUPLUG_VK_MEMBER

  bool available() const noexcept { return reason == GPUPLUG_PROBE_AVAILABLE; }
};
static_assert(std::is_trivially_destructible_v<DriverApi>,
              "driver state must add no exit-time destructor");

/// The device-level table of one VkDevice.
struct DeviceApi {
#define GPUPLUG_VK_MEMBER(member, symbol) PFN_##symbol member = nullptr;
  GPUPLUG_VK_DEVICE_ENTRY_POINTS(GPUPLUG_VK_MEMBER)
#undef GPUPLUG_VK_MEMBER
};

/// The process's Vulkan state, loaded (dlopen, instance, devices and their features) on the first
/// call. Thread-safe; never throws; check available() and read reason/message.
const DriverApi& driver() noexcept;

/// Resolves every device entry point of `device`; Failure(UNAVAILABLE) naming one missing.
DeviceApi load_device_api(const DriverApi& api, VkDevice device);

/// "vkAllocateMemory: VK_ERROR_OUT_OF_DEVICE_MEMORY".
std::string describe_error(std::string_view operation, VkResult result);
/// VK_ERROR_OUT_OF_*_MEMORY: OUT_OF_MEMORY; VK_ERROR_DEVICE_LOST and the rest: DEVICE_ERROR.
gpuplug_status_t status_of(VkResult result) noexcept;
/// Throws sdk::Failure(status_of(result), describe_error(operation, result)).
[[noreturn]] void throw_error(VkResult result, std::string_view operation);
inline void check(VkResult result, std::string_view operation) {
  if (result != VK_SUCCESS) [[unlikely]]
    throw_error(result, operation);
}

/// "1.3.255" for a VK_MAKE_API_VERSION value.
std::string version_text(std::uint32_t version);

}  // namespace gpuplug::vulkan
