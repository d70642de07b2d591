// SPDX-License-Identifier: Apache-2.0
// The Vulkan loader: dlopen libvulkan.so.1, create the instance, check each device's features.
#include "driver.hpp"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "failure.hpp"

namespace gpuplug::vulkan {
namespace {

// The Vulkan loader's soname: a bare name, so dlopen searches only the system's library path
// (ld.so.cache, LD_LIBRARY_PATH), never the working directory.
constexpr const char* kLibrary = "libvulkan.so.1";
// The oldest API gpuplug asks for: buffer device addresses and timeline semaphores are core
// from Vulkan 1.2 on.
constexpr std::uint32_t kMinimumApi = VK_API_VERSION_1_2;

void set_message(DriverApi& api, gpuplug_probe_reason_t reason, const char* format, ...)
    __attribute__((format(printf, 3, 4)));

void set_message(DriverApi& api, gpuplug_probe_reason_t reason, const char* format, ...) {
  api.reason = reason;
  va_list args;
  va_start(args, format);
  std::vsnprintf(api.message, sizeof api.message, format, args);
  va_end(args);
}

// The first feature gpuplug needs that `device` lacks, or nullptr. Also fills the queue family
// and the pci_bus_info flag.
const char* check_device(const DriverApi& api, PhysicalDevice& device) {
  VkPhysicalDeviceProperties props{};
  api.get_physical_device_properties(device.handle, &props);
  std::snprintf(device.name, sizeof device.name, "%s", props.deviceName);
  if (props.apiVersion < kMinimumApi) return "Vulkan 1.2";
  VkPhysicalDeviceVulkan12Features v12{};
  v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &v12;
  api.get_physical_device_features2(device.handle, &features);
  if (v12.bufferDeviceAddress != VK_TRUE) return "bufferDeviceAddress";
  if (v12.timelineSemaphore != VK_TRUE) return "timelineSemaphore";
  if (features.features.shaderInt64 != VK_TRUE) return "shaderInt64";
  if (v12.storageBuffer8BitAccess != VK_TRUE) return "storageBuffer8BitAccess";

  std::uint32_t families = 0;
  api.get_physical_device_queue_family_properties(device.handle, &families, nullptr);
  std::vector<VkQueueFamilyProperties> family(families);
  api.get_physical_device_queue_family_properties(device.handle, &families, family.data());
  bool found = false;
  for (std::uint32_t i = 0; i < families && !found; ++i) {
    if ((family[i].queueFlags & VK_QUEUE_COMPUTE_BIT) != 0 && family[i].queueCount > 0) {
      device.compute_family = i;
      device.queue_count = family[i].queueCount;
      device.timestamp_bits = family[i].timestampValidBits;
      found = true;
    }
  }
  if (!found) return "a compute queue";

  std::uint32_t count = 0;
  api.enumerate_device_extension_properties(device.handle, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  api.enumerate_device_extension_properties(device.handle, nullptr, &count, extensions.data());
  for (const VkExtensionProperties& e : extensions) {
    if (std::strcmp(e.extensionName, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME) == 0)
      device.pci_bus_info = true;
    if (std::strcmp(e.extensionName, VK_KHR_SHADER_CLOCK_EXTENSION_NAME) == 0)
      device.shader_clock = true;
  }
  return nullptr;
}

void load(DriverApi& api) noexcept {
  dlerror();  // NOLINT(concurrency-mt-unsafe): runs once, under the static's guard
  void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();  // NOLINT(concurrency-mt-unsafe): see above
    set_message(api, GPUPLUG_PROBE_DRIVER_MISSING, "driver missing: %s not found (%s)", kLibrary,
                why != nullptr ? why : "no reason given");
    return;
  }
  // Kept open for the process: the instance and every device table point into it.
  api.get_instance_proc_addr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (api.get_instance_proc_addr == nullptr) {
    set_message(api, GPUPLUG_PROBE_ERROR,
                "%s is not a Vulkan loader: it lacks vkGetInstanceProcAddr", kLibrary);
    return;
  }
  auto enumerate_version = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
      api.get_instance_proc_addr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));
  auto create_instance = reinterpret_cast<PFN_vkCreateInstance>(
      api.get_instance_proc_addr(VK_NULL_HANDLE, "vkCreateInstance"));
  api.loader_version = VK_API_VERSION_1_0;  // a 1.0 loader has no vkEnumerateInstanceVersion
  if (enumerate_version != nullptr && enumerate_version(&api.loader_version) != VK_SUCCESS)
    api.loader_version = VK_API_VERSION_1_0;
  if (api.loader_version < kMinimumApi || create_instance == nullptr) {
    set_message(api, GPUPLUG_PROBE_DRIVER_TOO_OLD,
                "driver too old: the Vulkan loader %s speaks Vulkan %s; gpuplug needs Vulkan %s",
                kLibrary, version_text(api.loader_version).c_str(),
                version_text(kMinimumApi).c_str());
    return;
  }

  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "gpuplug";
  app.pEngineName = "gpuplug";
  app.apiVersion = api.loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : kMinimumApi;
  api.instance_version = app.apiVersion;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  if (const VkResult r = create_instance(&info, nullptr, &api.instance); r != VK_SUCCESS) {
    api.instance = VK_NULL_HANDLE;
    // INCOMPATIBLE_DRIVER: the loader found no driver (ICD) for Vulkan 1.2, or none at all.
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
      set_message(api, GPUPLUG_PROBE_NO_DEVICE,
                  "no device: %s (no Vulkan driver with Vulkan %s is installed; on Debian, "
                  "mesa-vulkan-drivers has lavapipe)",
                  describe_error("vkCreateInstance", r).c_str(), version_text(kMinimumApi).c_str());
    else
      set_message(api, GPUPLUG_PROBE_ERROR, "%s", describe_error("vkCreateInstance", r).c_str());
    return;
  }
  const char* missing = nullptr;
#define GPUPLUG_VK_RESOLVE(member, symbol)                                                        \
  api.member = reinterpret_cast<PFN_##symbol>(api.get_instance_proc_addr(api.instance, #symbol)); \
  if (api.member == nullptr && missing == nullptr) missing = #symbol;
  GPUPLUG_VK_INSTANCE_ENTRY_POINTS(GPUPLUG_VK_RESOLVE)
#undef GPUPLUG_VK_RESOLVE
  if (missing != nullptr) {
    set_message(api, GPUPLUG_PROBE_ERROR, "%s (Vulkan %s) does not provide %s", kLibrary,
                version_text(api.loader_version).c_str(), missing);
    return;
  }

