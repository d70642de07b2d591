// SPDX-License-Identifier: Apache-2.0
// CUDA module images: what kind of image the bytes are, and whether the driver may be given them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

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

/// One entry of a fatbin: SASS (a cubin) or PTX for one architecture.
struct FatbinEntry {
  bool ptx = false;                    // kind 1 (PTX text) rather than 2 (ELF cubin)
  std::uint32_t arch = 0;              // 90 for sm_90 / compute_90
  bool compressed = false;             // the payload is LZ4/zstd (flags 0x2000 / 0x8000)
  std::span<const std::byte> payload;  // inside the image
};

/// Every entry of every container in a fatbin (containers may follow one another, as nvcc's
/// -fatbin output of several objects does), in file order. nullopt with `why` set when a header
/// or an entry lies outside the image; bytes after the last container that are not a fatbin
/// header (alignment padding) are ignored. Entry header layout: tests/unit/test_cuda_fatbin.cpp.
std::optional<std::vector<FatbinEntry>> fatbin_entries(std::span<const std::byte> image,
                                                       std::string& why);

/// The SM a cubin was built for (90 for sm_90), from e_flags: bits 8..15 from ELF ABI version 8
/// (CUDA 12.8+), bits 0..7 before. nullopt when `image` is not an ELF64 header.
std::optional<std::uint32_t> cubin_arch(std::span<const std::byte> image) noexcept;

}  // namespace gpuplug::cuda
