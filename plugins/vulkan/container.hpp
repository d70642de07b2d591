// SPDX-License-Identifier: Apache-2.0
// The Vulkan module container (".gpvk"): per kernel its SPIR-V, workgroup size and push-constant
// arguments, and the module's published globals. Written by gpuplug-vulkan-pack, read by the
// plugin; docs/kernels.md has the layout.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "spirv.hpp"

namespace gpuplug::vulkan {

/// The first bytes of every container, then the format version (little-endian u32).
inline constexpr char kContainerMagic[8] = {'G', 'P', 'V', 'K', 'M', 'O', 'D', '\0'};
inline constexpr std::uint32_t kContainerVersion = 1;

struct ContainerKernel {
  std::string name;   // the name get_function looks up
  std::string entry;  // the SPIR-V entry point ("main" from glslc)
  std::array<std::uint32_t, 3> local_size{1, 1, 1};
  std::array<std::uint32_t, 3> local_size_ids{kNoSpecId, kNoSpecId, kNoSpecId};
  std::uint32_t push_bytes = 0;
  std::vector<PushArg> args;
  std::vector<std::uint32_t> spirv;
  // Its SPIR-V's OpCapability operands: filled by read_container, never written to the file.
  std::vector<std::uint32_t> capabilities;
};

struct ContainerGlobal {
  std::string name;
  std::vector<std::byte> bytes;  // read-only to kernels and to copies
};

struct Container {
  std::vector<ContainerKernel> kernels;
  std::vector<ContainerGlobal> globals;
};

/// The container's bytes.
std::vector<std::byte> write_container(const Container& container);

/// Parses and checks `bytes`: magic, version, every length against what is left, names (C
/// identifiers of at most 255 bytes, unique across kernels and globals), arguments inside the
/// push-constant size, each kernel's SPIR-V framing (spirv_problem) and entry point name.
/// Throws std::invalid_argument saying what is wrong, naming the kernel or global.
Container read_container(std::span<const std::byte> bytes);

}  // namespace gpuplug::vulkan
