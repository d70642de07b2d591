// SPDX-License-Identifier: Apache-2.0
// Internal: checking an ELF shared object before the dynamic loader sees it. glibc's ld.so trusts
// the program headers, the dynamic section and every table they point to, so a damaged module
// crashes the process inside dlopen; this checks all of what ld.so would read, and says what is
// wrong.
//
// Two entry points:
//  - validate_elf_header(first 64 bytes [, file size]): the ELF header only (magic, class, byte
//    order, versions, OS ABI, ET_DYN, this process's machine, header and table entry sizes, the
//    tables inside the file). For plugin files, which the loader should not read whole.
//  - validate_elf_shared_object(whole image): the header, then everything ld.so uses when it maps,
//    relocates, initialises and later finalises the object. For kernel modules, loaded from bytes.
//
// Both are pure functions of their input (and of the page size), never throw except std::bad_alloc,
// read nothing outside the span, and are safe to call from many threads at once.
#pragma once

#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpuplug/support/text.hpp"

namespace gpuplug::support {

/// What an ELF check concluded: `ok()`, or the defect that made it refuse, in words that name the
/// structure and the numbers ("program header 3 (PT_LOAD): file range 0x1000+0x50000 runs past the
/// end of the 0x4210-byte image"). The defect never contains bytes of the image unescaped.
struct ElfVerdict {
  std::string defect;  ///< empty when the check passed

  bool ok() const noexcept { return defect.empty(); }
  explicit operator bool() const noexcept { return ok(); }
};

/// How many bytes validate_elf_header needs: the size of an ELF64 header.
inline constexpr std::size_t elf_header_size = sizeof(Elf64_Ehdr);

/// The e_machine of the code in this process (EM_NONE where this file does not know the target,
/// which makes every check refuse).
#if defined(__x86_64__)
inline constexpr std::uint16_t host_elf_machine = EM_X86_64;
#elif defined(__aarch64__)
inline constexpr std::uint16_t host_elf_machine = EM_AARCH64;
#elif defined(__powerpc64__)
inline constexpr std::uint16_t host_elf_machine = EM_PPC64;
#elif defined(__riscv) && __riscv_xlen == 64
inline constexpr std::uint16_t host_elf_machine = EM_RISCV;
#elif defined(__s390x__)
inline constexpr std::uint16_t host_elf_machine = EM_S390;
#elif defined(__loongarch64)
inline constexpr std::uint16_t host_elf_machine = 258;  // EM_LOONGARCH
#else
inline constexpr std::uint16_t host_elf_machine = EM_NONE;
#endif

namespace detail::elf {

// Tags and types that older <elf.h> lack.
inline constexpr std::int64_t dt_relrsz = 35, dt_relr = 36, dt_relrent = 37;
inline constexpr std::int64_t dt_x86_64_plt = 0x70000000, dt_x86_64_pltsz = 0x70000001;
inline constexpr std::uint32_t pt_gnu_property = 0x6474e553;

/// Where an ELF64 object of this process's byte order and class can be checked at all.
inline constexpr bool host_is_elf64 = sizeof(void*) == 8;
inline constexpr unsigned char host_data =
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;

/// The PT_LOADs of an accepted image span at most this much address space, and p_align and a
/// PT_TLS block are at most this large: far beyond any real module, small enough that no
/// arithmetic on them can overflow.
inline constexpr std::uint64_t max_load_span = std::uint64_t{16} << 30;
inline constexpr std::uint64_t max_alignment = std::uint64_t{1} << 30;
inline constexpr std::uint64_t max_address = std::uint64_t{1} << 62;

inline bool fits(std::uint64_t offset, std::uint64_t size, std::uint64_t total) noexcept {
  return offset <= total && size <= total - offset;
}
inline bool power_of_two(std::uint64_t v) noexcept { return v != 0 && (v & (v - 1)) == 0; }
inline std::uint64_t align_up(std::uint64_t v, std::uint64_t a) noexcept {
  return (v + a - 1) & ~(a - 1);  // callers keep v far below 2^64
}

/// The page size ld.so maps with; 4096 where sysconf cannot say.
inline std::uint64_t page_size() noexcept {
  static const std::uint64_t page = [] {
    const long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 && power_of_two(static_cast<std::uint64_t>(p)) ? static_cast<std::uint64_t>(p)
                                                                : std::uint64_t{4096};
  }();
  return page;
}

inline std::string range(std::uint64_t start, std::uint64_t size) {
  return hex(start) + "+" + hex(size);
}

/// Untrusted text for a message: printable ASCII kept, everything else as \xNN, at most 64
/// characters (then "...").
inline std::string printable(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 64)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && u != '\\') {
      out += c;
    } else {
      static constexpr char digits[] = "0123456789abcdef";
      out += "\\x";
      out += digits[u >> 4];
      out += digits[u & 15];
    }
  }
  if (s.size() > 64) out += "...";
  return out;
}

