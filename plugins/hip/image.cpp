// SPDX-License-Identifier: Apache-2.0
// Offload-bundle and AMDGPU ELF readers (layouts in image.hpp), bounds-checked throughout.
#include "image.hpp"

#include <algorithm>
#include <cstring>

namespace gpuplug::hip {
namespace {

// Little-endian unsigned read of sizeof(T) bytes at `offset`; nullopt when out of range. Byte by
// byte, so neither the host's endianness nor the image's alignment matters.
template <class T>
std::optional<T> read_le(std::span<const std::byte> image, std::uint64_t offset) noexcept {
  if (offset > image.size() || image.size() - offset < sizeof(T)) return std::nullopt;
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    value |= static_cast<T>(static_cast<T>(image[offset + i]) << (8 * i));
  return value;
}

bool starts_with(std::span<const std::byte> image, std::string_view magic) noexcept {
  return image.size() >= magic.size() && std::memcmp(image.data(), magic.data(), magic.size()) == 0;
}

// Whether [offset, offset + size) lies inside a buffer of `total` bytes (overflow-safe).
bool in_range(std::uint64_t offset, std::uint64_t size, std::uint64_t total) noexcept {
  return offset <= total && size <= total - offset;
}

// "gfx90a:sramecc+:xnack-" -> processor "gfx90a" and features {"sramecc+", "xnack-"}.
struct TargetId {
  std::string_view processor;
  std::vector<std::string_view> features;
};

TargetId split_target(std::string_view target) {
  TargetId out;
  std::size_t colon = target.find(':');
  out.processor = target.substr(0, colon);
  while (colon != std::string_view::npos) {
    const std::size_t next = target.find(':', colon + 1);
    const std::string_view feature = target.substr(colon + 1, next - colon - 1);
    if (!feature.empty()) out.features.push_back(feature);
    colon = next;
  }
  return out;
}

// ELF constants used below (from the System V ABI and the AMDGPU ELF documentation).
constexpr std::uint32_t kShtSymtab = 2;
constexpr std::uint32_t kShtDynsym = 11;
constexpr std::uint8_t kSttAmdgpuHsaKernel = 10;
constexpr std::uint64_t kElfHeaderSize = 64;
constexpr std::uint64_t kSectionHeaderSize = 64;
constexpr std::uint64_t kSymbolSize = 24;

}  // namespace

bool is_offload_bundle(std::span<const std::byte> image) noexcept {
  return starts_with(image, kBundleMagic);
}

bool is_compressed_bundle(std::span<const std::byte> image) noexcept {
  return starts_with(image, kCompressedBundleMagic);
}

bool is_elf(std::span<const std::byte> image) noexcept {
  return starts_with(image,
                     "\x7f"
                     "ELF");
}

std::optional<std::vector<BundleEntry>> parse_offload_bundle(std::span<const std::byte> image) {
  if (!is_offload_bundle(image)) return std::nullopt;
  std::uint64_t at = kBundleMagic.size();
  const auto count = read_le<std::uint64_t>(image, at);
  at += 8;
  // Each entry takes at least 24 header bytes, which bounds a corrupt count before reserving.
  if (!count || *count > (image.size() - at) / 24) return std::nullopt;
  std::vector<BundleEntry> entries;
  entries.reserve(*count);
  for (std::uint64_t i = 0; i < *count; ++i) {
    const auto offset = read_le<std::uint64_t>(image, at);
    const auto size = read_le<std::uint64_t>(image, at + 8);
    const auto id_size = read_le<std::uint64_t>(image, at + 16);
    if (!offset || !size || !id_size) return std::nullopt;
    at += 24;
    if (!in_range(at, *id_size, image.size()) || !in_range(*offset, *size, image.size()))
      return std::nullopt;
    BundleEntry entry;
    entry.id.assign(reinterpret_cast<const char*>(image.data() + at), *id_size);
    entry.data = image.subspan(*offset, *size);
    entries.push_back(std::move(entry));
    at += *id_size;
  }
  return entries;
}

std::string_view amdgpu_target_of(std::string_view bundle_id) noexcept {
  // Both id forms seen in the wild: "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+" (4-part triple with
  // an empty environment) and the older "hip-amdgcn-amd-amdhsa-gfx906". Features end in '-', so
  // the target is found by its "gfx" prefix rather than by the last dash.
  constexpr std::string_view kTriple = "amdgcn-amd-amdhsa";
  const std::size_t triple = bundle_id.find(kTriple);
  if (triple == std::string_view::npos) return {};
  const std::size_t target = bundle_id.find("gfx", triple + kTriple.size());
  if (target == std::string_view::npos) return {};
  return bundle_id.substr(target);
}

bool target_matches(std::string_view code_target, std::string_view device_arch) noexcept {
  const TargetId code = split_target(code_target);
  const TargetId device = split_target(device_arch);
  if (code.processor.empty() || code.processor != device.processor) return false;
  for (std::string_view feature : code.features) {
    // The device must report the same setting; a device that does not report the feature at
    // all (an older runtime) cannot be held against the code object.
    const std::string_view name = feature.substr(0, feature.size() - 1);
    for (std::string_view have : device.features)
      if (have.substr(0, have.size() - 1) == name && have != feature) return false;
  }
  return true;
}

std::span<const std::byte> select_code_object(std::span<const std::byte> image,
                                              std::string_view device_arch) {
  if (is_elf(image)) return image;
  const auto entries = parse_offload_bundle(image);
  if (!entries) return {};
  std::span<const std::byte> first;
  for (const BundleEntry& entry : *entries) {
    const std::string_view target = amdgpu_target_of(entry.id);
    if (target.empty() || entry.data.empty()) continue;
    if (!device_arch.empty() && target_matches(target, device_arch)) return entry.data;
    if (first.empty()) first = entry.data;
  }
  return first;
}

std::optional<std::uint16_t> elf_machine(std::span<const std::byte> image) noexcept {
  // e_ident: class ELFCLASS64 (2) at 4, data ELFDATA2LSB (1) at 5; e_machine at 18.
  if (!is_elf(image) || image.size() < kElfHeaderSize) return std::nullopt;
  if (image[4] != std::byte{2} || image[5] != std::byte{1}) return std::nullopt;
  return read_le<std::uint16_t>(image, 18);
}

std::optional<std::vector<ElfSymbol>> read_elf_symbols(std::span<const std::byte> image) {
  if (!elf_machine(image)) return std::nullopt;
  const auto shoff = read_le<std::uint64_t>(image, 40);
  const auto shentsize = read_le<std::uint16_t>(image, 58);
  const auto shnum = read_le<std::uint16_t>(image, 60);
  if (!shoff || !shentsize || !shnum || *shentsize < kSectionHeaderSize) return std::nullopt;
  if (!in_range(*shoff, std::uint64_t{*shentsize} * *shnum, image.size())) return std::nullopt;

  struct Section {
    std::uint32_t type;
    std::uint64_t offset, size, entsize;
    std::uint32_t link;
  };
  auto section = [&](std::uint32_t index) -> std::optional<Section> {
    if (index >= *shnum) return std::nullopt;
    const std::uint64_t at = *shoff + std::uint64_t{index} * *shentsize;
    Section s{*read_le<std::uint32_t>(image, at + 4), *read_le<std::uint64_t>(image, at + 24),
              *read_le<std::uint64_t>(image, at + 32), *read_le<std::uint64_t>(image, at + 56),
              *read_le<std::uint32_t>(image, at + 40)};
    if (!in_range(s.offset, s.size, image.size())) return std::nullopt;
    return s;
  };

  // Prefer the full .symtab; a stripped object still has the .dynsym the loader uses.
  std::optional<Section> symtab;
  for (std::uint32_t want : {kShtSymtab, kShtDynsym}) {
    for (std::uint32_t i = 0; i < *shnum && !symtab; ++i) {
      const auto s = section(i);
      if (s && s->type == want) symtab = s;
    }
    if (symtab) break;
  }
  std::vector<ElfSymbol> symbols;
  if (!symtab) return symbols;  // a well-formed ELF without symbols
  const auto strtab = section(symtab->link);
  if (!strtab || (symtab->entsize != 0 && symtab->entsize < kSymbolSize)) return std::nullopt;
  const std::uint64_t entsize = symtab->entsize != 0 ? symtab->entsize : kSymbolSize;
  const std::span<const std::byte> strings = image.subspan(strtab->offset, strtab->size);

  const std::uint64_t count = symtab->size / entsize;
  symbols.reserve(count);
  for (std::uint64_t i = 1; i < count; ++i) {  // entry 0 is the reserved null symbol
    const std::uint64_t at = symtab->offset + i * entsize;
    ElfSymbol sym;
    const std::uint32_t name = *read_le<std::uint32_t>(image, at);
    const auto info = static_cast<std::uint8_t>(image[at + 4]);
    sym.type = info & 0xF;
    sym.binding = info >> 4;
    sym.section = *read_le<std::uint16_t>(image, at + 6);
    sym.value = *read_le<std::uint64_t>(image, at + 8);
    sym.size = *read_le<std::uint64_t>(image, at + 16);
    if (name >= strings.size()) return std::nullopt;
    const auto* begin = reinterpret_cast<const char*>(strings.data()) + name;
    const void* end = std::memchr(begin, '\0', strings.size() - name);
    if (end == nullptr) return std::nullopt;
    sym.name.assign(begin, static_cast<const char*>(end));
    symbols.push_back(std::move(sym));
  }
  return symbols;
}

std::vector<std::string> kernel_names(const std::vector<ElfSymbol>& symbols) {
  constexpr std::string_view kDescriptor = ".kd";
  std::vector<std::string> names;
  for (const ElfSymbol& sym : symbols) {
    const std::string_view name = sym.name;
    if (name.size() > kDescriptor.size() && name.ends_with(kDescriptor))
      names.emplace_back(name.substr(0, name.size() - kDescriptor.size()));
    else if (sym.type == kSttAmdgpuHsaKernel)
      names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::string image_problem(std::span<const std::byte> image) {
  if (is_offload_bundle(image)) {
    if (!parse_offload_bundle(image))
      return "malformed clang offload bundle (an entry lies outside the " +
             std::to_string(image.size()) + "-byte image)";
    return "";
  }
  if (is_elf(image)) {
    if (elf_machine(image) != kElfMachineAmdgpu || !read_elf_symbols(image))
      return "not an AMDGPU code object (an ELF file, but not a well-formed ELF64 for EM_AMDGPU)";
    return "";
  }
  if (is_compressed_bundle(image)) return "";
  return "not a HIP code object (expected a clang offload bundle from hipcc --genco, or an "
         "AMDGPU ELF code object)";
}

std::vector<std::string> bundle_targets(std::span<const std::byte> image) {
  std::vector<std::string> targets;
  if (const auto entries = parse_offload_bundle(image))
    for (const BundleEntry& entry : *entries)
      if (const std::string_view target = amdgpu_target_of(entry.id); !target.empty())
        targets.emplace_back(target);
  return targets;
}

}  // namespace gpuplug::hip
