// SPDX-License-Identifier: Apache-2.0
// The names an ELF check's messages use: machines, segment types, dynamic tags, and what ld.so
// does with each relocation type of the machines it knows.
#include <elf.h>

#include <cstdint>
#include <span>
#include <string>

#include "gpuplug/support/text.hpp"
#include "image_check.hpp"

namespace gpuplug::support::detail::elf {

constexpr MachineName machine_names[] = {
    {EM_NONE, "no machine", "EM_NONE"},
    {EM_SPARC, "sparc", "EM_SPARC"},
    {EM_386, "i386", "EM_386"},
    {EM_MIPS, "mips", "EM_MIPS"},
    {EM_PPC, "ppc", "EM_PPC"},
    {EM_PPC64, "ppc64", "EM_PPC64"},
    {EM_S390, "s390x", "EM_S390"},
    {EM_ARM, "arm", "EM_ARM"},
    {EM_SPARCV9, "sparc64", "EM_SPARCV9"},
    {EM_IA_64, "ia64", "EM_IA_64"},
    {EM_X86_64, "x86-64", "EM_X86_64"},
    {EM_AARCH64, "aarch64", "EM_AARCH64"},
    {190, "CUDA", "EM_CUDA"},
    {224, "AMD GPU", "EM_AMDGPU"},
    {243, "riscv", "EM_RISCV"},
    {247, "BPF", "EM_BPF"},
    {258, "loongarch", "EM_LOONGARCH"},
};

const MachineName* find_machine(std::uint16_t machine) noexcept {
  for (const auto& m : machine_names)
    if (m.machine == machine) return &m;
  return nullptr;
}

struct SegmentName {
  std::uint32_t value;
  const char* name;
};
// clang-format off
constexpr SegmentName segment_names[] = {
    {PT_NULL, "PT_NULL"}, {PT_LOAD, "PT_LOAD"}, {PT_DYNAMIC, "PT_DYNAMIC"},
    {PT_INTERP, "PT_INTERP"}, {PT_NOTE, "PT_NOTE"}, {PT_SHLIB, "PT_SHLIB"}, {PT_PHDR, "PT_PHDR"},
    {PT_TLS, "PT_TLS"}, {PT_GNU_EH_FRAME, "PT_GNU_EH_FRAME"}, {PT_GNU_STACK, "PT_GNU_STACK"},
    {PT_GNU_RELRO, "PT_GNU_RELRO"}, {pt_gnu_property, "PT_GNU_PROPERTY"},
};
// clang-format on

std::string segment_type_name(std::uint32_t type) {
  for (const auto& n : segment_names)
    if (n.value == type) return n.name;
  return "type " + hex(type);
}

struct TagName {
  std::int64_t value;
  const char* name;
};
// clang-format off
constexpr TagName tag_names[] = {
    {DT_NULL, "DT_NULL"}, {DT_NEEDED, "DT_NEEDED"}, {DT_PLTRELSZ, "DT_PLTRELSZ"},
    {DT_PLTGOT, "DT_PLTGOT"}, {DT_HASH, "DT_HASH"}, {DT_STRTAB, "DT_STRTAB"},
    {DT_SYMTAB, "DT_SYMTAB"}, {DT_RELA, "DT_RELA"}, {DT_RELASZ, "DT_RELASZ"},
    {DT_RELAENT, "DT_RELAENT"}, {DT_STRSZ, "DT_STRSZ"}, {DT_SYMENT, "DT_SYMENT"},
    {DT_INIT, "DT_INIT"}, {DT_FINI, "DT_FINI"}, {DT_SONAME, "DT_SONAME"}, {DT_RPATH, "DT_RPATH"},
    {DT_SYMBOLIC, "DT_SYMBOLIC"}, {DT_REL, "DT_REL"}, {DT_RELSZ, "DT_RELSZ"},
    {DT_RELENT, "DT_RELENT"}, {DT_PLTREL, "DT_PLTREL"}, {DT_DEBUG, "DT_DEBUG"},
    {DT_TEXTREL, "DT_TEXTREL"}, {DT_JMPREL, "DT_JMPREL"}, {DT_BIND_NOW, "DT_BIND_NOW"},
    {DT_INIT_ARRAY, "DT_INIT_ARRAY"}, {DT_FINI_ARRAY, "DT_FINI_ARRAY"},
    {DT_INIT_ARRAYSZ, "DT_INIT_ARRAYSZ"}, {DT_FINI_ARRAYSZ, "DT_FINI_ARRAYSZ"},
    {DT_RUNPATH, "DT_RUNPATH"}, {DT_FLAGS, "DT_FLAGS"}, {DT_PREINIT_ARRAY, "DT_PREINIT_ARRAY"},
    {DT_PREINIT_ARRAYSZ, "DT_PREINIT_ARRAYSZ"}, {dt_relrsz, "DT_RELRSZ"}, {dt_relr, "DT_RELR"},
    {dt_relrent, "DT_RELRENT"}, {DT_GNU_HASH, "DT_GNU_HASH"}, {DT_TLSDESC_PLT, "DT_TLSDESC_PLT"},
    {DT_TLSDESC_GOT, "DT_TLSDESC_GOT"}, {DT_VERSYM, "DT_VERSYM"}, {DT_RELACOUNT, "DT_RELACOUNT"},
    {DT_RELCOUNT, "DT_RELCOUNT"}, {DT_FLAGS_1, "DT_FLAGS_1"}, {DT_VERDEF, "DT_VERDEF"},
    {DT_VERDEFNUM, "DT_VERDEFNUM"}, {DT_VERNEED, "DT_VERNEED"}, {DT_VERNEEDNUM, "DT_VERNEEDNUM"},
    {DT_AUXILIARY, "DT_AUXILIARY"}, {DT_FILTER, "DT_FILTER"}, {DT_CONFIG, "DT_CONFIG"},
    {DT_DEPAUDIT, "DT_DEPAUDIT"}, {DT_AUDIT, "DT_AUDIT"},
};
// clang-format on

std::string tag_name(std::int64_t tag) {
  for (const auto& n : tag_names)
    if (n.value == tag) return n.name;
  return "tag " + hex(static_cast<std::uint64_t>(tag));
}

bool is_string_tag(std::int64_t tag) noexcept {
  return tag == DT_NEEDED || tag == DT_SONAME || tag == DT_RPATH || tag == DT_RUNPATH ||
         tag == DT_AUXILIARY || tag == DT_FILTER || tag == DT_CONFIG || tag == DT_DEPAUDIT ||
         tag == DT_AUDIT;
}

bool is_repeatable_tag(std::int64_t tag) noexcept {
  return tag == DT_NEEDED || tag == DT_AUXILIARY || tag == DT_FILTER;
}

constexpr const char* copy_refused = "a copy relocation, which only executables may use";
constexpr RelocKind x86_64_relocs[] = {
    {R_X86_64_NONE, "R_X86_64_NONE", 0, 0, nullptr},
    {R_X86_64_64, "R_X86_64_64", 8, reloc_needs_symbol, nullptr},
    {R_X86_64_PC32, "R_X86_64_PC32", 4, reloc_needs_symbol, nullptr},
    {R_X86_64_COPY, "R_X86_64_COPY", 8, 0, copy_refused},
    {R_X86_64_GLOB_DAT, "R_X86_64_GLOB_DAT", 8, reloc_got_slot | reloc_needs_symbol, nullptr},
    {R_X86_64_JUMP_SLOT, "R_X86_64_JUMP_SLOT", 8, reloc_got_slot | reloc_needs_symbol, nullptr},
    {R_X86_64_RELATIVE, "R_X86_64_RELATIVE", 8, reloc_relative, nullptr},
    {R_X86_64_32, "R_X86_64_32", 4, reloc_needs_symbol, nullptr},
    {R_X86_64_DTPMOD64, "R_X86_64_DTPMOD64", 8, reloc_tls | reloc_got_slot, nullptr},
    {R_X86_64_DTPOFF64, "R_X86_64_DTPOFF64", 8, reloc_tls | reloc_got_slot, nullptr},
    {R_X86_64_TPOFF64, "R_X86_64_TPOFF64", 8, reloc_tls | reloc_got_slot, nullptr},
    {R_X86_64_SIZE32, "R_X86_64_SIZE32", 4, reloc_needs_symbol, nullptr},
    {R_X86_64_SIZE64, "R_X86_64_SIZE64", 8, reloc_needs_symbol, nullptr},
    {R_X86_64_TLSDESC, "R_X86_64_TLSDESC", 16, reloc_tls | reloc_got_slot, nullptr},
    {R_X86_64_IRELATIVE, "R_X86_64_IRELATIVE", 8, reloc_irelative, nullptr},
};
constexpr RelocKind aarch64_relocs[] = {
    {R_AARCH64_NONE, "R_AARCH64_NONE", 0, 0, nullptr},
    {256, "R_AARCH64_NONE", 0, 0, nullptr},  // the ABI's other spelling of "none"
    {R_AARCH64_ABS64, "R_AARCH64_ABS64", 8, reloc_needs_symbol, nullptr},
    {R_AARCH64_COPY, "R_AARCH64_COPY", 8, 0, copy_refused},
    {R_AARCH64_GLOB_DAT, "R_AARCH64_GLOB_DAT", 8, reloc_got_slot | reloc_needs_symbol, nullptr},
    {R_AARCH64_JUMP_SLOT, "R_AARCH64_JUMP_SLOT", 8, reloc_got_slot | reloc_needs_symbol, nullptr},
    {R_AARCH64_RELATIVE, "R_AARCH64_RELATIVE", 8, reloc_relative, nullptr},
    {R_AARCH64_TLS_DTPMOD, "R_AARCH64_TLS_DTPMOD", 8, reloc_tls | reloc_got_slot, nullptr},
    {R_AARCH64_TLS_DTPREL, "R_AARCH64_TLS_DTPREL", 8, reloc_tls | reloc_got_slot, nullptr},
    {R_AARCH64_TLS_TPREL, "R_AARCH64_TLS_TPREL", 8, reloc_tls | reloc_got_slot, nullptr},
    {R_AARCH64_TLSDESC, "R_AARCH64_TLSDESC", 16, reloc_tls | reloc_got_slot, nullptr},
    {R_AARCH64_IRELATIVE, "R_AARCH64_IRELATIVE", 8, reloc_irelative, nullptr},
};

RelocKind reloc_kind(std::uint16_t machine, std::uint32_t type) {
  const std::span<const RelocKind> table = machine == EM_X86_64    ? std::span(x86_64_relocs)
                                           : machine == EM_AARCH64 ? std::span(aarch64_relocs)
                                                                   : std::span<const RelocKind>();
  for (const RelocKind& k : table)
    if (k.type == type) return k;
  if (table.empty()) return {type, "", 8, 0, nullptr};
  return {type, "", 8, 0, "a type ld.so does not apply on this machine"};
}

bool knows_reloc_types(std::uint16_t machine) noexcept {
  return machine == EM_X86_64 || machine == EM_AARCH64;
}

}  // namespace gpuplug::support::detail::elf
