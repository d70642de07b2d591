// SPDX-License-Identifier: Apache-2.0
// CUDA module images: what kind of image the bytes are, and whether the driver may be given them.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace gpuplug::cuda {

/// The three forms cuModuleLoadDataEx accepts.
enum class ImageKind { fatbin, cubin, ptx };

/// A fatbin (magic 0xBA55ED50), a cubin (ELF magic), else PTX text.
ImageKind image_kind(std::span<const std::byte> image) noexcept;

/// Why `image` must not reach the driver, or "" when it may. cuModuleLoadData takes no size: it
/// trusts the sizes and offsets inside a fatbin or cubin, so every structure the driver will
/// follow must lie inside the bytes we have, or a truncated file would be read past its end.
/// PTX is text the JIT parses with a terminator, so it always passes here.
std::string image_problem(std::span<const std::byte> image);

}  // namespace gpuplug::cuda
