// SPDX-License-Identifier: Apache-2.0
// One axpy dispatch on vulkan:0 through gpuplug (launch, then synchronize) against the same
// dispatch through raw Vulkan calls: the same SPIR-V (kernels/vulkan's axpy), the same block
// size, recorded into a command buffer, submitted and waited for with a fence, as an application
// without gpuplug does when its arguments change each call. Both run in the same process on the
// same device, alternately, and the ratio of the medians is printed:
//   n=<elements>: raw <us> us, gpuplug <us> us, raw / gpuplug = <ratio>x
// A plain timed program (no Google Benchmark): `bench_vulkan_dispatch [repetitions]`. Exits 0,
// saying why, when vulkan:0 is not usable.
#include <vulkan/vulkan.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <gpuplug/gpuplug.hpp>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) throw std::runtime_error(std::string(what) + ": VkResult " + std::to_string(r));
}

// The raw path: one device, two buffers with device addresses, the axpy pipeline for 256 threads.
class RawAxpy {
 public:
  explicit RawAxpy(std::uint32_t n) {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ici.pApplicationInfo = &app;
    check(vkCreateInstance(&ici, nullptr, &instance_), "vkCreateInstance");
    std::uint32_t count = 1;
    VkPhysicalDevice physical = VK_NULL_HANDLE;
    const VkResult listed = vkEnumeratePhysicalDevices(instance_, &count, &physical);
    if ((listed != VK_SUCCESS && listed != VK_INCOMPLETE) || count == 0)
      throw std::runtime_error("no Vulkan device");
    std::uint32_t families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, nullptr);
    std::vector<VkQueueFamilyProperties> props(families);
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, props.data());
    while (family_ < families && (props[family_].queueFlags & VK_QUEUE_COMPUTE_BIT) == 0) ++family_;
    const float priority = 1.0f;
    VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    queue.queueFamilyIndex = family_;
    queue.queueCount = 1;
    queue.pQueuePriorities = &priority;
    VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    v12.bufferDeviceAddress = VK_TRUE;
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.pNext = &v12;
    features.features.shaderInt64 = VK_TRUE;
    VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.pNext = &features;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &queue;
    check(vkCreateDevice(physical, &dci, nullptr, &device_), "vkCreateDevice");
    vkGetDeviceQueue(device_, family_, 0, &queue_);
    VkPhysicalDeviceMemoryProperties memory{};
    vkGetPhysicalDeviceMemoryProperties(physical, &memory);
    x_ = buffer(memory, n * 4ull, x_memory_);
    y_ = buffer(memory, n * 4ull, y_memory_);
    pipeline();
    VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = family_;
    check(vkCreateCommandPool(device_, &pci, nullptr, &pool_), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = pool_;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(device_, &cai, &cmd_), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    check(vkCreateFence(device_, &fci, nullptr, &fence_), "vkCreateFence");
  }
  ~RawAxpy() {
    vkDeviceWaitIdle(device_);
    vkDestroyFence(device_, fence_, nullptr);
    vkDestroyCommandPool(device_, pool_, nullptr);
    vkDestroyPipeline(device_, pipeline_, nullptr);
    vkDestroyPipelineLayout(device_, layout_, nullptr);
    vkDestroyShaderModule(device_, shader_, nullptr);
    vkDestroyBuffer(device_, x_, nullptr);
    vkDestroyBuffer(device_, y_, nullptr);
    vkFreeMemory(device_, x_memory_, nullptr);
    vkFreeMemory(device_, y_memory_, nullptr);
    vkDestroyDevice(device_, nullptr);
    vkDestroyInstance(instance_, nullptr);
  }
  RawAxpy(const RawAxpy&) = delete;
  RawAxpy& operator=(const RawAxpy&) = delete;

  void dispatch(std::uint32_t n, float a) {
    struct {
      std::uint32_t n;
      float a;
      std::uint64_t x, y;
    } args{n, a, address(x_), address(y_)};
    check(vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(cmd_, &begin), "vkBeginCommandBuffer");
    vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
    vkCmdPushConstants(cmd_, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof args, &args);
    vkCmdDispatch(cmd_, (n + 255) / 256, 1, 1);
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                         1, &barrier, 0, nullptr, 0, nullptr);
    check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cmd_;
    check(vkQueueSubmit(queue_, 1, &submit, fence_), "vkQueueSubmit");
    check(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    check(vkResetFences(device_, 1, &fence_), "vkResetFences");
  }

 private:
  VkBuffer buffer(const VkPhysicalDeviceMemoryProperties& memory, std::uint64_t bytes,
                  VkDeviceMemory& out) {
    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = bytes;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
    VkBuffer b = VK_NULL_HANDLE;
    check(vkCreateBuffer(device_, &bci, nullptr, &b), "vkCreateBuffer");
    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(device_, b, &req);
    std::uint32_t type = 0;
    while (type < memory.memoryTypeCount && (req.memoryTypeBits & (1u << type)) == 0) ++type;
    VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.pNext = &flags;
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = type;
    check(vkAllocateMemory(device_, &mai, nullptr, &out), "vkAllocateMemory");
    check(vkBindBufferMemory(device_, b, out, 0), "vkBindBufferMemory");
    return b;
  }
  std::uint64_t address(VkBuffer b) const {
    VkBufferDeviceAddressInfo info{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    info.buffer = b;
    return vkGetBufferDeviceAddress(device_, &info);
  }
  void pipeline() {
    std::ifstream in(GPUPLUG_BENCH_AXPY_SPV, std::ios::binary);
    const std::string code((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (code.empty() || code.size() % 4 != 0)
      throw std::runtime_error(std::string(GPUPLUG_BENCH_AXPY_SPV) + ": no SPIR-V");
    std::vector<std::uint32_t> words(code.size() / 4);
    std::memcpy(words.data(), code.data(), code.size());
    VkShaderModuleCreateInfo smci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    smci.codeSize = code.size();
    smci.pCode = words.data();
    check(vkCreateShaderModule(device_, &smci, nullptr, &shader_), "vkCreateShaderModule");
    const VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, 24};
    VkPipelineLayoutCreateInfo plci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    plci.pushConstantRangeCount = 1;
    plci.pPushConstantRanges = &range;
    check(vkCreatePipelineLayout(device_, &plci, nullptr, &layout_), "vkCreatePipelineLayout");
    const std::uint32_t size[3] = {256, 1, 1};
    const VkSpecializationMapEntry entries[3] = {{0, 0, 4}, {1, 4, 4}, {2, 8, 4}};
    const VkSpecializationInfo spec{3, entries, sizeof size, size};
    VkComputePipelineCreateInfo cpci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cpci.stage.module = shader_;
    cpci.stage.pName = "main";
    cpci.stage.pSpecializationInfo = &spec;
    cpci.layout = layout_;
    check(vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &cpci, nullptr, &pipeline_),
          "vkCreateComputePipelines");
  }

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  std::uint32_t family_ = 0;
  VkBuffer x_ = VK_NULL_HANDLE, y_ = VK_NULL_HANDLE;
  VkDeviceMemory x_memory_ = VK_NULL_HANDLE, y_memory_ = VK_NULL_HANDLE;
  VkShaderModule shader_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    ::setenv("GPUPLUG_PLUGIN_PATH", GPUPLUG_BENCH_PLUGIN_DIR, /*overwrite=*/0);
    const int repetitions = argc > 1 ? std::max(1, std::atoi(argv[1])) : 500;
    gpuplug::PluginRegistry registry;
    registry.discover();
    std::shared_ptr<gpuplug::GpuBackend> gpu;
    try {
      gpu = registry.create("vulkan:0");
    } catch (const gpuplug::Error& e) {
      std::printf("bench_vulkan_dispatch: vulkan:0 is not usable here, nothing measured: %s\n",
                  e.what());
      return 0;
    }
    const gpuplug::DeviceInfo info = gpu->device_info();
    std::printf("bench_vulkan_dispatch on vulkan:0 (%s), %d repetitions, medians\n",
                info.name.c_str(), repetitions);
    const gpuplug::KernelHandle f = gpu->op_cache().kernel(*gpu, "axpy", "axpy");
    for (const std::uint32_t n : {256u, 65536u, 1u << 20}) {
      RawAxpy raw(n);
      const gpuplug::DevicePtr x = gpu->alloc(n * 4ull, "bench x");
      const gpuplug::DevicePtr y = gpu->alloc(n * 4ull, "bench y");
      gpu->memset(x, 0, n * 4ull);
      gpu->memset(y, 0, n * 4ull);
      const gpuplug::Dim3 grid{(n + 255) / 256, 1, 1}, block{256, 1, 1};
      const float a = 2.0f;
      for (int warm = 0; warm < 10; ++warm) {  // pipelines made, caches warm
        raw.dispatch(n, a);
        gpu->launch(f, grid, block, 0, gpuplug::Stream{}, {n, a, x, y});
        gpu->synchronize();
      }
      std::vector<double> raw_us, ours_us;
      for (int i = 0; i < repetitions; ++i) {
        const auto t0 = Clock::now();
        raw.dispatch(n, a);
        const auto t1 = Clock::now();
        gpu->launch(f, grid, block, 0, gpuplug::Stream{}, {n, a, x, y});
        gpu->synchronize();
        const auto t2 = Clock::now();
        raw_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        ours_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
      }
      gpu->free(y);
      gpu->free(x);
      const double r = median(raw_us), o = median(ours_us);
      std::printf("n=%u: raw %.2f us, gpuplug %.2f us, raw / gpuplug = %.2fx\n", n, r, o, r / o);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_vulkan_dispatch: %s\n", e.what());
    return 1;
  }
  return 0;
}
