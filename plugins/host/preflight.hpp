// SPDX-License-Identifier: Apache-2.0
// Kernel preflight for host modules (the inspect_module hook of the host plugin).
#pragma once

#include <cstddef>
#include <span>

#include "plugin_sdk.hpp"

namespace gpuplug::host {

/// What `image` (an ELF shared object, untrusted) is, whether it loads on this machine and what it
/// exports: its machine against the one running ("aarch64 (EM_AARCH64), this machine is x86_64"),
/// exported functions as kernels, exported objects as symbols, 4-byte ones with the value the file
/// holds ("gemm_f32_n_tile=64"). An image for this machine must also pass the checks made before
/// dlopen (validate_elf_shared_object, image_problem). Throws sdk::Failure(INVALID_IMAGE, why)
/// for bytes that are not such an ELF file or are truncated.
void inspect_module(std::span<const std::byte> image, sdk::ModuleInspection& out);

}  // namespace gpuplug::host
