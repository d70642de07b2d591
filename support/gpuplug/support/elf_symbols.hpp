// SPDX-License-Identifier: Apache-2.0
// Reading the symbols of an untrusted little-endian ELF64 image (any machine: a host module, a
// CUDA cubin, an AMDGPU code object) without loading it, for module preflight (inspect_module).
#pragma once

// Why a second reader beside elf_image.hpp: that one validates a shared object for *this*
// machine before dlopen; this one only lists what an image defines, for any machine, so that a
// module built for another target can still be described. Every offset, size, count and string
// is checked against the bytes given; malformed input is reported with the structure that is
// wrong, never by reading out of bounds. Byte by byte reads: neither the host's endianness nor
// the image's alignment matters.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpuplug::support {

/// One section header of an ELF64 image (the fields the readers use).
struct ElfSection {
  std::uint32_t name = 0;  // offset into the section-name string table
  std::uint32_t type = 0;  // SHT_*
  std::uint64_t addr = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint32_t link = 0;
  std::uint64_t entsize = 0;
};

/// One symbol of a symbol table.
struct ElfSymbolInfo {
  std::string name;
  std::uint8_t type = 0;        // STT_* (low nibble of st_info)
  std::uint8_t binding = 0;     // STB_* (high nibble)
  std::uint8_t visibility = 0;  // STV_* (low two bits of st_other)
  std::uint8_t other = 0;       // st_other as stored (CUDA marks kernels in it)
  std::uint16_t section = 0;    // st_shndx
  std::uint64_t value = 0;
  std::uint64_t size = 0;
};

/// What read_elf64_symbols found.
struct ElfSymbolTable {
  std::uint16_t type = 0;     // e_type (ET_REL, ET_EXEC, ET_DYN)
  std::uint16_t machine = 0;  // e_machine
  std::uint32_t flags = 0;    // e_flags (the SM of a cubin, the gfx target of a code object)
  std::vector<ElfSection> sections;
  std::vector<std::string> section_names;  // one per section ("" when it has none)
  std::vector<ElfSymbolInfo> symbols;      // without the reserved null symbol
};

inline constexpr std::uint32_t elf_sht_symtab = 2;
inline constexpr std::uint32_t elf_sht_dynsym = 11;
inline constexpr std::uint32_t elf_sht_nobits = 8;

namespace detail::elf_symbols {

template <class T>
std::optional<T> read_le(std::span<const std::byte> image, std::uint64_t offset) noexcept {
  if (offset > image.size() || image.size() - offset < sizeof(T)) return std::nullopt;
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    value = static_cast<T>(value | (static_cast<T>(static_cast<unsigned char>(image[offset + i]))
                                    << (8 * i)));
  return value;
}

inline bool in_range(std::uint64_t offset, std::uint64_t size, std::uint64_t total) noexcept {
  return offset <= total && size <= total - offset;
}

/// The NUL-terminated string at `offset` of `strings`, nullopt when it is not terminated inside.
inline std::optional<std::string> string_at(std::span<const std::byte> strings,
                                            std::uint64_t offset) {
  if (offset >= strings.size()) return std::nullopt;
  const auto* begin = reinterpret_cast<const char*>(strings.data()) + offset;
  const void* end = std::memchr(begin, '\0', strings.size() - offset);
  if (end == nullptr) return std::nullopt;
  return std::string(begin, static_cast<const char*>(end));
}

/// The bytes section `s` holds in the image, nullopt when it has none (SHT_NOBITS) or they lie
/// outside it. Checked for every section read, whatever its type: a corrupt index may point a
/// table at an SHT_NULL header whose offset and size were never range-checked.
inline std::optional<std::span<const std::byte>> section_bytes(std::span<const std::byte> image,
                                                               const ElfSection& s) noexcept {
  if (s.type == elf_sht_nobits || !in_range(s.offset, s.size, image.size()))
    return std::nullopt;
  return image.subspan(s.offset, s.size);
}

}  // namespace detail::elf_symbols

