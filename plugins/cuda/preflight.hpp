// SPDX-License-Identifier: Apache-2.0
// Kernel preflight for CUDA module images (the inspect_module hook of the cuda plugin), as a pure
// function of the image and a compute capability, so that tests can ask for any GPU.
#pragma once

#include <cstddef>
#include <span>

#include "plugin_sdk.hpp"

namespace gpuplug::cuda {

/// A compute capability: 9.0 is {9, 0}.
struct ComputeCapability {
  int major = 0;
  int minor = 0;
};

/// Which of `image`'s targets the driver would pick for a device of compute capability `cc`,
/// and what the image defines. The driver's rules: SASS for sm_XY runs on a device of the same
/// major and a minor at or above Y (the highest such SASS wins); failing that, PTX for
/// compute_XY at or below the device's capability is JIT-compiled (the highest wins); failing
/// that nothing loads, and `reason` says what was looked for and what the image carries.
/// Kernels are the cubin's STT_FUNC symbols in .text.<name> (or the PTX .entry names); symbols
/// the cubin's objects, 4-byte ones with the value it holds (PTX: the .global/.const
/// initialisers). Accepts a fatbin, a bare cubin or PTX text; throws
/// sdk::Failure(INVALID_IMAGE, why) for bytes that are none of them or are truncated.
void inspect_image(std::span<const std::byte> image, ComputeCapability cc,
                   sdk::ModuleInspection& out);

/// The hook (inspect.cpp): device `ordinal`'s compute capability from the driver (a device the
/// SDK has checked), then inspect_image. Throws sdk::Failure on a driver error.
void inspect_module(std::uint32_t ordinal, std::span<const std::byte> image,
                    sdk::ModuleInspection& out);

}  // namespace gpuplug::cuda