struct MachineName {
  std::uint16_t machine;
  const char* name;
  const char* constant;
};
inline constexpr MachineName machine_names[] = {
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

inline const MachineName* find_machine(std::uint16_t machine) noexcept {
  for (const auto& m : machine_names)
    if (m.machine == machine) return &m;
  return nullptr;
}

struct SegmentName {
  std::uint32_t value;
  const char* name;
};
// clang-format off
inline constexpr SegmentName segment_names[] = {
    {PT_NULL, "PT_NULL"}, {PT_LOAD, "PT_LOAD"}, {PT_DYNAMIC, "PT_DYNAMIC"},
    {PT_INTERP, "PT_INTERP"}, {PT_NOTE, "PT_NOTE"}, {PT_SHLIB, "PT_SHLIB"}, {PT_PHDR, "PT_PHDR"},
    {PT_TLS, "PT_TLS"}, {PT_GNU_EH_FRAME, "PT_GNU_EH_FRAME"}, {PT_GNU_STACK, "PT_GNU_STACK"},
    {PT_GNU_RELRO, "PT_GNU_RELRO"}, {pt_gnu_property, "PT_GNU_PROPERTY"},
};
// clang-format on

inline std::string segment_type_name(std::uint32_t type) {
  for (const auto& n : segment_names)
    if (n.value == type) return n.name;
  return "type " + hex(type);
}

struct TagName {
  std::int64_t value;
  const char* name;
};
// clang-format off
inline constexpr TagName tag_names[] = {
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

inline std::string tag_name(std::int64_t tag) {
  for (const auto& n : tag_names)
    if (n.value == tag) return n.name;
  return "tag " + hex(static_cast<std::uint64_t>(tag));
}

/// Tags whose value is an offset into the string table.
inline bool is_string_tag(std::int64_t tag) noexcept {
  return tag == DT_NEEDED || tag == DT_SONAME || tag == DT_RPATH || tag == DT_RUNPATH ||
         tag == DT_AUXILIARY || tag == DT_FILTER || tag == DT_CONFIG || tag == DT_DEPAUDIT ||
         tag == DT_AUDIT;
}

/// Tags that may appear more than once.
inline bool is_repeatable_tag(std::int64_t tag) noexcept {
  return tag == DT_NEEDED || tag == DT_AUXILIARY || tag == DT_FILTER;
}

/// What ld.so does with one relocation type.
struct RelocKind {
  std::uint32_t type;
  const char* name;
  std::uint32_t width;  ///< bytes written at r_offset (0: none)
  unsigned flags;       ///< reloc_* bits
  const char* refused;  ///< why a module cannot have it, or nullptr
};
enum : unsigned {
  reloc_relative = 1,       ///< base + addend, no symbol
  reloc_irelative = 2,      ///< calls base + addend (an IFUNC resolver)
  reloc_tls = 4,            ///< needs the TLS block of the symbol's module
  reloc_got_slot = 8,       ///< fills an aligned GOT slot
  reloc_needs_symbol = 16,  ///< against symbol 0 it would yield the module's base address
};
inline constexpr const char* copy_refused = "a copy relocation, which only executables may use";
inline constexpr RelocKind x86_64_relocs[] = {
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
inline constexpr RelocKind aarch64_relocs[] = {
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

/// Describes relocation `type` for `machine`. A type missing from a machine's table is refused
/// (ld.so would fail on it); machines without a table get a generic answer (8 bytes written,
/// nothing else known).
inline RelocKind reloc_kind(std::uint16_t machine, std::uint32_t type) {
  const std::span<const RelocKind> table = machine == EM_X86_64    ? std::span(x86_64_relocs)
                                           : machine == EM_AARCH64 ? std::span(aarch64_relocs)
                                                                   : std::span<const RelocKind>();
  for (const RelocKind& k : table)
    if (k.type == type) return k;
  if (table.empty()) return {type, "", 8, 0, nullptr};
  return {type, "", 8, 0, "a type ld.so does not apply on this machine"};
}

inline bool knows_reloc_types(std::uint16_t machine) noexcept {
  return machine == EM_X86_64 || machine == EM_AARCH64;
}

/// The ELF header checks shared by both entry points; "" when `head` passes. `file_size`, when
/// known, bounds the program and section header tables.
inline std::string check_header(std::span<const std::byte> head,
                                std::optional<std::uint64_t> file_size) {
  static constexpr unsigned char magic[4] = {0x7f, 'E', 'L', 'F'};
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(head[i]); };
  if (head.empty()) return "empty: no ELF header";
  const std::size_t have = std::min<std::size_t>(head.size(), 4);
  if (std::memcmp(head.data(), magic, have) != 0 || head.size() < 4) {
    if (head.size() < 4 && std::memcmp(head.data(), magic, have) == 0)
      return "only " + std::to_string(head.size()) +
             " bytes, too short to hold the ELF magic (7f 45 4c 46)";
    std::string first;
    static constexpr char digits[] = "0123456789abcdef";
    for (std::size_t i = 0; i < have; ++i) {
      if (i != 0) first += ' ';
      first += digits[byte(i) >> 4];
      first += digits[byte(i) & 15];
    }
    return "does not start with the ELF magic (7f 45 4c 46) but with " + first;
  }
  if (head.size() < sizeof(Elf64_Ehdr)) {
    // Enough to name the class when it is the wrong one.
    if (head.size() > EI_CLASS && byte(EI_CLASS) == ELFCLASS32)
      return "a 32-bit ELF file (ELFCLASS32); this process is 64-bit";
    return "only " + std::to_string(head.size()) + " bytes, shorter than the " +
           std::to_string(sizeof(Elf64_Ehdr)) + "-byte ELF header";
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, head.data(), sizeof eh);
  const unsigned char cls = eh.e_ident[EI_CLASS];
  if (cls == ELFCLASS32) return "a 32-bit ELF file (ELFCLASS32); this process is 64-bit";
  if (cls != ELFCLASS64)
    return "ELF class " + std::to_string(cls) + " (EI_CLASS) is neither 32- nor 64-bit";
  if (!host_is_elf64) return "a 64-bit ELF file (ELFCLASS64); this process is 32-bit";
  const unsigned char data = eh.e_ident[EI_DATA];
  if (data != host_data) {
    const char* host_order = host_data == ELFDATA2LSB ? "little-endian" : "big-endian";
    if (data == ELFDATA2LSB || data == ELFDATA2MSB)
      return std::string(data == ELFDATA2MSB ? "a big-endian ELF file (ELFDATA2MSB)"
                                             : "a little-endian ELF file (ELFDATA2LSB)") +
             "; this process is " + host_order;
    return "ELF byte order " + std::to_string(data) +
           " (EI_DATA) is neither little- nor big-endian";
  }
  if (eh.e_ident[EI_VERSION] != EV_CURRENT)
    return "ELF identification version " + std::to_string(eh.e_ident[EI_VERSION]) +
           " (EI_VERSION), not 1 (EV_CURRENT)";
  const unsigned char osabi = eh.e_ident[EI_OSABI];
  const unsigned char abiversion = eh.e_ident[EI_ABIVERSION];
  if (osabi != ELFOSABI_SYSV && osabi != ELFOSABI_GNU)
    return "ELF OS ABI " + std::to_string(osabi) + " (EI_OSABI), not System V (0) or GNU (3)";
  if ((osabi == ELFOSABI_SYSV && abiversion != 0) || (osabi == ELFOSABI_GNU && abiversion > 3))
    return "ELF ABI version " + std::to_string(abiversion) + " (EI_ABIVERSION) for OS ABI " +
           std::to_string(osabi) + ", which ld.so does not accept";
  for (std::size_t i = EI_PAD; i < EI_NIDENT; ++i)
    if (eh.e_ident[i] != 0)
      return "non-zero padding in e_ident (byte " + std::to_string(i) + " is " +
             hex(eh.e_ident[i]) + ")";
  if (eh.e_machine != host_elf_machine) {
    const MachineName* file = find_machine(eh.e_machine);
    const MachineName* host = find_machine(host_elf_machine);
    const std::string file_name = file != nullptr
                                      ? std::string(file->name) + " (" + file->constant + ")"
                                      : "machine " + std::to_string(eh.e_machine) + " (e_machine)";
    return "ELF for " + file_name + ", this process is " +
           (host != nullptr && host_elf_machine != EM_NONE ? host->name
                                                           : "a machine this check does not know");
  }
  if (eh.e_type != ET_DYN) {
    switch (eh.e_type) {
      case ET_EXEC:
        return "an ELF executable (ET_EXEC), not a shared object (ET_DYN)";
      case ET_REL:
        return "a relocatable ELF object (ET_REL), not a shared object (ET_DYN)";
      case ET_CORE:
        return "an ELF core file (ET_CORE), not a shared object (ET_DYN)";
      default:
        return "ELF file type " + std::to_string(eh.e_type) +
               " (e_type), not a shared object (ET_DYN)";
    }
  }
  if (eh.e_version != EV_CURRENT)
    return "ELF version " + std::to_string(eh.e_version) + " (e_version), not 1 (EV_CURRENT)";
  if (eh.e_ehsize != sizeof(Elf64_Ehdr))
    return "e_ehsize is " + std::to_string(eh.e_ehsize) + ", not the " +
           std::to_string(sizeof(Elf64_Ehdr)) + " bytes of an ELF64 header";
  if (eh.e_phentsize != sizeof(Elf64_Phdr))
    return "e_phentsize is " + std::to_string(eh.e_phentsize) + ", not " +
           std::to_string(sizeof(Elf64_Phdr)) + " (the size of Elf64_Phdr)";
  if (eh.e_phnum == 0) return "no program headers (e_phnum is 0)";
  if (eh.e_phnum == PN_XNUM)
    return "e_phnum is PN_XNUM (0xffff): extended program header numbering, which ld.so does "
           "not support";
  if (eh.e_phoff % 8 != 0) return "e_phoff " + hex(eh.e_phoff) + " is not 8-byte aligned";
  const std::uint64_t ph_bytes = std::uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr);
  if (file_size && !fits(eh.e_phoff, ph_bytes, *file_size))
    return "the program header table " + range(eh.e_phoff, ph_bytes) +
           " (e_phoff, e_phnum) runs past the end of the " + hex(*file_size) + "-byte image";
  if (eh.e_shoff == 0) {
    if (eh.e_shnum != 0)
      return "e_shnum is " + std::to_string(eh.e_shnum) +
             " but there is no section header table "
             "(e_shoff is 0)";
  } else {
    if (eh.e_shentsize != sizeof(Elf64_Shdr))
      return "e_shentsize is " + std::to_string(eh.e_shentsize) + ", not " +
             std::to_string(sizeof(Elf64_Shdr)) + " (the size of Elf64_Shdr)";
    if (eh.e_shnum == 0)
      return "e_shnum is 0 with a section header table at " + hex(eh.e_shoff) +
             ": extended section numbering, which this check does not support";
    if (eh.e_shoff % 8 != 0) return "e_shoff " + hex(eh.e_shoff) + " is not 8-byte aligned";
    if (eh.e_shstrndx >= eh.e_shnum)
      return "e_shstrndx " + std::to_string(eh.e_shstrndx) + " is not below e_shnum " +
             std::to_string(eh.e_shnum);
    const std::uint64_t sh_bytes = std::uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr);
    if (file_size && !fits(eh.e_shoff, sh_bytes, *file_size))
      return "the section header table " + range(eh.e_shoff, sh_bytes) +
             " (e_shoff, e_shnum) runs past the end of the " + hex(*file_size) + "-byte image";
  }
  return {};
}

/// The whole-image check: one object per image, run once. See validate_elf_shared_object.
class ImageCheck {
 public:
  explicit ImageCheck(std::span<const std::byte> image) : image_(image), size_(image.size()) {}

  std::string run() {
    if (std::string d = check_header(image_, size_); !d.empty()) return d;
    eh_ = at<Elf64_Ehdr>(0);
    if (program_headers() && segments() && dynamic_entries() && dynamic_tags() && strings() &&
        sections() && symbol_count() && versions() && symbols() && relocations() &&
        code_pointers() && other_addresses())
      return {};
    return defect_;
  }

 private:
  struct Load {
    std::size_t index;  // program header number
    std::uint64_t vaddr, memsz, offset, filesz;
    std::uint32_t flags;
  };
  struct Tag {
    std::uint64_t value;
    std::size_t entry;  // index in the dynamic section
  };
  struct Section {
    Elf64_Shdr h;
    std::string name;  // printable
  };
  /// How an init/fini array slot gets its final value.
  struct SlotWriter {
    enum Kind { none, relative, symbol, relr, other } kind = none;
    std::uint64_t addend = 0;
    std::uint32_t sym = 0;
  };

  // ---- primitives ------------------------------------------------------------------------------

  bool fail(std::string defect) {
    defect_ = std::move(defect);
    return false;
  }

  /// Messages are built only on failure: `what` is a string or a callable that makes one.
  template <class What>
  static std::string text(const What& what) {
    if constexpr (std::is_invocable_v<const What&>)
      return what();
    else
      return std::string(what);
  }

  /// The T at file offset `offset`; zeros if it does not fit (callers check first, this only
  /// keeps a logic error from becoming a read out of bounds).
  template <class T>
  T at(std::uint64_t offset) const {
    T value{};
    if (fits(offset, sizeof(T), size_)) std::memcpy(&value, image_.data() + offset, sizeof(T));
    return value;
  }

  std::string ph_name(std::size_t i) const {
    return "program header " + std::to_string(i) + " (" + segment_type_name(phdrs_[i].p_type) + ")";
  }
  std::string load_name(const Load& l) const {
    return "program header " + std::to_string(l.index) + " (PT_LOAD " + range(l.vaddr, l.memsz) +
           ")";
  }

  /// The PT_LOAD whose memory holds `addr`, or nullptr. PT_LOADs are sorted and disjoint.
  const Load* load_at(std::uint64_t addr) const {
    auto it = std::upper_bound(loads_.begin(), loads_.end(), addr,
                               [](std::uint64_t a, const Load& l) { return a < l.vaddr; });
    if (it == loads_.begin()) return nullptr;
    --it;
    return addr - it->vaddr < it->memsz ? &*it : nullptr;
  }

  /// Why [addr, addr + size) is not where ld.so can use it, or "" when it is: inside one
  /// PT_LOAD's memory, from the file when `need_file` (ld.so reads it before anything else could
  /// have written it), in a segment with the p_flags bits `need_flags`.
  std::string placement(std::uint64_t addr, std::uint64_t size, bool need_file,
                        std::uint32_t need_flags) const {
    const Load* l = load_at(addr);
    if (l == nullptr) return "is outside every PT_LOAD";
    if (!fits(addr - l->vaddr, size, l->memsz)) return "runs past the end of " + load_name(*l);
    if (need_file && !fits(addr - l->vaddr, size, l->filesz))
      return "reaches into the zero-filled part of " + load_name(*l) + ", whose first " +
             hex(l->filesz) + " bytes only come from the file";
    if ((l->flags & need_flags) != need_flags)
      return std::string("lies in ") + load_name(*l) + ", which is not " +
             ((need_flags & PF_X) != 0 ? "executable" : "writable");
    return {};
  }

  /// Checks the `size`-byte range `what` at `addr` (see placement); `file_offset` receives where
  /// its bytes are in the image when `need_file`.
  template <class What>
  bool mapped(const What& what, std::uint64_t addr, std::uint64_t size, bool need_file,
              std::uint32_t need_flags = 0, std::uint64_t* file_offset = nullptr) {
    if (std::string p = placement(addr, size, need_file, need_flags); !p.empty())
      return fail(text(what) + " " + range(addr, size) + " " + p);
    if (file_offset != nullptr) {
      const Load* l = load_at(addr);
      *file_offset = l->offset + (addr - l->vaddr);
    }
    return true;
  }

  template <class What>
  bool aligned(const What& what, std::uint64_t addr, std::uint64_t alignment) {
    if (addr % alignment == 0) return true;
    return fail(text(what) + " " + hex(addr) + " is not " + std::to_string(alignment) +
                "-byte aligned");
  }

  /// A table in the file: `count` entries of `entry` bytes at `addr`, aligned and file-backed.
  template <class What>
  bool table(const What& what, std::uint64_t addr, std::uint64_t count, std::uint64_t entry,
             std::uint64_t alignment, std::uint64_t& file_offset) {
    if (!aligned(what, addr, alignment)) return false;
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(count, entry, &bytes))
      return fail(text(what) + ": " + std::to_string(count) + " entries of " +
                  std::to_string(entry) + " bytes overflow");
    return mapped(what, addr, bytes, true, 0, &file_offset);
  }

  const Tag* tag(std::int64_t t) const {
    const auto it = tags_.find(t);
    return it == tags_.end() ? nullptr : &it->second;
  }
  std::string tag_where(std::int64_t t) const {
    return tag_name(t) + " (dynamic entry " + std::to_string(tag(t)->entry) + ")";
  }

  /// The NUL-terminated string at `offset` of the dynamic string table, for `what`.
  template <class What>
  bool string_at(const What& what, std::uint64_t offset, std::string_view& out) {
    if (offset >= strsz_)
      return fail(text(what) + ": string offset " + hex(offset) + " is past the end of the " +
                  hex(strsz_) + "-byte string table (DT_STRSZ)");
    const char* begin = reinterpret_cast<const char*>(image_.data() + strtab_offset_ + offset);
    const std::size_t max = static_cast<std::size_t>(strsz_ - offset);
    const void* nul = std::memchr(begin, 0, max);
    if (nul == nullptr)
      return fail(text(what) + ": the string at offset " + hex(offset) +
                  " is not NUL-terminated inside the string table");
    out = std::string_view(begin, static_cast<std::size_t>(static_cast<const char*>(nul) - begin));
    return true;
  }

  const Section* section_at(std::uint64_t addr, std::uint32_t type) const {
    for (const auto& s : sections_)
      if (s.h.sh_type == type && (s.h.sh_flags & SHF_ALLOC) != 0 && s.h.sh_addr == addr) return &s;
    return nullptr;
  }
  const Section* first_section(std::uint32_t type) const {
    for (const auto& s : sections_)
      if (s.h.sh_type == type && (s.h.sh_flags & SHF_ALLOC) != 0) return &s;
    return nullptr;
  }
  static std::string section_name(const Section& s, std::size_t i) {
    return "section " + std::to_string(i) + (s.name.empty() ? "" : " (" + s.name + ")");
  }
  std::string section_name(const Section& s) const {
    return section_name(s, static_cast<std::size_t>(&s - sections_.data()));
  }

  // ---- program headers -------------------------------------------------------------------------

  bool program_headers() {
    const std::uint64_t page = page_size();
    phdrs_.resize(eh_.e_phnum);
    for (std::size_t i = 0; i < phdrs_.size(); ++i)
      phdrs_[i] = at<Elf64_Phdr>(eh_.e_phoff + i * sizeof(Elf64_Phdr));
    for (std::size_t i = 0; i < phdrs_.size(); ++i) {
      const Elf64_Phdr& ph = phdrs_[i];
      if (ph.p_type == PT_NULL) continue;
      if (ph.p_filesz != 0 && !fits(ph.p_offset, ph.p_filesz, size_))
        return fail(ph_name(i) + ": file range " + range(ph.p_offset, ph.p_filesz) +
                    " runs past the end of the " + hex(size_) + "-byte image");
      if (ph.p_vaddr > max_address || ph.p_memsz > max_address - ph.p_vaddr)
        return fail(ph_name(i) + ": memory range " + range(ph.p_vaddr, ph.p_memsz) +
                    " runs past the end of the address space");
      switch (ph.p_type) {
        case PT_LOAD: {
          if (ph.p_memsz == 0) return fail(ph_name(i) + ": an empty segment (p_memsz is 0)");
          if (ph.p_filesz > ph.p_memsz)
            return fail(ph_name(i) + ": p_filesz " + hex(ph.p_filesz) + " is larger than p_memsz " +
                        hex(ph.p_memsz));
          if ((ph.p_flags & PF_R) == 0)
            return fail(ph_name(i) + ": not readable (p_flags " + hex(ph.p_flags) +
                        " lacks PF_R), but ld.so and the module read it");
          if (ph.p_align != 0) {
            if (!power_of_two(ph.p_align))
              return fail(ph_name(i) + ": p_align " + hex(ph.p_align) + " is not a power of two");
            if (ph.p_align % page != 0)
              return fail(ph_name(i) + ": p_align " + hex(ph.p_align) +
                          " is not a multiple of the " + hex(page) + "-byte page size");
            if (ph.p_align > max_alignment)
              return fail(ph_name(i) + ": p_align " + hex(ph.p_align) + " is more than 1 GiB");
            if (((ph.p_vaddr - ph.p_offset) & (ph.p_align - 1)) != 0)
              return fail(ph_name(i) + ": p_vaddr " + hex(ph.p_vaddr) + " and p_offset " +
                          hex(ph.p_offset) + " are not congruent modulo p_align " +
                          hex(ph.p_align));
          }
          if (((ph.p_vaddr - ph.p_offset) & (page - 1)) != 0)
            return fail(ph_name(i) + ": p_vaddr " + hex(ph.p_vaddr) + " and p_offset " +
                        hex(ph.p_offset) + " are not congruent modulo the " + hex(page) +
                        "-byte page size");
          if (!loads_.empty()) {
            const Load& prev = loads_.back();
            if (ph.p_vaddr < prev.vaddr)
              return fail(ph_name(i) + " at " + hex(ph.p_vaddr) + " comes after " +
                          load_name(prev) + ": PT_LOADs must be in ascending p_vaddr order");
            const std::uint64_t prev_end = align_up(prev.vaddr + prev.memsz, page);
            if ((ph.p_vaddr & ~(page - 1)) < prev_end)
              return fail(ph_name(i) + " at " + range(ph.p_vaddr, ph.p_memsz) +
                          " shares or overlaps the pages of " + load_name(prev));
          }
          loads_.push_back({i, ph.p_vaddr, ph.p_memsz, ph.p_offset, ph.p_filesz, ph.p_flags});
          break;
        }
        case PT_DYNAMIC:
          if (dynamic_ != nullptr)
            return fail(ph_name(i) + ": a second PT_DYNAMIC (the first is program header " +
                        std::to_string(dynamic_ - phdrs_.data()) + ")");
          dynamic_ = &ph;
          break;
        case PT_TLS:
          if (tls_ != nullptr) return fail(ph_name(i) + ": a second PT_TLS");
          tls_ = &ph;
          break;
        case PT_GNU_RELRO:
          if (relro_ != nullptr) return fail(ph_name(i) + ": a second PT_GNU_RELRO");
          relro_ = &ph;
          break;
        case PT_PHDR:
          if (phdr_ != nullptr) return fail(ph_name(i) + ": a second PT_PHDR");
          phdr_ = &ph;
          break;
        case PT_GNU_STACK:
          if ((ph.p_flags & PF_X) != 0)
            return fail(ph_name(i) + ": asks for an executable stack (p_flags " + hex(ph.p_flags) +
                        " has PF_X)");
          break;
        default:
          break;
      }
    }
    if (loads_.empty()) return fail("no PT_LOAD program header: nothing to map");
    const std::uint64_t first = loads_.front().vaddr & ~(page - 1);
    const std::uint64_t span = loads_.back().vaddr + loads_.back().memsz - first;
    if (span > max_load_span)
      return fail("the PT_LOADs span " + describe_bytes(span) +
                  " of address space, more than the 16 GiB a module may use");
    if (dynamic_ == nullptr) return fail("no PT_DYNAMIC program header: not a dynamic object");
    return true;
  }

  /// Notes in the file at [offset, offset + size), aligned to `alignment`.
  bool notes(const std::string& who, std::uint64_t offset, std::uint64_t size,
             std::uint64_t alignment) {
    std::uint64_t a = alignment <= 1 ? 4 : alignment;
    if (a != 4 && a != 8) return fail(who + ": p_align " + hex(alignment) + " is neither 4 nor 8");
    std::uint64_t pos = 0;
    for (std::size_t k = 0; pos < size; ++k) {
      if (size - pos < sizeof(Elf64_Nhdr))
        return fail(who + ": " + std::to_string(size - pos) + " stray bytes after note " +
                    std::to_string(k));
      const auto n = at<Elf64_Nhdr>(offset + pos);
      const std::uint64_t desc = align_up(sizeof(Elf64_Nhdr) + std::uint64_t{n.n_namesz}, a);
      const std::uint64_t next = align_up(desc + n.n_descsz, a);
      if (next > size - pos)
        return fail(who + ": note " + std::to_string(k) + " (n_namesz " + hex(n.n_namesz) +
                    ", n_descsz " + hex(n.n_descsz) + ") runs past the end of the segment");
      pos += next;
    }
    return true;
  }

  /// The segment `i` is inside the file-backed part of a PT_LOAD, which maps its p_offset.
  bool in_load_as_in_file(std::size_t i, std::uint64_t size, std::uint32_t need_flags = 0) {
    const Elf64_Phdr& ph = phdrs_[i];
    std::uint64_t off = 0;
    if (!mapped(ph_name(i) + ": memory", ph.p_vaddr, size, true, need_flags, &off)) return false;
    if (size != 0 && off != ph.p_offset)
      return fail(ph_name(i) + ": p_offset " + hex(ph.p_offset) +
                  " disagrees with the PT_LOAD "
                  "that maps p_vaddr " +
                  hex(ph.p_vaddr) + " from file offset " + hex(off));
    return true;
  }

  bool segments() {
    for (std::size_t i = 0; i < phdrs_.size(); ++i) {
      const Elf64_Phdr& ph = phdrs_[i];
      switch (ph.p_type) {
        case PT_DYNAMIC:
          if (ph.p_filesz == 0) return fail(ph_name(i) + ": empty (p_filesz is 0)");
          if (ph.p_filesz % sizeof(Elf64_Dyn) != 0)
            return fail(ph_name(i) + ": p_filesz " + hex(ph.p_filesz) +
                        " is not a whole number of 16-byte entries");
          if (ph.p_memsz < ph.p_filesz)
            return fail(ph_name(i) + ": p_memsz " + hex(ph.p_memsz) + " is smaller than p_filesz " +
                        hex(ph.p_filesz));
          if (!aligned(ph_name(i) + ": p_vaddr", ph.p_vaddr, 8)) return false;
          if (!in_load_as_in_file(i, ph.p_filesz)) return false;
          break;
        case PT_TLS:
          if (ph.p_filesz > ph.p_memsz)
            return fail(ph_name(i) + ": p_filesz " + hex(ph.p_filesz) + " is larger than p_memsz " +
                        hex(ph.p_memsz));
          if (ph.p_align > 1 && !power_of_two(ph.p_align))
            return fail(ph_name(i) + ": p_align " + hex(ph.p_align) + " is not a power of two");
          if (ph.p_align > max_alignment || ph.p_memsz > max_alignment)
            return fail(ph_name(i) + ": a TLS block of " + hex(ph.p_memsz) + " bytes aligned to " +
                        hex(ph.p_align) + " is beyond 1 GiB");
          if (ph.p_filesz != 0 && !in_load_as_in_file(i, ph.p_filesz)) return false;
          break;
        case PT_GNU_RELRO:
          if (ph.p_memsz != 0 && !mapped(ph_name(i), ph.p_vaddr, ph.p_memsz, false, PF_W))
            return false;
          break;
        case PT_PHDR: {
          const std::uint64_t bytes = std::uint64_t{eh_.e_phnum} * sizeof(Elf64_Phdr);
          if (ph.p_offset != eh_.e_phoff || ph.p_filesz != bytes)
            return fail(ph_name(i) + ": file range " + range(ph.p_offset, ph.p_filesz) +
                        " is not the program header table " + range(eh_.e_phoff, bytes));
          if (!in_load_as_in_file(i, bytes)) return false;
          break;
        }
        case PT_NOTE:
          if (!notes(ph_name(i), ph.p_offset, ph.p_filesz, ph.p_align)) return false;
          break;
        case pt_gnu_property:
          if (ph.p_memsz != ph.p_filesz)
            return fail(ph_name(i) + ": p_memsz " + hex(ph.p_memsz) + " differs from p_filesz " +
                        hex(ph.p_filesz));
          if (!in_load_as_in_file(i, ph.p_filesz)) return false;
          if (!notes(ph_name(i), ph.p_offset, ph.p_filesz, 8)) return false;
          break;
        case PT_GNU_EH_FRAME:
          if (!in_load_as_in_file(i, ph.p_filesz)) return false;
          break;
        default:
          break;
      }
    }
    return true;
  }

  // ---- the dynamic section ---------------------------------------------------------------------

  bool dynamic_entries() {
    const std::size_t index = static_cast<std::size_t>(dynamic_ - phdrs_.data());
    const std::uint64_t count = dynamic_->p_filesz / sizeof(Elf64_Dyn);
    for (std::uint64_t k = 0; k < count; ++k) {
      const auto d = at<Elf64_Dyn>(dynamic_->p_offset + k * sizeof(Elf64_Dyn));
      if (d.d_tag == DT_NULL) return true;
      dyn_.push_back(d);
    }
    return fail("no DT_NULL among the " + std::to_string(count) +
                " entries of the dynamic "
                "section (" +
                ph_name(index) + "): ld.so would read past its end");
  }

  bool dynamic_tags() {
    for (std::size_t k = 0; k < dyn_.size(); ++k) {
      const std::int64_t t = dyn_[k].d_tag;
      const std::uint64_t v = dyn_[k].d_un.d_val;
      if (is_repeatable_tag(t)) {
        repeated_.push_back({t, {v, k}});
        continue;
      }
      const auto [it, fresh] = tags_.emplace(t, Tag{v, k});
      if (!fresh)
        return fail("dynamic entry " + std::to_string(k) + ": a second " + tag_name(t) +
                    " (the first is entry " + std::to_string(it->second.entry) + ")");
    }
    const auto require = [&](std::int64_t needs, std::int64_t what) {
      if (tag(needs) != nullptr && tag(what) == nullptr)
        return fail(tag_where(needs) + " without " + tag_name(what) +
                    ", which ld.so reads without checking");
      return true;
    };
    const auto entry_size = [&](std::int64_t t, std::uint64_t want) {
      if (tag(t) != nullptr && tag(t)->value != want)
        return fail(tag_where(t) + " is " + std::to_string(tag(t)->value) + ", not " +
                    std::to_string(want));
      return true;
    };
    const auto whole = [&](std::int64_t t, std::uint64_t entry) {
      if (tag(t) != nullptr && tag(t)->value % entry != 0)
        return fail(tag_where(t) + " " + hex(tag(t)->value) + " is not a whole number of " +
                    std::to_string(entry) + "-byte entries");
      return true;
    };
    if (tag(DT_TEXTREL) != nullptr)
      return fail(tag_where(DT_TEXTREL) +
                  ": text relocations, which would make the module's "
                  "code writable while ld.so relocates it");
    if (tag(DT_FLAGS) != nullptr && (tag(DT_FLAGS)->value & DF_TEXTREL) != 0)
      return fail(tag_where(DT_FLAGS) +
                  " has DF_TEXTREL: text relocations, which would make the "
                  "module's code writable while ld.so relocates it");
    for (const std::int64_t t :
         std::initializer_list<std::int64_t>{DT_REL, DT_RELSZ, DT_RELENT, DT_RELCOUNT})
      if (tag(t) != nullptr)
        return fail(tag_where(t) +
                    ": REL relocations, which ld.so does not apply on this machine "
                    "(it uses RELA)");
    if (tag(DT_PLTREL) != nullptr && tag(DT_PLTREL)->value != DT_RELA)
      return fail(tag_where(DT_PLTREL) + " is " + std::to_string(tag(DT_PLTREL)->value) +
                  ", not DT_RELA (7)");
    if (!require(DT_RELA, DT_RELASZ) || !require(DT_RELA, DT_RELAENT) ||
        !entry_size(DT_RELAENT, sizeof(Elf64_Rela)) || !whole(DT_RELASZ, sizeof(Elf64_Rela)) ||
        !require(DT_JMPREL, DT_PLTRELSZ) || !require(DT_JMPREL, DT_PLTREL) ||
        !require(DT_JMPREL, DT_PLTGOT) || !require(DT_PLTREL, DT_JMPREL) ||
        !require(DT_PLTRELSZ, DT_JMPREL) || !whole(DT_PLTRELSZ, sizeof(Elf64_Rela)) ||
        !require(dt_relr, dt_relrsz) || !require(dt_relr, dt_relrent) ||
        !entry_size(dt_relrent, 8) || !whole(dt_relrsz, 8) ||
        !entry_size(DT_SYMENT, sizeof(Elf64_Sym)) || !require(DT_INIT_ARRAY, DT_INIT_ARRAYSZ) ||
        !require(DT_FINI_ARRAY, DT_FINI_ARRAYSZ) ||
        !require(DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ) || !whole(DT_INIT_ARRAYSZ, 8) ||
        !whole(DT_FINI_ARRAYSZ, 8) || !whole(DT_PREINIT_ARRAYSZ, 8) ||
        !require(DT_VERNEED, DT_VERSYM) || !require(DT_VERDEF, DT_VERSYM) ||
        !require(DT_RELACOUNT, DT_RELA) || !require(DT_TLSDESC_PLT, DT_TLSDESC_GOT) ||
        !require(DT_TLSDESC_GOT, DT_TLSDESC_PLT))
      return false;
    if (tag(DT_VERSYM) != nullptr && tag(DT_VERNEED) == nullptr && tag(DT_VERDEF) == nullptr)
      return fail(tag_where(DT_VERSYM) +
                  " without DT_VERNEED or DT_VERDEF: ld.so would index "
                  "a version table it never made");
    if (tag(DT_STRTAB) == nullptr) return fail("no DT_STRTAB: the dynamic object has no strings");
    if (tag(DT_STRSZ) == nullptr) return fail("no DT_STRSZ: the string table has no size");
    if (tag(DT_SYMTAB) == nullptr) return fail("no DT_SYMTAB: the dynamic object has no symbols");
    return true;
  }

  bool strings() {
    strsz_ = tag(DT_STRSZ)->value;
    if (!table(tag_where(DT_STRTAB) + ", " + hex(strsz_) + " bytes (DT_STRSZ),",
               tag(DT_STRTAB)->value, strsz_, 1, 1, strtab_offset_))
      return false;
    std::string_view s;
    for (const auto& [t, where] : repeated_) {
      if (!string_at(tag_name(t) + " (dynamic entry " + std::to_string(where.entry) + ")",
                     where.value, s))
        return false;
      // A file name cannot be empty; for a filter, ld.so would assert when the module closes.
      if (s.empty())
        return fail(tag_name(t) + " (dynamic entry " + std::to_string(where.entry) +
                    ") names no file (an empty string)");
      if (t == DT_NEEDED) needed_.emplace_back(s);
    }
    for (const auto& [t, where] : tags_)
      if (is_string_tag(t) && !string_at(tag_where(t), where.value, s)) return false;
    return true;
  }

  // ---- section headers: a second witness -------------------------------------------------------

  /// ld.so never reads section headers, but a linker writes them from the same layout as the
  /// dynamic section. Where an image has them they must agree with it: that catches a pointer
  /// that moved yet still lands inside a segment (DT_INIT a few bytes into the code, DT_SYMTAB
  /// shifted onto other data), which no bounds check can see.
  bool sections() {
    if (eh_.e_shoff == 0) return true;  // no section headers (sstrip): bounds checks only
    sections_.resize(eh_.e_shnum);
    for (std::size_t i = 0; i < sections_.size(); ++i)
      sections_[i].h = at<Elf64_Shdr>(eh_.e_shoff + i * sizeof(Elf64_Shdr));
    // Names, when there is a section name table.
    if (eh_.e_shstrndx != SHN_UNDEF) {
      const Elf64_Shdr& names = sections_[eh_.e_shstrndx].h;
      if (names.sh_type != SHT_STRTAB || !fits(names.sh_offset, names.sh_size, size_))
        return fail("the section name table (section " + std::to_string(eh_.e_shstrndx) +
                    ", e_shstrndx) is not a string table inside the image");
      const char* base = reinterpret_cast<const char*>(image_.data() + names.sh_offset);
      for (auto& s : sections_) {
        if (s.h.sh_name >= names.sh_size) continue;
        const std::size_t max = static_cast<std::size_t>(names.sh_size - s.h.sh_name);
        s.name =
            printable(std::string_view(base + s.h.sh_name, ::strnlen(base + s.h.sh_name, max)));
      }
    }
    for (std::size_t i = 1; i < sections_.size(); ++i) {
      const Section& s = sections_[i];
      const Elf64_Shdr& h = s.h;
      if (h.sh_type == SHT_NULL) continue;
      if (h.sh_type != SHT_NOBITS && h.sh_size != 0 && !fits(h.sh_offset, h.sh_size, size_))
        return fail(section_name(s, i) + ": file range " + range(h.sh_offset, h.sh_size) +
                    " runs past the end of the " + hex(size_) + "-byte image");
      if ((h.sh_flags & SHF_ALLOC) == 0 || h.sh_size == 0) continue;
      if (h.sh_type == SHT_NOBITS && (h.sh_flags & SHF_TLS) != 0) continue;  // .tbss: no memory
      const bool file = h.sh_type != SHT_NOBITS;
      const std::uint32_t flags = ((h.sh_flags & SHF_EXECINSTR) != 0 ? PF_X : 0) |
                                  ((h.sh_flags & SHF_WRITE) != 0 ? PF_W : 0);
      std::uint64_t off = 0;
      if (!mapped(section_name(s, i) + " at", h.sh_addr, h.sh_size, file, flags, &off))
        return false;
      if (file && off != h.sh_offset)
        return fail(section_name(s, i) + ": sh_offset " + hex(h.sh_offset) +
                    " disagrees with "
                    "the PT_LOAD that maps its address " +
                    hex(h.sh_addr) + " from file offset " + hex(off));
      if ((h.sh_flags & SHF_EXECINSTR) != 0) {
        code_sections_.emplace_back(h.sh_addr, h.sh_size);
        function_starts_.push_back(h.sh_addr);
      }
    }
    // The dynamic section.
    const Section* dyn = first_section(SHT_DYNAMIC);
    if (dyn == nullptr || dyn->h.sh_addr != dynamic_->p_vaddr ||
        dyn->h.sh_offset != dynamic_->p_offset || dyn->h.sh_size != dynamic_->p_filesz)
      return fail("PT_DYNAMIC " + range(dynamic_->p_vaddr, dynamic_->p_filesz) +
                  " at file offset " + hex(dynamic_->p_offset) + " is not the SHT_DYNAMIC section" +
                  (dyn == nullptr ? std::string(" (there is none)")
                                  : " (" + section_name(*dyn) + ", " +
                                        range(dyn->h.sh_addr, dyn->h.sh_size) + ")"));
    // The symbol and string tables.
    const Section* dynsym = first_section(SHT_DYNSYM);
    if (dynsym == nullptr || dynsym->h.sh_addr != tag(DT_SYMTAB)->value)
      return fail(tag_where(DT_SYMTAB) + " " + hex(tag(DT_SYMTAB)->value) +
                  " is not the address of the SHT_DYNSYM section" +
                  (dynsym == nullptr
                       ? std::string(" (there is none)")
                       : " (" + section_name(*dynsym) + " at " + hex(dynsym->h.sh_addr) + ")"));
    if (dynsym->h.sh_entsize != sizeof(Elf64_Sym) || dynsym->h.sh_size % sizeof(Elf64_Sym) != 0)
      return fail(section_name(*dynsym) + ": " + hex(dynsym->h.sh_size) + " bytes of " +
                  std::to_string(dynsym->h.sh_entsize) + "-byte entries, not whole Elf64_Sym");
    section_symbols_ = dynsym->h.sh_size / sizeof(Elf64_Sym);
    if (dynsym->h.sh_link >= sections_.size() ||
        sections_[dynsym->h.sh_link].h.sh_type != SHT_STRTAB ||
        sections_[dynsym->h.sh_link].h.sh_addr != tag(DT_STRTAB)->value ||
        sections_[dynsym->h.sh_link].h.sh_size != strsz_)
      return fail(tag_where(DT_STRTAB) + " " + range(tag(DT_STRTAB)->value, strsz_) +
                  " (with DT_STRSZ) is not the string table " + section_name(*dynsym) +
                  " links to");
    // Tables that have a section of their own: present in both or in neither, at one address.
    struct Pair {
      std::int64_t tag;
      std::uint32_t type;
      std::int64_t size_tag;
    };
    static constexpr Pair pairs[] = {
        {DT_HASH, SHT_HASH, 0},
        {DT_GNU_HASH, SHT_GNU_HASH, 0},
        {DT_VERSYM, SHT_GNU_versym, 0},
        {DT_VERNEED, SHT_GNU_verneed, 0},
        {DT_VERDEF, SHT_GNU_verdef, 0},
        {DT_INIT_ARRAY, SHT_INIT_ARRAY, DT_INIT_ARRAYSZ},
        {DT_FINI_ARRAY, SHT_FINI_ARRAY, DT_FINI_ARRAYSZ},
        {DT_PREINIT_ARRAY, SHT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ},
    };
    for (const Pair& p : pairs) {
      const Tag* t = tag(p.tag);
      const Section* s = first_section(p.type);
      if (t == nullptr && s == nullptr) continue;
      if (t == nullptr)
        return fail(section_name(*s) + " at " + hex(s->h.sh_addr) + " has no " + tag_name(p.tag) +
                    " pointing to it");
      const Section* exact = section_at(t->value, p.type);
      if (exact == nullptr)
        return fail(tag_where(p.tag) + " " + hex(t->value) +
                    " is not the address of a section of its kind" +
                    (s == nullptr ? std::string(" (there is none)")
                                  : " (" + section_name(*s) + " is at " + hex(s->h.sh_addr) + ")"));
      if (p.size_tag != 0 && tag(p.size_tag)->value != exact->h.sh_size)
        return fail(tag_where(p.size_tag) + " " + hex(tag(p.size_tag)->value) + " is not the " +
                    hex(exact->h.sh_size) + "-byte size of " + section_name(*exact));
    }
    if (const Tag* t = tag(DT_VERSYM); t != nullptr) {
      const Section* s = section_at(t->value, SHT_GNU_versym);
      if (s->h.sh_size != *section_symbols_ * 2)
        return fail(section_name(*s) + ": " + hex(s->h.sh_size) + " bytes for " +
                    std::to_string(*section_symbols_) + " symbols of 2 bytes each");
    }
    // Relocation tables: DT_RELA and DT_JMPREL each cover a run of SHT_RELA sections exactly,
    // and every allocated SHT_RELA section is covered.
    std::vector<const Section*> relas;
    for (const auto& s : sections_)
      if (s.h.sh_type == SHT_RELA && (s.h.sh_flags & SHF_ALLOC) != 0 && s.h.sh_size != 0)
        relas.push_back(&s);
    std::sort(relas.begin(), relas.end(),
              [](const Section* a, const Section* b) { return a->h.sh_addr < b->h.sh_addr; });
    std::vector<bool> covered(relas.size(), false);
    for (const auto& [start_tag, size_tag] :
         {std::pair{std::int64_t{DT_RELA}, std::int64_t{DT_RELASZ}},
          std::pair{std::int64_t{DT_JMPREL}, std::int64_t{DT_PLTRELSZ}}}) {
      if (tag(start_tag) == nullptr) continue;
      std::uint64_t pos = tag(start_tag)->value;
      const std::uint64_t end = pos + tag(size_tag)->value;  // both far below 2^63: mapped later
      for (std::size_t r = 0; r < relas.size() && pos < end; ++r) {
        if (relas[r]->h.sh_addr != pos) continue;
        covered[r] = true;
        pos += relas[r]->h.sh_size;
      }
      if (pos != end)
        return fail(tag_where(start_tag) + " with " + tag_name(size_tag) + " " +
                    range(tag(start_tag)->value, tag(size_tag)->value) +
                    " is not a run of SHT_RELA sections");
    }
    for (std::size_t r = 0; r < relas.size(); ++r)
      if (!covered[r])
        return fail(section_name(*relas[r]) + " at " +
                    range(relas[r]->h.sh_addr, relas[r]->h.sh_size) +
                    " is not covered by DT_RELA or DT_JMPREL");
    // DT_PLTGOT names the start of a writable section (.got.plt, or .got).
    if (const Tag* t = tag(DT_PLTGOT); t != nullptr) {
      const bool starts = std::any_of(sections_.begin(), sections_.end(), [&](const Section& s) {
        return s.h.sh_addr == t->value &&
               (s.h.sh_flags & (SHF_ALLOC | SHF_WRITE)) == (SHF_ALLOC | SHF_WRITE);
      });
      if (!starts)
        return fail(tag_where(DT_PLTGOT) + " " + hex(t->value) +
                    " is not the start of a writable section");
    }
    // Function addresses, from the dynamic and (when not stripped) the full symbol table.
    for (const auto& s : sections_) {
      if ((s.h.sh_type != SHT_DYNSYM && s.h.sh_type != SHT_SYMTAB) ||
          s.h.sh_entsize != sizeof(Elf64_Sym) || !fits(s.h.sh_offset, s.h.sh_size, size_))
        continue;
      if (s.h.sh_type == SHT_SYMTAB) have_symtab_ = true;
      for (std::uint64_t k = 1; k < s.h.sh_size / sizeof(Elf64_Sym); ++k) {
        const auto sym = at<Elf64_Sym>(s.h.sh_offset + k * sizeof(Elf64_Sym));
        const unsigned type = ELF64_ST_TYPE(sym.st_info);
        if (sym.st_shndx != SHN_UNDEF && sym.st_shndx < SHN_LORESERVE &&
            (type == STT_FUNC || type == STT_GNU_IFUNC || type == STT_NOTYPE) &&
            in_code_section(sym.st_value))
          function_starts_.push_back(sym.st_value);
      }
    }
    eh_frame_function_starts();
    std::sort(function_starts_.begin(), function_starts_.end());
    have_sections_ = true;
    return true;
  }

  /// Adds the start of every function with unwind information: the binary-search table of
  /// PT_GNU_EH_FRAME (.eh_frame_hdr) in the encoding GNU ld and lld write (datarel sdata4 pairs).
  /// A stripped object linked with -init=<function> names its DT_INIT nowhere else. Other
  /// encodings add nothing.
  void eh_frame_function_starts() {
    const auto hdr = std::find_if(phdrs_.begin(), phdrs_.end(), [](const Elf64_Phdr& ph) {
      return ph.p_type == PT_GNU_EH_FRAME;
    });
    if (hdr == phdrs_.end() || hdr->p_filesz < 12) return;  // in the file: checked by segments()
    const std::uint64_t off = hdr->p_offset, size = hdr->p_filesz;
    const auto version = at<std::uint8_t>(off), ptr_enc = at<std::uint8_t>(off + 1);
    const auto count_enc = at<std::uint8_t>(off + 2), table_enc = at<std::uint8_t>(off + 3);
    constexpr std::uint8_t udata4 = 0x03, sdata4 = 0x0b, datarel_sdata4 = 0x3b;
    if (version != 1 || count_enc != udata4 || table_enc != datarel_sdata4 ||
        (ptr_enc & 0x0f) != sdata4)
      return;
    const std::uint64_t count = at<std::uint32_t>(off + 8);
    if (count > (size - 12) / 8) return;
    for (std::uint64_t k = 0; k < count; ++k) {
      const auto initial = static_cast<std::int64_t>(at<std::int32_t>(off + 12 + 8 * k));
      const std::uint64_t addr = hdr->p_vaddr + static_cast<std::uint64_t>(initial);
      if (in_code_section(addr)) function_starts_.push_back(addr);
    }
  }

  bool in_code_section(std::uint64_t addr) const {
    return std::any_of(code_sections_.begin(), code_sections_.end(),
                       [&](const auto& c) { return addr >= c.first && addr - c.first < c.second; });
  }

  // ---- symbols and hash tables -----------------------------------------------------------------

  /// How many symbols DT_SYMTAB holds: what the section says when there is one, else what the
  /// hash tables index (ld.so reads no further than they lead it).
  bool symbol_count() {
    std::optional<std::uint64_t> sysv, gnu;
    if (const Tag* t = tag(DT_HASH); t != nullptr) {
      std::uint64_t off = 0;
      if (!table(tag_where(DT_HASH) + " header", t->value, 2, 4, 4, off)) return false;
      const auto nbucket = at<std::uint32_t>(off), nchain = at<std::uint32_t>(off + 4);
      if (nbucket == 0)
        return fail(tag_where(DT_HASH) + ": no buckets (ld.so divides by their number)");
      if (!table(tag_where(DT_HASH) + " with " + std::to_string(nbucket) + " buckets and " +
                     std::to_string(nchain) + " chains",
                 t->value, 2 + std::uint64_t{nbucket} + nchain, 4, 4, off))
        return false;
      const std::uint64_t buckets = off + 8, chains = buckets + 4 * std::uint64_t{nbucket};
      // Every chain a bucket starts must end (at index 0) without a loop and without leaving
      // the table: colour nodes 0 = unseen, 1 = on the current walk, 2 = known to end.
      std::vector<std::uint8_t> state(nchain, 0);
      for (std::uint32_t b = 0; b < nbucket; ++b) {
        std::uint32_t i = at<std::uint32_t>(buckets + 4 * std::uint64_t{b});
        std::vector<std::uint32_t> walk;
        while (i != STN_UNDEF) {
          if (i >= nchain)
            return fail(tag_where(DT_HASH) + ": bucket " + std::to_string(b) + " leads to symbol " +
                        std::to_string(i) + ", not below nchain " + std::to_string(nchain));
          if (state[i] == 2) break;
          if (state[i] == 1)
            return fail(tag_where(DT_HASH) + ": the chain of bucket " + std::to_string(b) +
                        " loops (ld.so would search it forever)");
          state[i] = 1;
          walk.push_back(i);
          i = at<std::uint32_t>(chains + 4 * std::uint64_t{i});
        }
        for (const std::uint32_t w : walk) state[w] = 2;
      }
      sysv = nchain;
    }
    if (const Tag* t = tag(DT_GNU_HASH); t != nullptr) {
      std::uint64_t off = 0;
      if (!table(tag_where(DT_GNU_HASH) + " header", t->value, 4, 4, 8, off)) return false;
      const auto nbuckets = at<std::uint32_t>(off), symoffset = at<std::uint32_t>(off + 4);
      const auto bloom_size = at<std::uint32_t>(off + 8), bloom_shift = at<std::uint32_t>(off + 12);
      if (!power_of_two(bloom_size))
        return fail(tag_where(DT_GNU_HASH) + ": bloom filter size " + std::to_string(bloom_size) +
                    " is not a power of two (ld.so asserts it is)");
      if (bloom_shift >= 64)
        return fail(tag_where(DT_GNU_HASH) + ": bloom shift " + std::to_string(bloom_shift) +
                    " is not below 64");
      const std::uint64_t words = 4 + 2 * std::uint64_t{bloom_size} + nbuckets;
      if (!table(tag_where(DT_GNU_HASH) + " with " + std::to_string(nbuckets) + " buckets and " +
                     std::to_string(bloom_size) + " bloom words",
                 t->value, words, 4, 8, off))
        return false;
      const std::uint64_t buckets = off + 16 + 8 * std::uint64_t{bloom_size};
      const std::uint64_t chain_addr = t->value + 4 * words;  // chain[0] is symbol symoffset
      std::uint64_t count = symoffset;
      // Chains are disjoint (each symbol hashes to one bucket): all of them together are at
      // most one word per symbol, which bounds the walk whatever the buckets say.
      std::uint64_t steps = size_ / 4 + 1;
      for (std::uint32_t b = 0; b < nbuckets; ++b) {
        const std::uint32_t first = at<std::uint32_t>(buckets + 4 * std::uint64_t{b});
        if (first == 0) continue;
        if (first < symoffset)
          return fail(tag_where(DT_GNU_HASH) + ": bucket " + std::to_string(b) +
                      " starts at symbol " + std::to_string(first) + ", below symoffset " +
                      std::to_string(symoffset));
        // Walk the chain to its end marker (bit 0); each step is one 4-byte word of the table.
        for (std::uint64_t i = first;; ++i) {
          std::uint64_t word = 0;
          if (steps-- == 0)
            return fail(tag_where(DT_GNU_HASH) +
                        ": chains overlap (more steps than the image "
                        "has words)");
          if (!table(
                  [&] {
                    return tag_where(DT_GNU_HASH) + ": the chain of bucket " + std::to_string(b);
                  },
                  chain_addr + 4 * (i - symoffset), 1, 4, 4, word))
            return false;
          if (i + 1 > count) count = i + 1;
          if ((at<std::uint32_t>(word) & 1) != 0) break;
        }
      }
      gnu = count;
    }
    if (section_symbols_) {
      nsyms_ = *section_symbols_;
      if (sysv && *sysv != nsyms_)
        return fail(tag_where(DT_HASH) + " counts " + std::to_string(*sysv) +
                    " symbols, the "
                    "SHT_DYNSYM section holds " +
                    std::to_string(nsyms_));
    } else if (sysv) {
      nsyms_ = *sysv;
    } else if (gnu) {
      nsyms_ = *gnu;
    } else {
      return fail(
          "no DT_HASH, no DT_GNU_HASH and no section headers: the number of symbols in "
          "DT_SYMTAB is unknown");
    }
    if (gnu && *gnu > nsyms_)
      return fail(tag_where(DT_GNU_HASH) + " reaches symbol " + std::to_string(*gnu - 1) +
                  ", but DT_SYMTAB holds " + std::to_string(nsyms_) + " symbols");
    return table(tag_where(DT_SYMTAB) + " with " + std::to_string(nsyms_) + " symbols",
                 tag(DT_SYMTAB)->value, nsyms_, sizeof(Elf64_Sym), 8, symtab_offset_);
  }

  bool versions() {
    std::uint64_t budget = size_ / 8 + 1;  // records visited; more cannot fit without overlap
    std::string_view s;
    if (const Tag* t = tag(DT_VERNEED); t != nullptr) {
      std::uint64_t addr = t->value, count = 0;
      for (;;) {
        const std::string what = tag_where(DT_VERNEED) + " record " + std::to_string(count);
        std::uint64_t off = 0;
        if (budget-- == 0)
          return fail(tag_where(DT_VERNEED) + ": more records than the image holds");
        if (!table(what, addr, 1, sizeof(Elf64_Verneed), 4, off)) return false;
        const auto vn = at<Elf64_Verneed>(off);
        if (vn.vn_version != 1)
          return fail(what + ": version " + std::to_string(vn.vn_version) + ", not 1");
        if (!string_at(what + " file name", vn.vn_file, s)) return false;
        if (std::find(needed_.begin(), needed_.end(), s) == needed_.end())
          return fail(what + " names '" + printable(s) +
                      "', which is not a DT_NEEDED "
                      "dependency (ld.so asserts it is)");
        std::uint64_t aux = addr + vn.vn_aux;
        for (std::uint32_t k = 0;; ++k) {
          const std::string aux_what = what + " version " + std::to_string(k);
          if (budget-- == 0)
            return fail(tag_where(DT_VERNEED) + ": more records than the image holds");
          if (!table(aux_what, aux, 1, sizeof(Elf64_Vernaux), 4, off)) return false;
          const auto vna = at<Elf64_Vernaux>(off);
          if (!string_at(aux_what + " name", vna.vna_name, s)) return false;
          version_high_ = std::max<std::uint32_t>(version_high_, vna.vna_other & 0x7fff);
          if (vna.vna_next == 0) {
            if (k + 1 != vn.vn_cnt)
              return fail(what + ": vn_cnt " + std::to_string(vn.vn_cnt) + " but " +
                          std::to_string(k + 1) + " versions are chained");
            break;
          }
          aux += vna.vna_next;
        }
        ++count;
        if (vn.vn_next == 0) break;
        addr += vn.vn_next;
      }
      if (const Tag* n = tag(DT_VERNEEDNUM); n != nullptr && n->value != count)
        return fail(tag_where(DT_VERNEEDNUM) + " is " + std::to_string(n->value) + " but " +
                    std::to_string(count) + " DT_VERNEED records are chained");
    }
    if (const Tag* t = tag(DT_VERDEF); t != nullptr) {
      std::uint64_t addr = t->value, count = 0;
      for (;;) {
        const std::string what = tag_where(DT_VERDEF) + " record " + std::to_string(count);
        std::uint64_t off = 0;
        if (budget-- == 0)
          return fail(tag_where(DT_VERDEF) + ": more records than the image holds");
        if (!table(what, addr, 1, sizeof(Elf64_Verdef), 4, off)) return false;
        const auto vd = at<Elf64_Verdef>(off);
        if (vd.vd_version != 1)
          return fail(what + ": version " + std::to_string(vd.vd_version) + ", not 1");
        if (vd.vd_cnt == 0) return fail(what + ": no names (vd_cnt is 0)");
        version_high_ = std::max<std::uint32_t>(version_high_, vd.vd_ndx & 0x7fff);
        std::uint64_t aux = addr + vd.vd_aux;
        for (std::uint32_t k = 0; k < vd.vd_cnt; ++k) {
          const std::string aux_what = what + " name " + std::to_string(k);
          if (budget-- == 0)
            return fail(tag_where(DT_VERDEF) + ": more records than the image holds");
          if (!table(aux_what, aux, 1, sizeof(Elf64_Verdaux), 4, off)) return false;
          const auto vda = at<Elf64_Verdaux>(off);
          if (!string_at(aux_what, vda.vda_name, s)) return false;
          if (vda.vda_next == 0) {
            if (k + 1 != vd.vd_cnt)
              return fail(what + ": vd_cnt " + std::to_string(vd.vd_cnt) + " but " +
                          std::to_string(k + 1) + " names are chained");
            break;
          }
          aux += vda.vda_next;
        }
        ++count;
        if (vd.vd_next == 0) break;
        addr += vd.vd_next;
      }
      if (const Tag* n = tag(DT_VERDEFNUM); n != nullptr && n->value != count)
        return fail(tag_where(DT_VERDEFNUM) + " is " + std::to_string(n->value) + " but " +
                    std::to_string(count) + " DT_VERDEF records are chained");
    }
    if (const Tag* t = tag(DT_VERSYM); t != nullptr) {
      if (!table(tag_where(DT_VERSYM) + " for " + std::to_string(nsyms_) + " symbols", t->value,
                 nsyms_, 2, 2, versym_offset_))
        return false;
      have_versym_ = true;
    }
    return true;
  }

  bool symbols() {
    std::string_view name;
    for (std::uint64_t i = 1; i < nsyms_; ++i) {
      const auto sym = at<Elf64_Sym>(symtab_offset_ + i * sizeof(Elf64_Sym));
      const auto what = [&] { return "symbol " + std::to_string(i) + " of DT_SYMTAB"; };
      if (!string_at(what, sym.st_name, name)) return false;
      if (have_versym_) {
        const std::uint16_t v = at<std::uint16_t>(versym_offset_ + 2 * i) & 0x7fff;
        if (v > version_high_)
          return fail(what() + " ('" + printable(name) + "') has version index " +
                      std::to_string(v) + ", beyond the " + std::to_string(version_high_) +
                      " versions DT_VERNEED and DT_VERDEF define");
      }
      const unsigned bind = ELF64_ST_BIND(sym.st_info), kind = ELF64_ST_TYPE(sym.st_info);
      if (bind != STB_LOCAL && bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE)
        return fail(what() + " ('" + printable(name) + "') has binding " + std::to_string(bind) +
                    ", not local, global, weak or unique");
      if (kind > STT_TLS && kind != STT_GNU_IFUNC)
        return fail(what() + " ('" + printable(name) + "') has type " + std::to_string(kind) +
                    ", which ld.so does not know");
      if (sym.st_shndx == SHN_UNDEF) {
        // ld.so binds a local or non-default-visibility symbol to the module itself: an
        // undefined one would resolve to the module's base address.
        if (bind == STB_LOCAL || ELF64_ST_VISIBILITY(sym.st_other) != STV_DEFAULT)
          return fail(what() + " ('" + printable(name) + "') is undefined but " +
                      (bind == STB_LOCAL ? "local" : "not of default visibility") +
                      ", so ld.so would bind it to the module's own base address");
        continue;
      }
      if (sym.st_shndx >= SHN_LORESERVE) {
        if (sym.st_shndx == SHN_ABS) continue;
        return fail(what() + " ('" + printable(name) + "') is in reserved section index " +
                    hex(sym.st_shndx) + " (only SHN_ABS may appear in a shared object)");
      }
      if (have_sections_ && sym.st_shndx >= sections_.size())
        return fail(what() + " ('" + printable(name) + "') is in section " +
                    std::to_string(sym.st_shndx) + ", beyond the " +
                    std::to_string(sections_.size()) + " sections");
      const unsigned type = kind;
      const auto described = [&] { return what() + " ('" + printable(name) + "')"; };
      if (type == STT_FUNC || type == STT_GNU_IFUNC) {
        if (!mapped([&] { return described() + " code"; }, sym.st_value,
                    std::max<std::uint64_t>(sym.st_size, 1), false, PF_X))
          return false;
      } else if (type == STT_OBJECT) {
        if (sym.st_size != 0 &&
            !mapped([&] { return described() + " data"; }, sym.st_value, sym.st_size, false))
          return false;
      } else if (type == STT_TLS) {
        const std::uint64_t block = tls_ == nullptr ? 0 : tls_->p_memsz;
        if (!fits(sym.st_value, sym.st_size, block))
          return fail(described() + ": thread-local " + range(sym.st_value, sym.st_size) +
                      " is outside the " + hex(block) + "-byte TLS block (PT_TLS)");
      }
    }
    return true;
  }

  // ---- relocations -----------------------------------------------------------------------------

  bool in_slot_arrays(std::uint64_t addr, std::uint64_t width) const {
    for (const auto& [start, size] : slot_arrays_)
      if (addr < start + size && start < addr + width) return true;
    return false;
  }

  bool rela_table(std::int64_t start_tag, std::int64_t size_tag) {
    const Tag* t = tag(start_tag);
    if (t == nullptr) return true;
    const std::uint64_t count = tag(size_tag)->value / sizeof(Elf64_Rela);
    std::uint64_t off = 0;
    if (!table(tag_where(start_tag) + " with " + std::to_string(count) + " relocations", t->value,
               count, sizeof(Elf64_Rela), 8, off))
      return false;
    const std::uint16_t machine = eh_.e_machine;
    std::uint64_t relative_first = 0;
    if (start_tag == DT_RELA && tag(DT_RELACOUNT) != nullptr) {
      relative_first = tag(DT_RELACOUNT)->value;
      if (relative_first > count)
        return fail(tag_where(DT_RELACOUNT) + " " + std::to_string(relative_first) +
                    " is more than the " + std::to_string(count) + " relocations of DT_RELA");
    }
    for (std::uint64_t k = 0; k < count; ++k) {
      const auto r = at<Elf64_Rela>(off + k * sizeof(Elf64_Rela));
      const std::uint32_t type = ELF64_R_TYPE(r.r_info);
      const std::uint32_t sym = ELF64_R_SYM(r.r_info);
      const RelocKind kind = reloc_kind(machine, type);
      const auto what = [&] {
        return "relocation " + std::to_string(k) + " of " + tag_name(start_tag) + " (" +
               (*kind.name != '\0' ? std::string(kind.name) : "type " + std::to_string(type)) +
               " at " + hex(r.r_offset) + ")";
      };
      if (kind.refused != nullptr) return fail(what() + ": " + kind.refused);
      if (k < relative_first && knows_reloc_types(machine) && (kind.flags & reloc_relative) == 0)
        return fail(what() + ": DT_RELACOUNT says the first " + std::to_string(relative_first) +
                    " relocations are relative, and ld.so would apply this one as relative");
      if (sym >= nsyms_)
        return fail(what() + ": symbol index " + std::to_string(sym) + " is not below the " +
                    std::to_string(nsyms_) + " symbols of DT_SYMTAB");
      if ((kind.flags & reloc_needs_symbol) != 0 && sym == 0 && k >= relative_first)
        return fail(what() +
                    ": names symbol 0 instead of a symbol (ld.so would store the "
                    "module's own base address)");
      if ((kind.flags & reloc_got_slot) != 0 && r.r_offset % 8 != 0 && k >= relative_first)
        return fail(what() + ": fills a GOT slot at an address that is not 8-byte aligned");
      // ld.so applies the first DT_RELACOUNT relocations as relative ones, whatever their type.
      const std::uint32_t width = k < relative_first ? 8 : kind.width;
      if (width != 0 &&
          !mapped([&] { return what() + ": target"; }, r.r_offset, width, false, PF_W))
        return false;
      if ((kind.flags & reloc_irelative) != 0 &&
          !mapped([&] { return what() + ": IFUNC resolver"; },
                  static_cast<std::uint64_t>(r.r_addend), 1, false, PF_X))
        return false;
      if ((kind.flags & reloc_tls) != 0 && sym == 0 && tls_ == nullptr)
        return fail(what() +
                    ": a thread-local relocation against the module itself, which has no "
                    "PT_TLS");
      if (width != 0 && in_slot_arrays(r.r_offset, width)) {
        SlotWriter w;
        w.kind = (kind.flags & reloc_relative) != 0 || k < relative_first ? SlotWriter::relative
                 : (type == R_X86_64_64 && machine == EM_X86_64) ||
                         (type == R_AARCH64_ABS64 && machine == EM_AARCH64)
                     ? SlotWriter::symbol
                     : SlotWriter::other;
        w.addend = static_cast<std::uint64_t>(r.r_addend);
        w.sym = sym;
        if (r.r_offset % 8 != 0 || width != 8)
          return fail(what() + ": writes into an init/fini array across its 8-byte entries");
        slot_writers_[r.r_offset] = w;
      }
    }
    return true;
  }

  bool relr_table() {
    const Tag* t = tag(dt_relr);
    if (t == nullptr) return true;
    const std::uint64_t count = tag(dt_relrsz)->value / 8;
    std::uint64_t off = 0;
    if (!table(tag_where(dt_relr) + " with " + std::to_string(count) + " entries", t->value, count,
               8, 8, off))
      return false;
    std::uint64_t where = 0;
    bool have_where = false;
    const auto relocate = [&](std::uint64_t addr, std::uint64_t k) {
      const auto what = [&] { return "entry " + std::to_string(k) + " of " + tag_where(dt_relr); };
      if (!mapped([&] { return what() + ": target"; }, addr, 8, false, PF_W)) return false;
      if (in_slot_arrays(addr, 8)) {
        if (addr % 8 != 0)
          return fail(what() + ": relocates an init/fini array across its 8-byte entries");
        slot_writers_[addr] = SlotWriter{SlotWriter::relr, 0, 0};
      }
      return true;
    };
    for (std::uint64_t k = 0; k < count; ++k) {
      const auto entry = at<std::uint64_t>(off + 8 * k);
      if ((entry & 1) == 0) {
        if (!relocate(entry, k)) return false;
        where = entry + 8;
        have_where = true;
      } else {
        if (!have_where)
          return fail("entry " + std::to_string(k) + " of " + tag_where(dt_relr) +
                      " is a bitmap before any address");
        for (std::uint64_t bit = 1; bit < 64; ++bit)
          if (((entry >> bit) & 1) != 0 && !relocate(where + 8 * (bit - 1), k)) return false;
        where += std::uint64_t{63} * 8;
        if (where > max_address)
          return fail(tag_where(dt_relr) + ": bitmaps run past the address space");
      }
    }
    return true;
  }

  bool relocations() {
    // The init/fini arrays first, so that relocations that fill them are noted on the way.
    for (const auto& [array, size] :
         {std::pair{DT_INIT_ARRAY, DT_INIT_ARRAYSZ}, std::pair{DT_FINI_ARRAY, DT_FINI_ARRAYSZ},
          std::pair{DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ}}) {
      const Tag* t = tag(array);
      if (t == nullptr) continue;
      std::uint64_t off = 0;
      const std::uint64_t bytes = tag(size)->value;
      if (!table(tag_where(array) + " with " + tag_name(size) + " " + hex(bytes), t->value,
                 bytes / 8, 8, 8, off))
        return false;
      slot_arrays_.emplace_back(t->value, bytes);
    }
    return rela_table(DT_RELA, DT_RELASZ) && rela_table(DT_JMPREL, DT_PLTRELSZ) && relr_table();
  }

  // ---- code ld.so calls ------------------------------------------------------------------------

  /// `addr` is where ld.so will call: in an executable PT_LOAD, and where the section headers can
  /// tell, inside a code section at the start of a function (`need_start`).
  bool code_address(const std::string& what, std::uint64_t addr, bool need_start) {
    if (!mapped(what, addr, 1, false, PF_X)) return false;
    if (!have_sections_) return true;
    if (!in_code_section(addr))
      return fail(what + " " + hex(addr) + " is not inside a code section");
    if (need_start && !std::binary_search(function_starts_.begin(), function_starts_.end(), addr))
      return fail(what + " " + hex(addr) + " is not the start of a function or code section");
    return true;
  }

  bool code_pointers() {
    for (const std::int64_t t : std::initializer_list<std::int64_t>{DT_INIT, DT_FINI})
      if (tag(t) != nullptr && !code_address(tag_where(t), tag(t)->value, true)) return false;
    for (const std::int64_t array :
         std::initializer_list<std::int64_t>{DT_INIT_ARRAY, DT_FINI_ARRAY, DT_PREINIT_ARRAY}) {
      const Tag* t = tag(array);
      if (t == nullptr) continue;
      const std::uint64_t count = tag(array == DT_INIT_ARRAY   ? DT_INIT_ARRAYSZ
                                      : array == DT_FINI_ARRAY ? DT_FINI_ARRAYSZ
                                                               : DT_PREINIT_ARRAYSZ)
                                      ->value /
                                  8;
      for (std::uint64_t k = 0; k < count; ++k) {
        const std::uint64_t slot = t->value + 8 * k;
        const std::string what = tag_where(array) + " entry " + std::to_string(k);
        std::uint64_t off = 0;
        if (!mapped(what, slot, 8, true, 0, &off)) return false;
        const auto found = slot_writers_.find(slot);
        const SlotWriter w = found == slot_writers_.end() ? SlotWriter{} : found->second;
        std::uint64_t target = 0;
        switch (w.kind) {
          case SlotWriter::relative:
            target = w.addend;
            break;
          case SlotWriter::relr:
            target = at<std::uint64_t>(off);
            break;
          case SlotWriter::symbol: {
            const auto sym =
                at<Elf64_Sym>(symtab_offset_ + std::uint64_t{w.sym} * sizeof(Elf64_Sym));
            if (w.sym == 0 || sym.st_shndx == SHN_UNDEF) continue;  // another object's function
            target = sym.st_value + w.addend;
            break;
          }
          case SlotWriter::other:
            return fail(what + " at " + hex(slot) +
                        " is set by a relocation this check cannot "
                        "follow");
          case SlotWriter::none:
            return fail(what + " at " + hex(slot) + " holds " + hex(at<std::uint64_t>(off)) +
                        " and no relocation adjusts it: ld.so would call an unrelocated address");
        }
        if (!code_address(what + " (called by ld.so)", target, have_symtab_)) return false;
      }
    }
    return true;
  }

  bool other_addresses() {
    if (const Tag* t = tag(DT_PLTGOT); t != nullptr) {
      // With lazy binding ld.so writes the GOT's 2nd and 3rd words.
      if (!aligned(tag_where(DT_PLTGOT), t->value, 8) ||
          !mapped(tag_where(DT_PLTGOT), t->value, 24, false, PF_W))
        return false;
    }
    if (const Tag* t = tag(DT_TLSDESC_GOT); t != nullptr) {
      if (!aligned(tag_where(DT_TLSDESC_GOT), t->value, 8) ||
          !mapped(tag_where(DT_TLSDESC_GOT), t->value, 8, false, PF_W))
        return false;
    }
    if (const Tag* t = tag(DT_TLSDESC_PLT);
        t != nullptr && !mapped(tag_where(DT_TLSDESC_PLT), t->value, 1, false, PF_X))
      return false;
    if (eh_.e_machine == EM_X86_64) {
      if (const Tag* t = tag(dt_x86_64_plt); t != nullptr) {
        const Tag* sz = tag(dt_x86_64_pltsz);
        if (!mapped("DT_X86_64_PLT", t->value, sz == nullptr ? 1 : sz->value, false, PF_X))
          return false;
      }
    }
    // Any other address in the address-tag range ld.so might keep: inside the object.
    for (const auto& [t, where] : tags_) {
      if (t < DT_ADDRRNGLO || t > DT_ADDRRNGHI || is_string_tag(t) || t == DT_GNU_HASH ||
          t == DT_TLSDESC_PLT || t == DT_TLSDESC_GOT)
        continue;
      if (!mapped(tag_where(t), where.value, 1, false)) return false;
    }
    return true;
  }

  std::span<const std::byte> image_;
  std::uint64_t size_;
  std::string defect_;
  Elf64_Ehdr eh_{};
  std::vector<Elf64_Phdr> phdrs_;
  std::vector<Load> loads_;  // ascending p_vaddr, page-disjoint
  const Elf64_Phdr* dynamic_ = nullptr;
  const Elf64_Phdr* tls_ = nullptr;
  const Elf64_Phdr* relro_ = nullptr;
  const Elf64_Phdr* phdr_ = nullptr;
  std::vector<Elf64_Dyn> dyn_;                          // up to, not including, the first DT_NULL
  std::map<std::int64_t, Tag> tags_;                    // tags that appear once
  std::vector<std::pair<std::int64_t, Tag>> repeated_;  // DT_NEEDED, DT_AUXILIARY, DT_FILTER
  std::vector<std::string> needed_;
  std::uint64_t strtab_offset_ = 0, strsz_ = 0;
  std::uint64_t symtab_offset_ = 0, nsyms_ = 0;
  std::uint64_t versym_offset_ = 0;
  bool have_versym_ = false;
  std::uint32_t version_high_ = 0;  // the highest version index ld.so allocates
  std::vector<Section> sections_;
  bool have_sections_ = false, have_symtab_ = false;
  std::optional<std::uint64_t> section_symbols_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>>
      code_sections_;                                                 // SHF_EXECINSTR (addr, size)
  std::vector<std::uint64_t> function_starts_;                        // sorted
  std::vector<std::pair<std::uint64_t, std::uint64_t>> slot_arrays_;  // init/fini arrays
  std::map<std::uint64_t, SlotWriter> slot_writers_;
};

}  // namespace detail::elf