  std::uint32_t count = 0;
  if (const VkResult r = api.enumerate_physical_devices(api.instance, &count, nullptr);
      r != VK_SUCCESS) {
    set_message(api, GPUPLUG_PROBE_ERROR, "%s",
                describe_error("vkEnumeratePhysicalDevices", r).c_str());
    return;
  }
  std::vector<VkPhysicalDevice> handles(count);
  if (count > 0) api.enumerate_physical_devices(api.instance, &count, handles.data());
  // The summary names every device; those lacking a feature with it, as the reason they are
  // not offered.
  std::string skipped;
  for (const VkPhysicalDevice handle : handles) {
    PhysicalDevice device;
    device.handle = handle;
    if (const char* lacks = check_device(api, device); lacks != nullptr) {
      skipped += std::string(skipped.empty() ? "" : "; ") + device.name + " lacks " + lacks;
    } else if (api.device_count < DriverApi::kMaxDevices) {
      api.devices[api.device_count++] = device;
    }
  }
  if (api.device_count == 0) {
    set_message(api, GPUPLUG_PROBE_NO_DEVICE, "no device: %s",
                skipped.empty()
                    ? "the Vulkan loader lists no physical device"
                    : ("no Vulkan device has what gpuplug needs (" + skipped + ")").c_str());
    return;
  }
  set_message(
      api, GPUPLUG_PROBE_AVAILABLE, "Vulkan %s, %u device%s%s%s%s",
      version_text(api.loader_version).c_str(), api.device_count, api.device_count == 1 ? "" : "s",
      skipped.empty() ? "" : " (not offered: ", skipped.c_str(), skipped.empty() ? "" : ")");
}

}  // namespace

const DriverApi& driver() noexcept {
  // Built once, never destroyed (see driver.hpp): storage for the object, constructed in place.
  alignas(DriverApi) static unsigned char storage[sizeof(DriverApi)];
  static const DriverApi* const loaded = [] {
    auto* api = new (storage) DriverApi();
    try {
      load(*api);
    } catch (...) {  // std::bad_alloc from a message or a vector
      set_message(*api, GPUPLUG_PROBE_ERROR, "loading %s: out of host memory", kLibrary);
    }
    return api;
  }();
  return *loaded;
}

DeviceApi load_device_api(const DriverApi& api, VkDevice device) {
  DeviceApi table;
#define GPUPLUG_VK_RESOLVE(member, symbol)                                                  \
  table.member = reinterpret_cast<PFN_##symbol>(api.get_device_proc_addr(device, #symbol)); \
  if (table.member == nullptr)                                                              \
    sdk::fail(GPUPLUG_STATUS_UNAVAILABLE, "the Vulkan device does not provide " #symbol);
  GPUPLUG_VK_DEVICE_ENTRY_POINTS(GPUPLUG_VK_RESOLVE)
#undef GPUPLUG_VK_RESOLVE
  return table;
}

std::string describe_error(std::string_view operation, VkResult result) {
  const char* name = nullptr;
  switch (result) {
#define GPUPLUG_VK_CASE(x) \
  case x:                  \
    name = #x;             \
    break;
    GPUPLUG_VK_CASE(VK_NOT_READY)
    GPUPLUG_VK_CASE(VK_TIMEOUT)
    GPUPLUG_VK_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    GPUPLUG_VK_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    GPUPLUG_VK_CASE(VK_ERROR_INITIALIZATION_FAILED)
    GPUPLUG_VK_CASE(VK_ERROR_DEVICE_LOST)
    GPUPLUG_VK_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    GPUPLUG_VK_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    GPUPLUG_VK_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    GPUPLUG_VK_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    GPUPLUG_VK_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    GPUPLUG_VK_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    GPUPLUG_VK_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    GPUPLUG_VK_CASE(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
#undef GPUPLUG_VK_CASE
    default:
      break;
  }
  std::string text(operation);
  text += ": ";
  text += name != nullptr ? name : "VkResult " + std::to_string(static_cast<int>(result));
  return text;
}

gpuplug_status_t status_of(VkResult result) noexcept {
  switch (result) {
    case VK_SUCCESS:
      return GPUPLUG_STATUS_SUCCESS;
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_TOO_MANY_OBJECTS:
      return GPUPLUG_STATUS_OUT_OF_MEMORY;
    case VK_ERROR_FEATURE_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return GPUPLUG_STATUS_UNSUPPORTED;
    default:
      return GPUPLUG_STATUS_DEVICE_ERROR;
  }
}

void throw_error(VkResult result, std::string_view operation) {
  sdk::fail(status_of(result), describe_error(operation, result));
}

std::string version_text(std::uint32_t version) {
  return std::to_string(VK_API_VERSION_MAJOR(version)) + "." +
         std::to_string(VK_API_VERSION_MINOR(version)) + "." +
         std::to_string(VK_API_VERSION_PATCH(version));
}

}  // namespace gpuplug::vulkan
