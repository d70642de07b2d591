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
// read nothing outside the span, and are safe to call from many threads at once. They are
// compiled once, into gpuplug_support (support/elf/: header.cpp for the header, image_check.cpp
// and the files beside it for the parts of the whole-image check).
#pragma once

#include <elf.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

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

/// "x86-64 (EM_X86_64)", "aarch64 (EM_AARCH64)", or "machine 1234 (e_machine)".
std::string elf_machine_name(std::uint16_t machine);

/// Checks the ELF header of a file ld.so will open itself (a plugin), given its first bytes
/// (elf_header_size of them; fewer when the file is shorter) and, when known, the file's size:
/// the ELF magic; a 64-bit, host-byte-order, version-1 ELF with an OS ABI ld.so accepts and zero
/// padding; a shared object (ET_DYN) for this process's machine ("ELF for aarch64 (EM_AARCH64),
/// this process is x86-64"); e_ehsize, e_phentsize and e_shentsize of ELF64; program headers
/// present; and with `file_size`, both header tables inside the file. It cannot see inside the
/// segments: ld.so still trusts them, so modules loaded from bytes go through
/// validate_elf_shared_object instead.
ElfVerdict validate_elf_header(std::span<const std::byte> head,
                               std::optional<std::uint64_t> file_size = std::nullopt);

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
ElfVerdict validate_elf_shared_object(std::span<const std::byte> image);

}  // namespace gpuplug::support
