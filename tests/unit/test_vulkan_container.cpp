// SPDX-License-Identifier: Apache-2.0
// The Vulkan module container and SPIR-V reader (plugins/vulkan/container.hpp, spirv.hpp): what
// gpuplug-vulkan-pack derived from the built kernels (arguments, workgroup sizes, `_args`), and
// that truncated, mutated and inconsistent containers are refused with a reason before any of it
// could reach a driver, and which device features a kernel's capabilities need. No Vulkan driver
// needed.

#define BOOST_TEST_MODULE test_vulkan_container
#include <gpuplug/kernel_args.h>

#include <boost/test/unit_test.hpp>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "container.hpp"
#include "spirv.hpp"
#include "gpuplug/support/files.hpp"

namespace {

namespace vk = gpuplug::vulkan;

std::vector<std::byte> read(const std::string& module) {
  const std::string path = std::string(GPUPLUG_TEST_KERNEL_DIR) + "/vulkan/" + module + ".gpvk";
  std::string why;
  auto bytes = gpuplug::support::read_file(path, why);
  BOOST_TEST_REQUIRE(bytes.has_value(), path << ": " << why);
  return *bytes;
}

const vk::ContainerGlobal* global(const vk::Container& c, const std::string& name) {
  for (const auto& g : c.globals)
    if (g.name == name) return &g;
  return nullptr;
}

std::string refusal(std::span<const std::byte> bytes) {
  try {
    (void)vk::read_container(bytes);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(axpy_arguments_come_from_its_spirv) {
  const vk::Container c = vk::read_container(read("axpy"));
  BOOST_TEST_REQUIRE(c.kernels.size() == 1u);
  const vk::ContainerKernel& k = c.kernels[0];
  BOOST_TEST(k.name == "axpy");
  BOOST_TEST(k.entry == "main");
  // uint n, float a, two buffer references: the layout of the CUDA kernel's arguments.
  BOOST_TEST_REQUIRE(k.args.size() == 4u);
  const std::uint32_t offsets[] = {0, 4, 8, 16}, sizes[] = {4, 4, 8, 8};
  for (std::size_t i = 0; i < 4; ++i) {
    BOOST_TEST(k.args[i].offset == offsets[i]);
    BOOST_TEST(k.args[i].size == sizes[i]);
  }
  BOOST_TEST(k.push_bytes == 24u);
  // Any block size: x, y, z are specialization constants 0, 1, 2.
  BOOST_TEST(k.local_size_ids[0] == 0u);
  BOOST_TEST(k.local_size_ids[2] == 2u);
  const auto* args = global(c, "axpy_args");
  BOOST_TEST_REQUIRE(args != nullptr);
  BOOST_TEST_REQUIRE(args->bytes.size() == sizeof(gpuplug_kernel_args_t));
  gpuplug_kernel_args_t published{};
  std::memcpy(&published, args->bytes.data(), sizeof published);
  BOOST_TEST(published.version == GPUPLUG_KERNEL_ARGS_VERSION);
  BOOST_TEST(published.count == 4u);
  BOOST_TEST(published.sizes[2] == 8u);
  BOOST_TEST(published.sizes[4] == 0u);
}

BOOST_AUTO_TEST_CASE(gemm_has_a_fixed_workgroup_and_its_constants) {
  const vk::Container c = vk::read_container(read("gemm"));
  BOOST_TEST_REQUIRE(c.kernels.size() == 2u);
  for (const auto& k : c.kernels) {
    BOOST_TEST(k.local_size[0] == 16u);
    BOOST_TEST(k.local_size[1] == 16u);
    BOOST_TEST(k.local_size_ids[0] == vk::kNoSpecId);
    BOOST_TEST(k.args.size() == 6u);
  }
  const auto* tile = global(c, "gemm_f32_n_tile");
  BOOST_TEST_REQUIRE(tile != nullptr);
  std::uint32_t n_tile = 0;
  std::memcpy(&n_tile, tile->bytes.data(), 4);
  BOOST_TEST(n_tile == 64u);
  BOOST_TEST(global(c, "gemm_a_e4m3_a_e4m3") != nullptr);
  BOOST_TEST(global(c, "gemm_f32_a_e4m3") == nullptr);
}

BOOST_AUTO_TEST_CASE(write_then_read_is_the_same_container) {
  const auto bytes = read("e4m3");
  BOOST_TEST(vk::write_container(vk::read_container(bytes)) == bytes);
}

BOOST_AUTO_TEST_CASE(every_truncation_is_refused_with_a_reason) {
  const auto bytes = read("axpy");
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const std::string why = refusal(std::span(bytes).first(n));
    BOOST_TEST_REQUIRE(!why.empty(), "a container cut to " << n << " bytes was accepted");
  }
  std::vector<std::byte> longer = bytes;
  longer.push_back(std::byte{0});
  BOOST_TEST(refusal(longer).find("follow the container's last entry") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(mutations_never_crash_and_mismatches_are_named) {
  const auto bytes = read("gemm");
  std::mt19937 gen(7);
  for (int round = 0; round < 3000; ++round) {
    std::vector<std::byte> m = bytes;
    const std::size_t at = gen() % m.size();
    m[at] = static_cast<std::byte>(gen());
    (void)refusal(m);  // accepted or refused, never out of bounds (ASan builds check)
  }
  // A container whose argument layout disagrees with its SPIR-V: the kernel is named.
  vk::Container c = vk::read_container(read("axpy"));
  c.kernels[0].args[1].size = 8;
  c.kernels[0].args[1].offset = 8;
  const std::string why = refusal(vk::write_container(c));
  BOOST_TEST(why.find("kernel axpy") != std::string::npos, why);
  BOOST_TEST(why.find("push-constant block") != std::string::npos, why);
  // SPIR-V that is not SPIR-V.
  c = vk::read_container(read("axpy"));
  c.kernels[0].spirv[0] = 0x12345678u;
  BOOST_TEST(refusal(vk::write_container(c)).find("magic number") != std::string::npos);
  // A name that is no C identifier.
  c = vk::read_container(read("axpy"));
  c.kernels[0].name = "ax/py";
  BOOST_TEST(refusal(vk::write_container(c)).find("not a C identifier") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(spirv_framing) {
  const vk::Container c = vk::read_container(read("axpy"));
  std::vector<std::uint32_t> words = c.kernels[0].spirv;
  BOOST_TEST(vk::spirv_problem(words).empty());
  words.back() = 0xFFFF0000u | (words.back() & 0xFFFFu);  // a last instruction of 65535 words
  BOOST_TEST(vk::spirv_problem(words).find("runs past the end") != std::string::npos);
  BOOST_TEST(vk::spirv_problem(std::span(words).first(3)).find("shorter than its header") !=
             std::string::npos);
}

// A module whose kernels need a SPIR-V capability the device's features lack is refused at load,
// naming the capability; lavapipe offers every feature a rule checks, so the rules are checked
// here against feature sets a real device could have.
BOOST_AUTO_TEST_CASE(capabilities_are_checked_against_the_features) {
  vk::DeviceFeatures all;
  all.int8 = all.int16 = all.float16 = all.float64 = true;
  all.storage_buffer16 = all.push_constant16 = all.push_constant8 = true;
  all.memory_model = all.device_clock = true;
  const vk::DeviceFeatures none;
  // The baseline every gpuplug Vulkan device has, and capabilities without a rule, pass.
  const std::vector<std::uint32_t> baseline{vk::kCapShader, vk::kCapInt64,
                                            vk::kCapStorageBuffer8BitAccess,
                                            vk::kCapPhysicalStorageBufferAddresses, 4437u};
  BOOST_TEST(vk::missing_capability(baseline, none).empty());
  const std::pair<std::uint32_t, bool vk::DeviceFeatures::*> rules[] = {
      {vk::kCapInt8, &vk::DeviceFeatures::int8},
      {vk::kCapInt16, &vk::DeviceFeatures::int16},
      {vk::kCapFloat16, &vk::DeviceFeatures::float16},
      {vk::kCapFloat64, &vk::DeviceFeatures::float64},
      {vk::kCapStorageBuffer16BitAccess, &vk::DeviceFeatures::storage_buffer16},
      {vk::kCapStoragePushConstant16, &vk::DeviceFeatures::push_constant16},
      {vk::kCapStoragePushConstant8, &vk::DeviceFeatures::push_constant8},
      {vk::kCapVulkanMemoryModel, &vk::DeviceFeatures::memory_model},
      {vk::kCapShaderClockKHR, &vk::DeviceFeatures::device_clock},
  };
  for (const auto& [capability, feature] : rules) {
    BOOST_TEST_CONTEXT(vk::capability_name(capability)) {
      std::vector<std::uint32_t> caps = baseline;
      caps.push_back(capability);
      BOOST_TEST(vk::missing_capability(caps, all).empty());
      vk::DeviceFeatures lacking = all;
      lacking.*feature = false;
      BOOST_TEST(vk::missing_capability(caps, lacking) == vk::capability_name(capability));
    }
  }
  // The sample modules need none of the optional features: they load on every device the
  // plugin accepts.
  for (const char* module : {"axpy", "gemm", "e4m3", "activation"}) {
    const vk::Container c = vk::read_container(read(module));
    for (const auto& k : c.kernels)
      BOOST_TEST(vk::missing_capability(k.capabilities, none).empty(), module << "::" << k.name);
  }
  // The gate takes its byte value as a push constant, so it needs 8-bit push constants (lavapipe,
  // RADV, ANV and NVIDIA offer them) and nothing else optional.
  const vk::Container sync = vk::read_container(read("sync"));
  BOOST_TEST_REQUIRE(sync.kernels.size() == 1u);
  BOOST_TEST(vk::missing_capability(sync.kernels[0].capabilities, none) == "StoragePushConstant8");
  vk::DeviceFeatures push8;
  push8.push_constant8 = true;
  BOOST_TEST(vk::missing_capability(sync.kernels[0].capabilities, push8).empty());
}
