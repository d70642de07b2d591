// SPDX-License-Identifier: Apache-2.0
// Kernel preflight for HIP module images (the inspect_module hook of the hip plugin), as a pure
// function of the image and the device's gcnArchName, so that tests can ask for any GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "plugin_sdk.hpp"

namespace gpuplug::hip {

/// The target id a bare AMDGPU code object was built for ("gfx942:sramecc+:xnack-"), from its
/// e_flags (EF_AMDGPU_MACH and, for code object v4+, the xnack/sramecc settings); "" for a
/// processor this table does not know. A feature left "any" is not named.
std::string code_object_target(std::span<const std::byte> code_object);

/// Which of `image`'s code objects the runtime would load on a device whose gcnArchName is
/// `device_arch`: in an offload bundle the first entry whose target id matches (the processor
/// equal, every feature the code object fixes set the same way on the device:
/// target_matches); a bare code object when its target matches. The kernels are the code
/// object's "<name>.kd" descriptors, the symbols its other defined objects, 4-byte ones with
/// the value it holds. Throws sdk::Failure(INVALID_IMAGE, why) for bytes that are neither a
/// bundle nor a code object or are truncated; UNSUPPORTED for a compressed bundle (CCOB), which
/// only the runtime unpacks.
void inspect_image(std::span<const std::byte> image, std::string_view device_arch,
                   sdk::ModuleInspection& out);

/// The hook (inspect.cpp): the device's gcnArchName from the runtime, then inspect_image.
void inspect_module(std::uint32_t ordinal, std::span<const std::byte> image,
                    sdk::ModuleInspection& out);

}  // namespace gpuplug::hip
