// SPDX-License-Identifier: Apache-2.0
// VulkanDevice's module hooks: a container (container.hpp) checked, its kernels made into shader
// modules and pipeline layouts, its globals copied into device memory.
#include <algorithm>
#include <stdexcept>

#include "device.hpp"
#include "kernel.hpp"

namespace gpuplug::vulkan {
namespace {

LoadedModule& loaded(sdk::VendorModule module) {
  return *reinterpret_cast<LoadedModule*>(static_cast<std::uintptr_t>(module));
}

}  // namespace

sdk::VendorModule VulkanDevice::vendor_load_module(std::string_view name,
                                                   std::span<const std::byte> image) {
  const std::string what = "module " + std::string(name);
  Container container;
  try {
    container = read_container(image);
  } catch (const std::invalid_argument& e) {
    sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, what + ": " + e.what());
  }
  for (const ContainerKernel& k : container.kernels) {
    if (const std::string missing = missing_capability(k.capabilities, features_); !missing.empty())
      sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE,
                what + ": kernel " + k.name + " needs the SPIR-V capability " + missing +
                    ", whose device feature " + physical_.name + " does not offer");
  }

  auto module = std::make_unique<LoadedModule>();
  auto cleanup = [&] { vendor_unload_module(static_cast<sdk::VendorModule>(
                           reinterpret_cast<std::uintptr_t>(module.release()))); };
  try {
    for (ContainerKernel& k : container.kernels) {
      auto kernel = std::make_unique<Kernel>();
      kernel->name = k.name;
      kernel->entry = k.entry;
      kernel->local_size = k.local_size;
      kernel->local_size_ids = k.local_size_ids;
      kernel->push_bytes = k.push_bytes;
      kernel->args = k.args;
      Kernel& kr = *kernel;
      module->kernels.push_back(std::move(kernel));
      VkShaderModuleCreateInfo shader{};
      shader.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
      shader.codeSize = k.spirv.size() * 4;
      shader.pCode = k.spirv.data();
      check(vk_.create_shader_module(device_, &shader, nullptr, &kr.shader),
            what + ": kernel " + k.name + ": vkCreateShaderModule");
      VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, k.push_bytes};
      VkPipelineLayoutCreateInfo layout{};
      layout.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
      layout.pushConstantRangeCount = k.push_bytes > 0 ? 1 : 0;
      layout.pPushConstantRanges = &range;
      check(vk_.create_pipeline_layout(device_, &layout, nullptr, &kr.layout),
            what + ": kernel " + k.name + ": vkCreatePipelineLayout");
    }
    std::sort(module->kernels.begin(), module->kernels.end(),
              [](const auto& a, const auto& b) { return a->name < b->name; });
    for (const ContainerGlobal& g : container.globals) {
      module->globals.push_back({g.name, 0, g.bytes.size()});
      module->globals.back().address = carve(g.bytes.size(), false);
      vendor_copy_h2d(module->globals.back().address, g.bytes.data(), g.bytes.size());
    }
  } catch (...) {
    cleanup();
    throw;
  }
  return static_cast<sdk::VendorModule>(reinterpret_cast<std::uintptr_t>(module.release()));
}

// Queued launches may still use the module's pipelines and globals: every stream is waited for
// first.
void VulkanDevice::vendor_unload_module(sdk::VendorModule module) noexcept {
  std::unique_ptr<LoadedModule> owned(&loaded(module));
  try {
    std::vector<Point> all;
    {
      std::lock_guard lock(queue_mutex_);
      all = every_stream();
    }
    wait(all, "unload_module");
  } catch (...) {  // device lost: nothing runs any more
  }
  for (const auto& k : owned->kernels) {
    for (const auto& [size, pipeline] : k->pipelines) vk_.destroy_pipeline(device_, pipeline, nullptr);
    if (k->layout != VK_NULL_HANDLE) vk_.destroy_pipeline_layout(device_, k->layout, nullptr);
    if (k->shader != VK_NULL_HANDLE) vk_.destroy_shader_module(device_, k->shader, nullptr);
  }
  for (const auto& g : owned->globals) {
    if (g.address == 0) continue;
    try {
      vendor_free(g.address, GPUPLUG_ALLOC_DEVICE);
    } catch (...) {  // the block is gone already (device released): nothing left to free
    }
  }
}

std::uint64_t VulkanDevice::vendor_get_function(sdk::VendorModule module, const std::string& func) {
  const auto& kernels = loaded(module).kernels;
  const auto it = std::lower_bound(kernels.begin(), kernels.end(), func,
                                   [](const auto& k, const std::string& n) { return k->name < n; });
  if (it == kernels.end() || (*it)->name != func) return 0;
  return reinterpret_cast<std::uint64_t>(it->get());
}

std::vector<std::string> VulkanDevice::vendor_list_functions(sdk::VendorModule module) {
  std::vector<std::string> names;
  for (const auto& k : loaded(module).kernels) names.push_back(k->name);
  return names;
}

std::optional<sdk::VendorGlobal> VulkanDevice::vendor_get_global(sdk::VendorModule module,
                                                                 const std::string& symbol) {
  for (const auto& g : loaded(module).globals)
    if (g.name == symbol) return sdk::VendorGlobal{g.address, g.bytes, false};
  return std::nullopt;
}

std::vector<std::string> VulkanDevice::vendor_module_file_extensions() const { return {".gpvk"}; }

}  // namespace gpuplug::vulkan
