// SPDX-License-Identifier: Apache-2.0
// Host module images: ELF shared objects for this machine, checked before dlopen sees them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gpuplug::host {

/// A mapped range of a loaded image: [begin, end) in the process, and whether it is writable
/// (PF_W and outside PT_GNU_RELRO).
struct ImageSegment {
  std::uint64_t begin;
  std::uint64_t end;
  bool writable;
};

/// True when `image` is at least an ELF header long and starts with the ELF magic.
bool is_elf(std::span<const std::byte> image) noexcept;

/// Why an ELF `image` must not reach dlopen, or "" when it may: dlopen trusts the program
/// headers, so they and every loadable segment must lie inside the image (a truncated image would
/// otherwise fault inside the loader). Other classes and machines are left to dlopen, whose
/// message then names the problem. Call only when is_elf(image).
std::string image_problem(std::span<const std::byte> image);

/// The loadable segments of an image loaded at `base`, read-only where PT_GNU_RELRO covers them
/// (those come first, so a lookup that takes the first match sees them as read-only). Call only
/// for an image that loaded.
std::vector<ImageSegment> image_segments(std::span<const std::byte> image, std::uint64_t base);

/// Names of the defined global functions in the image's .dynsym, sorted. Empty when the image
/// has no section headers (then "not found" messages cannot list functions).
std::vector<std::string> exported_functions(std::span<const std::byte> image);

}  // namespace gpuplug::host
