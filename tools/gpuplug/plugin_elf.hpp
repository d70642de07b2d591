// SPDX-License-Identifier: Apache-2.0
// What `gpuplug check`'s lints read from a plugin file without loading it: its dynamic symbols,
// the symbols its relocations name, and its RUNPATH/RPATH.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gpuplug::tool {

/// One symbol of the dynamic symbol table (.dynsym).
struct DynamicSymbol {
  std::string name;             // as stored; escape before printing
  bool defined = false;         // st_shndx is not SHN_UNDEF
  bool global = false;          // binding STB_GLOBAL, STB_WEAK or STB_GNU_UNIQUE
  bool visible = false;         // visibility default or protected: other objects can bind to it
  bool absolute = false;        // st_shndx is SHN_ABS (what a version script's node name becomes)
  std::uint8_t type = 0;        // STT_*
  std::size_t relocations = 0;  // how many dynamic relocations (.rela.*) name it
};

/// What read_plugin_elf found in a plugin file.
struct PluginElf {
  std::vector<DynamicSymbol> symbols;  // .dynsym without its reserved null entry
  std::vector<std::string> runpath;    // DT_RUNPATH values (normally at most one)
  std::vector<std::string> rpath;      // DT_RPATH values
};

/// Reads `file` (a regular file of at most 1 GiB) as an untrusted shared object. First the whole
/// image goes through support::validate_elf_shared_object, the check the core runs on kernel
/// modules before dlopen, so every structure read after it is known to lie inside the file;
/// the section headers (.dynsym, .dynamic, SHT_RELA) are then read with the bounds-checked
/// readers of support/elf_symbols.hpp. nullopt with `why` set ("does not start with the ELF
/// magic ...", "section 12 ... runs past the end ...") when the file cannot be read, is not such
/// an object, or has no section headers. Never throws but std::bad_alloc; reads nothing outside
/// the file's bytes.
std::optional<PluginElf> read_plugin_elf(const std::filesystem::path& file, std::string& why);

}  // namespace gpuplug::tool