/// Reads the header, the section headers and names, and the first symbol table found of the
/// types in `tables`, tried in order (e.g. {SHT_SYMTAB, SHT_DYNSYM}). nullopt with `why` set when
/// the image is not a little-endian ELF64 or a structure lies outside it; a well-formed image
/// without such a table has no symbols. Symbols are capped at 1 << 20 (far beyond any module)
/// so that a corrupt count cannot exhaust memory.
inline std::optional<ElfSymbolTable> read_elf64_symbols(std::span<const std::byte> image,
                                                        std::span<const std::uint32_t> tables,
                                                        std::string& why) {
  using detail::elf_symbols::in_range;
  using detail::elf_symbols::read_le;
  using detail::elf_symbols::section_bytes;
  using detail::elf_symbols::string_at;
  const std::uint64_t size = image.size();
  if (size < 4 || std::memcmp(image.data(), "\x7f" "ELF", 4) != 0) {
    why = "not an ELF file (no ELF magic)";
    return std::nullopt;
  }
  if (size < 64) {
    why = "truncated ELF header: " + std::to_string(size) + " of 64 bytes";
    return std::nullopt;
  }
  if (image[4] != std::byte{2} || image[5] != std::byte{1}) {
    why = "not a little-endian 64-bit ELF file";
    return std::nullopt;
  }
  ElfSymbolTable out;
  out.type = *read_le<std::uint16_t>(image, 16);
  out.machine = *read_le<std::uint16_t>(image, 18);
  out.flags = *read_le<std::uint32_t>(image, 48);
  const std::uint64_t shoff = *read_le<std::uint64_t>(image, 40);
  const std::uint64_t shentsize = *read_le<std::uint16_t>(image, 58);
  const std::uint64_t shnum = *read_le<std::uint16_t>(image, 60);
  const std::uint64_t shstrndx = *read_le<std::uint16_t>(image, 62);
  if (shnum == 0) return out;  // no section headers: nothing to list
  if (shentsize < 64 || !in_range(shoff, shentsize * shnum, size)) {
    why = "truncated ELF: its " + std::to_string(shnum) + " section headers at offset " +
          std::to_string(shoff) + " lie past the end of the " + std::to_string(size) +
          "-byte image";
    return std::nullopt;
  }
  out.sections.reserve(shnum);
  for (std::uint64_t i = 0; i < shnum; ++i) {
    const std::uint64_t at = shoff + i * shentsize;
    ElfSection s{*read_le<std::uint32_t>(image, at),      *read_le<std::uint32_t>(image, at + 4),
                 *read_le<std::uint64_t>(image, at + 16), *read_le<std::uint64_t>(image, at + 24),
                 *read_le<std::uint64_t>(image, at + 32), *read_le<std::uint32_t>(image, at + 40),
                 *read_le<std::uint64_t>(image, at + 56)};
    if (s.type != elf_sht_nobits && s.type != 0 && !in_range(s.offset, s.size, size)) {
      why = "truncated ELF: section " + std::to_string(i) + " (offset " +
            std::to_string(s.offset) + ", " + std::to_string(s.size) +
            " bytes) lies past the end of the " + std::to_string(size) + "-byte image";
      return std::nullopt;
    }
    out.sections.push_back(s);
  }
  out.section_names.assign(shnum, std::string());
  if (shstrndx < shnum) {
    if (const auto strings = section_bytes(image, out.sections[shstrndx]))
      for (std::uint64_t i = 0; i < shnum; ++i)
        if (auto n = string_at(*strings, out.sections[i].name))
          out.section_names[i] = std::move(*n);
  }
  const ElfSection* table = nullptr;
  for (const std::uint32_t want : tables) {
    for (const ElfSection& s : out.sections)
      if (s.type == want) {
        table = &s;
        break;
      }
    if (table != nullptr) break;
  }
  if (table == nullptr) return out;
  constexpr std::uint64_t symbol_size = 24;
  const auto linked = table->link < shnum ? section_bytes(image, out.sections[table->link])
                                           : std::nullopt;
  if ((table->entsize != 0 && table->entsize < symbol_size) || !linked) {
    why = "malformed ELF symbol table (entry size " + std::to_string(table->entsize) +
          ", string table " + std::to_string(table->link) +
          (table->link < shnum ? " holds no bytes inside the image)" : " does not exist)");
    return std::nullopt;
  }
  const std::uint64_t entsize = table->entsize != 0 ? table->entsize : symbol_size;
  const std::span<const std::byte> strings = *linked;
  const std::uint64_t count = table->size / entsize;
  constexpr std::uint64_t max_symbols = std::uint64_t{1} << 20;
  if (count > max_symbols) {
    why = "ELF symbol table of " + std::to_string(count) + " entries (more than " +
          std::to_string(max_symbols) + ")";
    return std::nullopt;
  }
  out.symbols.reserve(count);
  for (std::uint64_t i = 1; i < count; ++i) {  // entry 0 is the reserved null symbol
    const std::uint64_t at = table->offset + i * entsize;
    ElfSymbolInfo sym;
    const std::uint32_t name = *read_le<std::uint32_t>(image, at);
    const auto info = static_cast<std::uint8_t>(image[at + 4]);
    sym.other = static_cast<std::uint8_t>(image[at + 5]);
    sym.type = info & 0xF;
    sym.binding = info >> 4;
    sym.visibility = sym.other & 0x3;
    sym.section = *read_le<std::uint16_t>(image, at + 6);
    sym.value = *read_le<std::uint64_t>(image, at + 8);
    sym.size = *read_le<std::uint64_t>(image, at + 16);
    auto text = string_at(strings, name);
    if (!text) {
      why = "malformed ELF symbol " + std::to_string(i) + ": its name (offset " +
            std::to_string(name) + ") is not a string of the " + std::to_string(strings.size()) +
            "-byte string table";
      return std::nullopt;
    }
    sym.name = std::move(*text);
    out.symbols.push_back(std::move(sym));
  }
  return out;
}

/// The 4-byte initial value of `sym` when the image holds it: a defined symbol of size 4 in a
/// section with file contents, its bytes inside that section. st_value is section-relative in a
/// relocatable object (ET_REL) and an address otherwise. nullopt when the image does not hold it
/// (.bss, an undefined or absolute symbol, another size, a value outside its section).
inline std::optional<std::uint32_t> elf_symbol_u32(std::span<const std::byte> image,
                                                   const ElfSymbolTable& table,
                                                   const ElfSymbolInfo& sym) noexcept {
  constexpr std::uint16_t et_rel = 1;
  if (sym.size != 4 || sym.section == 0 || sym.section >= table.sections.size()) return std::nullopt;
  const ElfSection& s = table.sections[sym.section];
  if (s.type == elf_sht_nobits || s.type == 0) return std::nullopt;
  std::uint64_t within = sym.value;
  if (table.type != et_rel) {
    if (sym.value < s.addr) return std::nullopt;
    within = sym.value - s.addr;
  }
  if (!detail::elf_symbols::in_range(within, 4, s.size)) return std::nullopt;
  return detail::elf_symbols::read_le<std::uint32_t>(image, s.offset + within);
}

}  // namespace gpuplug::support
