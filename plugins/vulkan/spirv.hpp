// SPDX-License-Identifier: Apache-2.0
// A SPIR-V module read as far as gpuplug needs: framing, capabilities, the compute entry point,
// its local size and its push-constant arguments.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gpuplug::vulkan {

/// A SPIR-V word stream's header: magic 0x07230203, then version, generator, bound, schema.
inline constexpr std::uint32_t kSpirvMagic = 0x07230203u;
inline constexpr std::uint32_t kNoSpecId = 0xFFFFFFFFu;

/// The SPIR-V capabilities whose use needs a device feature beyond what every gpuplug Vulkan
/// device has (the plugin checks a module's against its VkDevice), and the ones always present.
enum SpirvCapability : std::uint32_t {
  kCapShader = 1,
  kCapFloat16 = 9,
  kCapFloat64 = 10,
  kCapInt64 = 11,
  kCapInt16 = 22,
  kCapInt8 = 39,
  kCapStorageBuffer16BitAccess = 4433,
  kCapStoragePushConstant16 = 4435,
  kCapStorageBuffer8BitAccess = 4448,
  kCapStoragePushConstant8 = 4450,
  kCapPhysicalStorageBufferAddresses = 5347,
  kCapVulkanMemoryModel = 5345,
  kCapShaderClockKHR = 5055,
};

/// One push-constant member: a kernel argument.
struct PushArg {
  std::uint32_t offset = 0;
  std::uint32_t size = 0;
};

/// What `reflect` reads off a compute shader.
struct SpirvInfo {
  std::string entry;                       // the GLCompute entry point's name
  std::uint32_t version = 0;               // the header's version word (0x00010500: 1.5)
  std::vector<std::uint32_t> capabilities;  // OpCapability operands, in order
  std::array<std::uint32_t, 3> local_size{1, 1, 1};  // the default (or fixed) workgroup size
  // The specialization-constant ids of the workgroup size's x, y, z, or kNoSpecId where fixed.
  std::array<std::uint32_t, 3> local_size_ids{kNoSpecId, kNoSpecId, kNoSpecId};
  std::vector<PushArg> args;  // the push-constant block's members, in member order
  std::uint32_t push_bytes = 0;  // the end of the last member
};

/// Why `words` is not a framed SPIR-V module (header, then instructions whose word counts fit
/// exactly), or "" when it is. Checks no semantics: the driver and spirv-val do.
std::string spirv_problem(std::span<const std::uint32_t> words);

/// Reads the module's capabilities, its single GLCompute entry point, its workgroup size (fixed,
/// or through specialization constants) and its push-constant block, whose members must be
/// 8/16/32/64-bit scalars or PhysicalStorageBuffer pointers (8 bytes). Throws
/// std::invalid_argument saying what is missing or not understood.
SpirvInfo reflect(std::span<const std::uint32_t> words);

/// "Int64", "StoragePushConstant8", ... for the capabilities kernels use; "capability N" else.
std::string capability_name(std::uint32_t capability);

/// The optional device features a kernel's SPIR-V capabilities may need, as a VkDevice has them
/// enabled (the plugin enables each wherever the device offers it).
struct DeviceFeatures {
  bool int8 = false, int16 = false, float16 = false, float64 = false;
  bool storage_buffer16 = false, push_constant16 = false, push_constant8 = false;
  bool memory_model = false;
  bool device_clock = false;  // VK_KHR_shader_clock's shaderDeviceClock
};

/// The name of the first capability of `capabilities` that needs a feature `features` lacks;
/// "" when none does. Capabilities every gpuplug Vulkan device has (Shader, Int64, 8-bit storage,
/// buffer device addresses) and ones without a rule here pass: the driver judges those.
std::string missing_capability(std::span<const std::uint32_t> capabilities,
                               const DeviceFeatures& features);

}  // namespace gpuplug::vulkan
