// SPDX-License-Identifier: Apache-2.0
// Reading a plugin's dynamic symbols, relocations and RUNPATH for the lints, trusting no offset.
#include "plugin_elf.hpp"

#include <elf.h>

#include <gpuplug/support/elf_image.hpp>
#include <gpuplug/support/elf_symbols.hpp>
#include <gpuplug/support/regular_file.hpp>
#include <span>

namespace gpuplug::tool {

namespace {

namespace elf = support::detail::elf_symbols;

/// Far beyond any plugin; keeps a huge file from being read whole.
constexpr std::uint64_t max_plugin_bytes = std::uint64_t{1} << 30;

/// The bytes of section `s`; none when it has no bytes inside `image`.
std::span<const std::byte> bytes_of(std::span<const std::byte> image,
                                    const support::ElfSection& s) {
  return elf::section_bytes(image, s).value_or(std::span<const std::byte>{});
}

/// Counts, per dynamic symbol, the SHT_RELA entries that name it. Relocation sections that
/// belong to another symbol table (sh_link) are not the dynamic loader's and are skipped.
bool count_relocations(std::span<const std::byte> image, const support::ElfSymbolTable& table,
                       std::size_t dynsym, PluginElf& out, std::string& why) {
  for (std::size_t i = 0; i < table.sections.size(); ++i) {
    const support::ElfSection& s = table.sections[i];
    if (s.type != SHT_RELA || s.link != dynsym) continue;
    if (s.entsize != sizeof(Elf64_Rela)) {
      why = "relocation section " + std::to_string(i) + " has entries of " +
            std::to_string(s.entsize) + " bytes, not " + std::to_string(sizeof(Elf64_Rela));
      return false;
    }
    const auto rela = bytes_of(image, s);
    for (std::uint64_t at = 0; at + sizeof(Elf64_Rela) <= rela.size(); at += sizeof(Elf64_Rela)) {
      const auto info = elf::read_le<std::uint64_t>(rela, at + 8);
      if (!info) break;  // cannot happen: the loop stays inside the section
      const std::uint64_t sym = ELF64_R_SYM(*info);
      if (sym == 0) continue;  // relative relocations name no symbol
      if (sym > out.symbols.size()) {
        why = "relocation section " + std::to_string(i) + " names symbol " + std::to_string(sym) +
              ", past the " + std::to_string(out.symbols.size()) + " of .dynsym";
        return false;
      }
      ++out.symbols[sym - 1].relocations;
    }
  }
  return true;
}

/// Collects DT_RUNPATH and DT_RPATH from the SHT_DYNAMIC section, each string read from the
/// section its sh_link names and NUL-terminated inside it.
bool read_search_paths(std::span<const std::byte> image, const support::ElfSymbolTable& table,
                       PluginElf& out, std::string& why) {
  for (std::size_t i = 0; i < table.sections.size(); ++i) {
    const support::ElfSection& s = table.sections[i];
    if (s.type != SHT_DYNAMIC) continue;
    if (s.link >= table.sections.size() || table.sections[s.link].type != SHT_STRTAB) {
      why = "the dynamic section (section " + std::to_string(i) +
            ") links to no string table (sh_link " + std::to_string(s.link) + ")";
      return false;
    }
    const auto strings = bytes_of(image, table.sections[s.link]);
    const auto dynamic = bytes_of(image, s);
    for (std::uint64_t at = 0; at + sizeof(Elf64_Dyn) <= dynamic.size(); at += sizeof(Elf64_Dyn)) {
      const auto tag = elf::read_le<std::uint64_t>(dynamic, at);
      const auto value = elf::read_le<std::uint64_t>(dynamic, at + 8);
      if (!tag || !value || *tag == DT_NULL) break;
      if (*tag != DT_RUNPATH && *tag != DT_RPATH) continue;
      auto text = elf::string_at(strings, *value);
      if (!text) {
        why = std::string(*tag == DT_RUNPATH ? "DT_RUNPATH" : "DT_RPATH") + " (offset " +
              std::to_string(*value) + ") is not a string of the " +
              std::to_string(strings.size()) + "-byte dynamic string table";
        return false;
      }
      (*tag == DT_RUNPATH ? out.runpath : out.rpath).push_back(std::move(*text));
    }
  }
  return true;
}

}  // namespace

std::optional<PluginElf> read_plugin_elf(const std::filesystem::path& file, std::string& why) {
  const auto image = support::read_regular_file(file, max_plugin_bytes, why);
  if (!image) return std::nullopt;
  if (const auto verdict = support::validate_elf_shared_object(*image); !verdict) {
    why = "not a shared object the dynamic loader can load safely: " + verdict.defect;
    return std::nullopt;
  }
  static constexpr std::uint32_t dynsym_only[] = {support::elf_sht_dynsym};
  const auto table = support::read_elf64_symbols(*image, dynsym_only, why);
  if (!table) return std::nullopt;
  std::size_t dynsym = table->sections.size();
  for (std::size_t i = 0; i < table->sections.size() && dynsym == table->sections.size(); ++i)
    if (table->sections[i].type == SHT_DYNSYM) dynsym = i;
  if (dynsym == table->sections.size()) {
    why = "no dynamic symbol table (.dynsym) in its section headers";
    return std::nullopt;
  }
  PluginElf out;
  out.symbols.reserve(table->symbols.size());
  for (const support::ElfSymbolInfo& s : table->symbols) {
    DynamicSymbol d;
    d.name = s.name;
    d.defined = s.section != SHN_UNDEF;
    d.global = s.binding == STB_GLOBAL || s.binding == STB_WEAK || s.binding == STB_GNU_UNIQUE;
    d.visible = s.visibility == STV_DEFAULT || s.visibility == STV_PROTECTED;
    d.absolute = s.section == SHN_ABS;
    d.type = s.type;
    out.symbols.push_back(std::move(d));
  }
  if (!count_relocations(*image, *table, dynsym, out, why)) return std::nullopt;
  if (!read_search_paths(*image, *table, out, why)) return std::nullopt;
  return out;
}

}  // namespace gpuplug::tool
