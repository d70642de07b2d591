// SPDX-License-Identifier: Apache-2.0
// SPIR-V framing and the reflection gpuplug needs (spirv.hpp). Every operand read is bounds-checked
// against its instruction: the words come from a module file.
#include "spirv.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace gpuplug::vulkan {
namespace {

// Opcodes, decorations and enumerants of the SPIR-V 1.6 specification.
enum : std::uint32_t {
  kOpEntryPoint = 15,
  kOpExecutionMode = 16,
  kOpCapability = 17,
  kOpTypeInt = 21,
  kOpTypeFloat = 22,
  kOpTypeStruct = 30,
  kOpTypePointer = 32,
  kOpConstant = 43,
  kOpConstantComposite = 44,
  kOpSpecConstant = 50,
  kOpSpecConstantComposite = 51,
  kOpVariable = 59,
  kOpDecorate = 71,
  kOpMemberDecorate = 72,
  kOpExecutionModeId = 331,
  kDecorationSpecId = 1,
  kDecorationBuiltIn = 11,
  kDecorationOffset = 35,
  kBuiltInWorkgroupSize = 25,
  kModelGLCompute = 5,
  kModeLocalSize = 17,
  kModeLocalSizeId = 38,
  kStoragePushConstant = 9,
  kStoragePhysicalStorageBuffer = 5349,
};

constexpr std::size_t kHeaderWords = 5;

[[noreturn]] void bad(const std::string& why) { throw std::invalid_argument(why); }

// The NUL-terminated string starting at operand `at` of `inst`; "" (and `ok` false) when it runs
// past the instruction.
std::string literal(std::span<const std::uint32_t> inst, std::size_t at, bool& ok) {
  std::string out;
  for (std::size_t w = at; w < inst.size(); ++w) {
    for (int b = 0; b < 4; ++b) {
      const char c = static_cast<char>((inst[w] >> (8 * b)) & 0xFFu);
      if (c == '\0') {
        ok = true;
        return out;
      }
      out.push_back(c);
    }
  }
  ok = false;
  return {};
}

// Calls `visit(opcode, inst)` for each instruction (inst[0] is the opcode word). The stream must
// have passed spirv_problem.
template <class Visit>
void each_instruction(std::span<const std::uint32_t> words, Visit&& visit) {
  for (std::size_t i = kHeaderWords; i < words.size();) {
    const std::uint32_t count = words[i] >> 16;
    visit(words[i] & 0xFFFFu, words.subspan(i, count));
    i += count;
  }
}

}  // namespace

std::string spirv_problem(std::span<const std::uint32_t> words) {
  if (words.size() < kHeaderWords)
    return "the SPIR-V is " + std::to_string(words.size() * 4) + " bytes, shorter than its header";
  if (words[0] != kSpirvMagic) return "the SPIR-V does not start with the magic number 0x07230203";
  const std::uint32_t major = (words[1] >> 16) & 0xFFu;
  if (major != 1) return "the SPIR-V version " + std::to_string(major) + ".x is not 1.x";
  if (words[3] == 0 || words[3] > (1u << 22))
    return "the SPIR-V id bound " + std::to_string(words[3]) + " is out of range";
  if (words.size() == kHeaderWords) return "the SPIR-V has no instructions";
  for (std::size_t i = kHeaderWords; i < words.size();) {
    const std::uint32_t count = words[i] >> 16;
    if (count == 0)
      return "the SPIR-V instruction at word " + std::to_string(i) + " has a word count of 0";
    if (count > words.size() - i)
      return "the SPIR-V instruction at word " + std::to_string(i) + " (" + std::to_string(count) +
             " words) runs past the end";
    i += count;
  }
  return {};
}

