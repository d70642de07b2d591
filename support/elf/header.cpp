// SPDX-License-Identifier: Apache-2.0
// The ELF header check (validate_elf_header, and the first step of validate_elf_shared_object)
// and the machine names its messages use.
#include <elf.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>

#include "gpuplug/support/elf_image.hpp"
#include "gpuplug/support/text.hpp"
#include "image_check.hpp"

namespace gpuplug::support {

namespace detail::elf {

std::string check_header(std::span<const std::byte> head, std::optional<std::uint64_t> file_size) {
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

}  // namespace detail::elf

std::string elf_machine_name(std::uint16_t machine) {
  if (const auto* m = detail::elf::find_machine(machine); m != nullptr)
    return std::string(m->name) + " (" + m->constant + ")";
  return "machine " + std::to_string(machine) + " (e_machine)";
}

ElfVerdict validate_elf_header(std::span<const std::byte> head,
                               std::optional<std::uint64_t> file_size) {
  return {detail::elf::check_header(head, file_size)};
}

}  // namespace gpuplug::support