/// "x86-64 (EM_X86_64)", "aarch64 (EM_AARCH64)", or "machine 1234 (e_machine)".
inline std::string elf_machine_name(std::uint16_t machine) {
  if (const auto* m = detail::elf::find_machine(machine); m != nullptr)
    return std::string(m->name) + " (" + m->constant + ")";
  return "machine " + std::to_string(machine) + " (e_machine)";
}

/// Checks the ELF header of a file ld.so will open itself (a plugin), given its first bytes
/// (elf_header_size of them; fewer when the file is shorter) and, when known, the file's size:
/// the ELF magic; a 64-bit, host-byte-order, version-1 ELF with an OS ABI ld.so accepts and zero
/// padding; a shared object (ET_DYN) for this process's machine ("ELF for aarch64 (EM_AARCH64),
/// this process is x86-64"); e_ehsize, e_phentsize and e_shentsize of ELF64; program headers
/// present; and with `file_size`, both header tables inside the file. It cannot see inside the
/// segments: ld.so still trusts them, so modules loaded from bytes go through
/// validate_elf_shared_object instead.
inline ElfVerdict validate_elf_header(std::span<const std::byte> head,
                                      std::optional<std::uint64_t> file_size = std::nullopt) {
  return {detail::elf::check_header(head, file_size)};
}