SpirvInfo reflect(std::span<const std::uint32_t> words) {
  if (const std::string problem = spirv_problem(words); !problem.empty()) bad(problem);
  SpirvInfo info;
  info.version = words[1];

  std::uint32_t entry_id = 0;
  int entries = 0;
  std::unordered_map<std::uint32_t, std::uint32_t> spec_id;     // constant -> SpecId
  std::unordered_map<std::uint32_t, std::uint32_t> scalar_bits;  // int/float type -> width
  std::unordered_map<std::uint32_t, std::uint32_t> constant;     // OpConstant/OpSpecConstant value
  std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> structs, composites;
  std::unordered_map<std::uint32_t, std::pair<std::uint32_t, std::uint32_t>> pointers;  // class, to
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t> offsets;  // (struct, member)
  std::uint32_t workgroup_size = 0;  // the id decorated BuiltIn WorkgroupSize
  std::uint32_t push_type = 0;       // the pointer type of the PushConstant variable
  std::array<std::uint32_t, 3> size_ids{};  // LocalSizeId operands
  bool have_size_ids = false;

  each_instruction(words, [&](std::uint32_t op, std::span<const std::uint32_t> in) {
    const std::size_t n = in.size();
    switch (op) {
      case kOpCapability:
        if (n >= 2) info.capabilities.push_back(in[1]);
        break;
      case kOpEntryPoint:
        if (n >= 4 && in[1] == kModelGLCompute) {
          bool ok = false;
          info.entry = literal(in, 3, ok);
          if (!ok) bad("the SPIR-V entry point's name is not terminated");
          entry_id = in[2];
          ++entries;
        }
        break;
      case kOpExecutionMode:
        if (n >= 6 && in[1] == entry_id && in[2] == kModeLocalSize)
          info.local_size = {in[3], in[4], in[5]};
        break;
      case kOpExecutionModeId:
        if (n >= 6 && in[1] == entry_id && in[2] == kModeLocalSizeId) {
          size_ids = {in[3], in[4], in[5]};
          have_size_ids = true;
        }
        break;
      case kOpDecorate:
        if (n >= 4 && in[2] == kDecorationSpecId) spec_id[in[1]] = in[3];
        if (n >= 4 && in[2] == kDecorationBuiltIn && in[3] == kBuiltInWorkgroupSize)
          workgroup_size = in[1];
        break;
      case kOpMemberDecorate:
        if (n >= 5 && in[3] == kDecorationOffset) offsets[{in[1], in[2]}] = in[4];
        break;
      case kOpTypeInt:
      case kOpTypeFloat:
        if (n >= 3) scalar_bits[in[1]] = in[2];
        break;
      case kOpTypeStruct:
        if (n >= 2) structs[in[1]].assign(in.begin() + 2, in.end());
        break;
      case kOpTypePointer:
        if (n >= 4) pointers[in[1]] = {in[2], in[3]};
        break;
      case kOpConstant:
      case kOpSpecConstant:
        if (n >= 4) constant[in[2]] = in[3];
        break;
      case kOpConstantComposite:
      case kOpSpecConstantComposite:
        if (n >= 3) composites[in[2]].assign(in.begin() + 3, in.end());
        break;
      case kOpVariable:
        if (n >= 4 && in[3] == kStoragePushConstant) {
          if (push_type != 0) bad("the SPIR-V has more than one push-constant block");
          push_type = in[1];
        }
        break;
      default:
        break;
    }
  });
  if (entries != 1)
    bad("the SPIR-V has " + std::to_string(entries) + " GLCompute entry points, not one");

  // The workgroup size: a WorkgroupSize built-in overrides the execution mode; its components
  // (or LocalSizeId's) are constants, specialization constants naming their SpecId.
  auto read_size = [&](const std::array<std::uint32_t, 3>& ids) {
    for (std::size_t d = 0; d < 3; ++d) {
      const auto value = constant.find(ids[d]);
      if (value == constant.end()) bad("the SPIR-V workgroup size is not made of constants");
      info.local_size[d] = value->second;
      if (const auto id = spec_id.find(ids[d]); id != spec_id.end()) info.local_size_ids[d] = id->second;
    }
  };
  if (workgroup_size != 0) {
    const auto parts = composites.find(workgroup_size);
    if (parts == composites.end() || parts->second.size() != 3)
      bad("the SPIR-V WorkgroupSize built-in is not a 3-component constant");
    read_size({parts->second[0], parts->second[1], parts->second[2]});
  } else if (have_size_ids) {
    read_size(size_ids);
  }

  if (push_type == 0) return info;  // a kernel without arguments
  const auto pointer = pointers.find(push_type);
  if (pointer == pointers.end()) bad("the SPIR-V push-constant variable's type is not a pointer");
  const auto block = structs.find(pointer->second.second);
  if (block == structs.end()) bad("the SPIR-V push-constant block is not a struct");
  for (std::uint32_t m = 0; m < block->second.size(); ++m) {
    const std::uint32_t type = block->second[m];
    std::uint32_t size = 0;
    if (const auto s = scalar_bits.find(type); s != scalar_bits.end() && s->second % 8 == 0 &&
                                               s->second >= 8 && s->second <= 64) {
      size = s->second / 8;
    } else if (const auto p = pointers.find(type);
               p != pointers.end() && p->second.first == kStoragePhysicalStorageBuffer) {
      size = 8;
    } else {
      bad("push-constant member " + std::to_string(m) +
          " is neither a scalar nor a buffer reference (kernel arguments are one or the other)");
    }
    const auto offset = offsets.find({block->first, m});
    if (offset == offsets.end())
      bad("push-constant member " + std::to_string(m) + " has no Offset decoration");
    info.args.push_back({offset->second, size});
    info.push_bytes = std::max(info.push_bytes, offset->second + size);
  }
  return info;
}

std::string capability_name(std::uint32_t capability) {
  switch (capability) {
    case kCapShader: return "Shader";
    case kCapFloat16: return "Float16";
    case kCapFloat64: return "Float64";
    case kCapInt64: return "Int64";
    case kCapInt16: return "Int16";
    case kCapInt8: return "Int8";
    case kCapStorageBuffer16BitAccess: return "StorageBuffer16BitAccess";
    case kCapStoragePushConstant16: return "StoragePushConstant16";
    case kCapStorageBuffer8BitAccess: return "StorageBuffer8BitAccess";
    case kCapStoragePushConstant8: return "StoragePushConstant8";
    case kCapPhysicalStorageBufferAddresses: return "PhysicalStorageBufferAddresses";
    case kCapVulkanMemoryModel: return "VulkanMemoryModel";
    case kCapShaderClockKHR: return "ShaderClockKHR";
    default: return "capability " + std::to_string(capability);
  }
}

std::string missing_capability(std::span<const std::uint32_t> capabilities,
                               const DeviceFeatures& f) {
  for (const std::uint32_t c : capabilities) {
    bool ok = true;
    switch (c) {
      case kCapFloat16: ok = f.float16; break;
      case kCapFloat64: ok = f.float64; break;
      case kCapInt16: ok = f.int16; break;
      case kCapInt8: ok = f.int8; break;
      case kCapStorageBuffer16BitAccess: ok = f.storage_buffer16; break;
      case kCapStoragePushConstant16: ok = f.push_constant16; break;
      case kCapStoragePushConstant8: ok = f.push_constant8; break;
      case kCapVulkanMemoryModel: ok = f.memory_model; break;
      case kCapShaderClockKHR: ok = f.device_clock; break;
      default: break;
    }
    if (!ok) return capability_name(c);
  }
  return {};
}

}  // namespace gpuplug::vulkan
