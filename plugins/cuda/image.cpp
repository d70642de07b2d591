// SPDX-License-Identifier: Apache-2.0
// Fatbin and cubin checks: every header, entry and section the driver follows lies in the image.
#include "image.hpp"

#include <cstdint>
#include <cstring>

namespace gpuplug::cuda {
namespace {

constexpr unsigned char kFatbinMagic[4] = {0x50, 0xED, 0x55, 0xBA};  // 0xBA55ED50, little endian
constexpr unsigned char kElfMagic[4] = {0x7F, 'E', 'L', 'F'};

bool starts_with(std::span<const std::byte> image, const unsigned char (&magic)[4]) noexcept {
  return image.size() >= 4 && std::memcmp(image.data(), magic, 4) == 0;
}

template <class T>
T read_at(std::span<const std::byte> image, std::size_t offset) {
  T value;
  std::memcpy(&value, image.data() + offset, sizeof value);  // images need not be aligned
  return value;
}

std::string fatbin_problem(std::span<const std::byte> image) {
  const std::uint64_t size = image.size();
  // Header: u32 magic, u16 version, u16 header size, u64 size of the entries that follow.
  if (size < 16) return "a fatbin header needs 16 bytes, the image has " + std::to_string(size);
  const std::uint64_t header = read_at<std::uint16_t>(image, 6);
  const std::uint64_t body = read_at<std::uint64_t>(image, 8);
  if (header < 16 || header > size || body > size - header) {
    return "truncated fatbin: its header announces " + std::to_string(header) + " + " +
           std::to_string(body) + " bytes, the image has " + std::to_string(size);
  }
  // Entries: u32 header size at +4, u64 payload size at +8; the next follows both.
  for (std::uint64_t at = header, end = header + body; at < end;) {
    if (end - at < 16) return "truncated fatbin entry at offset " + std::to_string(at);
    const std::uint64_t entry = read_at<std::uint32_t>(image, at + 4);
    const std::uint64_t payload = read_at<std::uint64_t>(image, at + 8);
    if (entry < 16 || entry > end - at || payload > end - at - entry) {
      return "truncated fatbin entry at offset " + std::to_string(at);
    }
    at += entry + payload;
  }
  return "";
}

std::string cubin_problem(std::span<const std::byte> image) {
  const std::uint64_t size = image.size();
  // ELF64 header: class at 4, e_phoff 32, e_shoff 40, e_phentsize 54, e_phnum 56,
  // e_shentsize 58, e_shnum 60. Section headers: sh_type at 4, sh_offset 24, sh_size 32.
  if (size < 64 || static_cast<unsigned char>(image[4]) != 2) return "not a 64-bit ELF cubin";
  const std::uint64_t phoff = read_at<std::uint64_t>(image, 32);
  const std::uint64_t shoff = read_at<std::uint64_t>(image, 40);
  const std::uint64_t phsize =
      std::uint64_t{read_at<std::uint16_t>(image, 54)} * read_at<std::uint16_t>(image, 56);
  const std::uint64_t shentsize = read_at<std::uint16_t>(image, 58);
  const std::uint64_t shnum = read_at<std::uint16_t>(image, 60);
  if (phoff > size || phsize > size - phoff || shoff > size || shentsize * shnum > size - shoff ||
      (shnum != 0 && shentsize < 64)) {
    return "truncated cubin: its ELF headers point past the " + std::to_string(size) + " bytes";
  }
  for (std::uint64_t i = 0; i < shnum; ++i) {
    const std::uint64_t at = shoff + i * shentsize;
    constexpr std::uint32_t kNoBits = 8;  // SHT_NOBITS: occupies no file space
    if (read_at<std::uint32_t>(image, at + 4) == kNoBits) continue;
    const std::uint64_t offset = read_at<std::uint64_t>(image, at + 24);
    const std::uint64_t bytes = read_at<std::uint64_t>(image, at + 32);
    if (offset > size || bytes > size - offset) {
      return "truncated cubin: section " + std::to_string(i) + " lies past the " +
             std::to_string(size) + " bytes";
    }
  }
  return "";
}

}  // namespace

ImageKind image_kind(std::span<const std::byte> image) noexcept {
  if (starts_with(image, kFatbinMagic)) return ImageKind::fatbin;
  if (starts_with(image, kElfMagic)) return ImageKind::cubin;
  return ImageKind::ptx;
}

std::string image_problem(std::span<const std::byte> image) {
  switch (image_kind(image)) {
    case ImageKind::fatbin:
      return fatbin_problem(image);
    case ImageKind::cubin:
      return cubin_problem(image);
    case ImageKind::ptx:
      break;
  }
  return "";
}

std::optional<std::vector<FatbinEntry>> fatbin_entries(std::span<const std::byte> image,
                                                       std::string& why) {
  constexpr std::uint64_t kFlagCompressed = 0x2000 | 0x8000;
  std::vector<FatbinEntry> entries;
  const std::uint64_t size = image.size();
  for (std::uint64_t container = 0; container < size;) {
    if (size - container < 16 || !starts_with(image.subspan(container), kFatbinMagic)) {
      if (container == 0) {
        why = "not a fatbin (no 0xBA55ED50 header)";
        return std::nullopt;
      }
      break;  // padding after the last container
    }
    const std::uint64_t header = read_at<std::uint16_t>(image, container + 6);
    const std::uint64_t body = read_at<std::uint64_t>(image, container + 8);
    const std::uint64_t left = size - container;
    if (header < 16 || header > left || body > left - header) {
      why = "truncated fatbin: the container at offset " + std::to_string(container) +
            " announces " + std::to_string(header) + " + " + std::to_string(body) +
            " bytes, the image has " + std::to_string(left) + " from there";
      return std::nullopt;
    }
    const std::uint64_t end = container + header + body;
    for (std::uint64_t at = container + header; at < end;) {
      // The fields read below end at +48; an entry header shorter than that is not one.
      if (end - at < 48) {
        why = "truncated fatbin entry at offset " + std::to_string(at);
        return std::nullopt;
      }
      const std::uint64_t entry = read_at<std::uint32_t>(image, at + 4);
      const std::uint64_t payload = read_at<std::uint64_t>(image, at + 8);
      if (entry < 48 || entry > end - at || payload > end - at - entry) {
        why = "truncated fatbin entry at offset " + std::to_string(at) + " (header " +
              std::to_string(entry) + " + payload " + std::to_string(payload) + " bytes, " +
              std::to_string(end - at) + " left in its container)";
        return std::nullopt;
      }
      const std::uint16_t kind = read_at<std::uint16_t>(image, at);
      if (kind == 1 || kind == 2) {
        FatbinEntry e;
        e.ptx = kind == 1;
        e.arch = read_at<std::uint32_t>(image, at + 28);
        e.compressed = (read_at<std::uint64_t>(image, at + 40) & kFlagCompressed) != 0 ||
                       read_at<std::uint32_t>(image, at + 16) != 0;
        e.payload = image.subspan(at + entry, payload);
        entries.push_back(e);
      }
      at += entry + payload;
    }
    container = end;  // the next container, if any, follows directly
  }
  if (entries.empty()) {
    why = "a fatbin without SASS or PTX entries";
    return std::nullopt;
  }
  return entries;
}

std::optional<std::uint32_t> cubin_arch(std::span<const std::byte> image) noexcept {
  if (image.size() < 64 || !starts_with(image, kElfMagic)) return std::nullopt;
  const auto abi_version = static_cast<unsigned char>(image[8]);
  const std::uint32_t flags = read_at<std::uint32_t>(image, 48);
  return abi_version >= 8 ? (flags >> 8) & 0xFFu : flags & 0xFFu;
}

}  // namespace gpuplug::cuda