/// Checks a whole ELF shared object before dlopen: the header (validate_elf_header), then what
/// glibc's ld.so would read and trust when it maps, relocates, initialises and finalises it:
///  - program headers: every segment inside the file; PT_LOADs non-empty, readable, p_filesz <=
///    p_memsz, p_align a power of two and a page multiple (or 0), p_offset congruent to p_vaddr,
///    ascending, on pages of their own, spanning at most 16 GiB; exactly one PT_DYNAMIC, whole
///    16-byte entries, inside a PT_LOAD's file-backed part; PT_TLS, PT_GNU_RELRO (in a writable
///    PT_LOAD), PT_PHDR, PT_GNU_EH_FRAME, PT_GNU_PROPERTY placed consistently; notes well formed;
///    no executable stack (PT_GNU_STACK with PF_X);
///  - the dynamic section: a DT_NULL inside it; no tag twice but DT_NEEDED, DT_AUXILIARY and
///    DT_FILTER; the tags ld.so dereferences without checking present together (DT_RELA with
///    DT_RELASZ and DT_RELAENT == 24, DT_JMPREL with DT_PLTREL == DT_RELA, DT_PLTRELSZ and
///    DT_PLTGOT, DT_INIT_ARRAY with its size, DT_RELR with DT_RELRSZ and DT_RELRENT, ...); no
///    text relocations (DT_TEXTREL, DF_TEXTREL) and no REL relocations;
///  - every table a tag points to (strings, symbols, DT_HASH, DT_GNU_HASH, versions,
///    relocations, init/fini arrays) inside the file-backed part of a PT_LOAD, aligned; every
///    string NUL-terminated inside DT_STRSZ, file names (DT_NEEDED, DT_FILTER, DT_AUXILIARY)
///    not empty; hash chains in bounds and loop-free; version records chained in bounds, naming
///    DT_NEEDED files, and every symbol's version index one ld.so allocated;
///  - every symbol: known binding and type; undefined ones global or weak with default
///    visibility (else ld.so binds them to the module's own base address); no reserved section
///    index but SHN_ABS; functions in executable segments, data and TLS inside their segments;
///  - every relocation: a type ld.so applies (no copy relocations), its symbol below the
///    symbol count and not symbol 0 where a symbol is needed, its target inside a writable
///    PT_LOAD (GOT slots 8-byte aligned), an IFUNC resolver in executable code; the first
///    DT_RELACOUNT of them relative; DT_RELR entries likewise;
///  - what ld.so calls: DT_INIT, DT_FINI and every init/fini array entry (after relocation) in
///    executable code;
///  - when the image has section headers (ld.so ignores them, the linker writes them from the
///    same layout): allocated sections inside the PT_LOADs at their file offsets, and the
///    dynamic tags naming exactly the sections they should (.dynamic, .dynsym, .dynstr, hash
///    and version tables, relocation tables, init/fini arrays with their sizes), DT_INIT and
///    DT_FINI the start of a function (a code section, a function symbol, or an .eh_frame_hdr
///    entry), init/fini array entries too where a .symtab names the functions. That catches a
///    pointer moved to another place inside a segment, which no bounds check can.
/// ok() means the dynamic loader can map and relocate the image without reading or writing out
/// of bounds, asserting, or calling outside the module's code, as far as the image's own
/// structures can show; it cannot tell a relocation or symbol swapped for another valid one,
/// and it does not make the module's own code correct or harmless. Stricter than ld.so on
/// purpose in places real linkers never differ (a second witness in the section headers, no
/// executable stack, no text relocations): a module is refused rather than trusted.
inline ElfVerdict validate_elf_shared_object(std::span<const std::byte> image) {
  return {detail::elf::ImageCheck(image).run()};
}

}  // namespace gpuplug::support
