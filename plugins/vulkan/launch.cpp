// SPDX-License-Identifier: Apache-2.0
// VulkanDevice::vendor_launch: the launch checked, the arguments packed into push constants
// (recorded so while the stream captures), the pipeline for the block size, one dispatch per
// slice of the grid the device's workgroup count allows.
#include <algorithm>
#include <cstring>

#include "device.hpp"
#include "kernel.hpp"
#include "submit.hpp"

namespace gpuplug::vulkan {
namespace {

// The most push-constant bytes any launch packs (devices offer 128 to 256; the container format
// allows more, which launch refuses against the device's limit first).
constexpr std::uint32_t kMaxPushBytes = 4096;

std::string dims(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  return std::to_string(x) + " x " + std::to_string(y) + " x " + std::to_string(z);
}

}  // namespace

VkPipeline VulkanDevice::pipeline(Kernel& kernel, const gpuplug_dim3_t& block) {
  const std::array<std::uint32_t, 3> size{block.x, block.y, block.z};
  std::lock_guard lock(kernel.mutex);
  for (const auto& [made, pipeline] : kernel.pipelines)
    if (made == size) return pipeline;
  std::array<VkSpecializationMapEntry, 3> entries{};
  std::uint32_t count = 0;
  for (std::uint32_t d = 0; d < 3; ++d)
    if (kernel.local_size_ids[d] != kNoSpecId)
      entries[count++] = {kernel.local_size_ids[d], static_cast<std::uint32_t>(d * 4), 4};
  VkSpecializationInfo spec{count, entries.data(), sizeof size, size.data()};
  VkComputePipelineCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  info.flags = VK_PIPELINE_CREATE_DISPATCH_BASE_BIT;
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = kernel.shader;
  info.stage.pName = kernel.entry.c_str();
  info.stage.pSpecializationInfo = count > 0 ? &spec : nullptr;
  info.layout = kernel.layout;
  kernel.pipelines.reserve(kernel.pipelines.size() + 1);
  VkPipeline made = VK_NULL_HANDLE;
  check(vk_.create_compute_pipelines(device_, VK_NULL_HANDLE, 1, &info, nullptr, &made),
        "kernel " + kernel.name + ": vkCreateComputePipelines for blocks of " +
            dims(block.x, block.y, block.z));
  kernel.pipelines.emplace_back(size, made);
  return made;
}

void VulkanDevice::vendor_launch(std::uint64_t function, gpuplug_dim3_t grid,
                                 gpuplug_dim3_t block, std::uint32_t shared_bytes,
                                 std::uint64_t stream, void** params) {
  Kernel& k = *reinterpret_cast<Kernel*>(function);
  // The SDK leaves launch's stream to the vendor (a GPU runtime refuses a stale one itself).
  streams().check("launch", stream);
  const auto refuse = [&](const std::string& why) {
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "kernel " + k.name + ": " + why);
  };
  if (shared_bytes != 0)
    refuse(std::to_string(shared_bytes) +
           " bytes of dynamic shared memory asked for: Vulkan kernels declare their shared "
           "arrays, and take none at launch");
  if (k.push_bytes > limits_.maxPushConstantsSize || k.push_bytes > kMaxPushBytes)
    refuse("its arguments take " + std::to_string(k.push_bytes) +
           " bytes of push constants; this device allows " +
           std::to_string(limits_.maxPushConstantsSize));
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0)
    refuse("grid " + dims(grid.x, grid.y, grid.z) + " of blocks " + dims(block.x, block.y, block.z) +
           " is empty: every dimension must be at least 1");
  if (!k.args.empty() && params == nullptr) refuse("no arguments given (params is null)");
  const std::uint32_t b[3] = {block.x, block.y, block.z};
  for (int d = 0; d < 3; ++d) {
    if (k.local_size_ids[d] == kNoSpecId && b[d] != k.local_size[d])
      refuse("it runs in workgroups of " + dims(k.local_size[0], k.local_size[1], k.local_size[2]) +
             " threads (fixed in its SPIR-V); block " + dims(block.x, block.y, block.z) +
             " is not that");
    if (b[d] > limits_.maxComputeWorkGroupSize[d])
      refuse("block " + dims(block.x, block.y, block.z) + " exceeds the device's largest, " +
             dims(limits_.maxComputeWorkGroupSize[0], limits_.maxComputeWorkGroupSize[1],
                  limits_.maxComputeWorkGroupSize[2]));
  }
  if (std::uint64_t{block.x} * block.y * block.z > limits_.maxComputeWorkGroupInvocations)
    refuse("block " + dims(block.x, block.y, block.z) + " has more than the device's " +
           std::to_string(limits_.maxComputeWorkGroupInvocations) + " threads a workgroup");
  if (grid.y > limits_.maxComputeWorkGroupCount[1] || grid.z > limits_.maxComputeWorkGroupCount[2])
    refuse("grid " + dims(grid.x, grid.y, grid.z) + " exceeds the device's " +
           std::to_string(limits_.maxComputeWorkGroupCount[1]) + " workgroups in y or " +
           std::to_string(limits_.maxComputeWorkGroupCount[2]) + " in z");

  // The values are copied here, before the call returns (the ABI lends params for the call);
  // a capture keeps the packed block.
  std::array<std::byte, kMaxPushBytes> push{};
  for (std::size_t i = 0; i < k.args.size(); ++i)
    std::memcpy(push.data() + k.args[i].offset, params[i], k.args[i].size);
  if (captures_.any() && captures_.record(stream, "launch", [&] {
        sdk::CapturedOp c;
        c.kind = sdk::CapturedOp::Kind::launch;
        c.kernel = &k;
        c.name = k.name;
        c.grid = grid;
        c.block = block;
        c.args.assign(push.begin(), push.begin() + k.push_bytes);
        return c;
      })) [[unlikely]]
    return;
  dispatch(k, grid, block, push.data(), stream);
}

void VulkanDevice::dispatch(Kernel& k, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                            const std::byte* push, std::uint64_t stream) {
  const VkPipeline p = pipeline(k, block);
  const std::uint32_t slice = limits_.maxComputeWorkGroupCount[0];
  std::lock_guard lock(queue_mutex_);
  submit("launch", stream_of(stream, "launch"), [&](VkCommandBuffer cmd) {
    vk_.cmd_bind_pipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    if (k.push_bytes > 0)
      vk_.cmd_push_constants(cmd, k.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, k.push_bytes, push);
    // gl_WorkGroupID.x counts from each slice's base, so a kernel sees one grid.
    for (std::uint32_t x0 = 0; x0 < grid.x; x0 += std::min(slice, grid.x - x0))
      vk_.cmd_dispatch_base(cmd, x0, 0, 0, std::min(slice, grid.x - x0), grid.y, grid.z);
  });
}

}  // namespace gpuplug::vulkan
