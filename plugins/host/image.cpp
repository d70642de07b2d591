// SPDX-License-Identifier: Apache-2.0
// ELF checks and readers for host modules: program headers, segments, exported functions.
#include "image.hpp"

#include <elf.h>

#include <algorithm>
#include <cstring>

namespace gpuplug::host {
namespace {

#if defined(__x86_64__)
constexpr std::uint16_t kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr std::uint16_t kMachine = EM_AARCH64;
#elif defined(__powerpc64__)
constexpr std::uint16_t kMachine = EM_PPC64;
#elif defined(__riscv) && __riscv_xlen == 64
constexpr std::uint16_t kMachine = EM_RISCV;
#else
#error "the host backend needs a 64-bit ELF target it knows"
#endif

bool in_bounds(std::uint64_t offset, std::uint64_t size, std::uint64_t total) {
  return offset <= total && size <= total - offset;
}

template <class T>
T read_at(std::span<const std::byte> image, std::uint64_t offset) {
  T value;
  std::memcpy(&value, image.data() + offset, sizeof value);  // images need not be aligned
  return value;
}

}  // namespace

bool is_elf(std::span<const std::byte> image) noexcept {
  return image.size() >= sizeof(Elf64_Ehdr) && std::memcmp(image.data(), ELFMAG, SELFMAG) == 0;
}

std::string image_problem(std::span<const std::byte> image) {
  const auto eh = read_at<Elf64_Ehdr>(image, 0);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return "";  // dlopen reports "wrong ELF class"
  if (eh.e_type != ET_DYN)
    return "an ELF file of type " + std::to_string(eh.e_type) + ", not a shared object";
  if (eh.e_machine != kMachine) return "";  // dlopen names the machine mismatch
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) return "unexpected program header size";
  if (!in_bounds(eh.e_phoff, std::uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr), image.size()))
    return "program headers lie outside the image (truncated?)";
  for (std::uint16_t i = 0; i < eh.e_phnum; ++i) {
    const auto ph = read_at<Elf64_Phdr>(image, eh.e_phoff + std::uint64_t{i} * sizeof(Elf64_Phdr));
    if (ph.p_type == PT_LOAD && !in_bounds(ph.p_offset, ph.p_filesz, image.size()))
      return "segment " + std::to_string(i) + " extends past the end of the image (" +
             std::to_string(image.size()) + " bytes; truncated?)";
  }
  return "";
}

std::vector<ImageSegment> image_segments(std::span<const std::byte> image, std::uint64_t base) {
  std::vector<ImageSegment> relro, loads;
  const auto eh = read_at<Elf64_Ehdr>(image, 0);
  for (std::uint16_t i = 0; i < eh.e_phnum; ++i) {
    const auto ph = read_at<Elf64_Phdr>(image, eh.e_phoff + std::uint64_t{i} * sizeof(Elf64_Phdr));
    const ImageSegment s{base + ph.p_vaddr, base + ph.p_vaddr + ph.p_memsz,
                         (ph.p_flags & PF_W) != 0};
    if (ph.p_type == PT_LOAD && ph.p_memsz != 0) loads.push_back(s);
    if (ph.p_type == PT_GNU_RELRO && ph.p_memsz != 0) relro.push_back({s.begin, s.end, false});
  }
  relro.insert(relro.end(), loads.begin(), loads.end());
  return relro;
}

std::vector<std::string> exported_functions(std::span<const std::byte> image) {
  std::vector<std::string> out;
  const auto eh = read_at<Elf64_Ehdr>(image, 0);
  if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
      !in_bounds(eh.e_shoff, std::uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr), image.size()))
    return out;
  const auto section = [&](std::uint32_t i) {
    return read_at<Elf64_Shdr>(image, eh.e_shoff + std::uint64_t{i} * sizeof(Elf64_Shdr));
  };
  for (std::uint32_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr sym = section(i);
    if (sym.sh_type != SHT_DYNSYM || sym.sh_entsize != sizeof(Elf64_Sym) ||
        sym.sh_link >= eh.e_shnum)
      continue;
    const Elf64_Shdr str = section(sym.sh_link);
    if (!in_bounds(sym.sh_offset, sym.sh_size, image.size()) ||
        !in_bounds(str.sh_offset, str.sh_size, image.size()))
      continue;
    const char* strings = reinterpret_cast<const char*>(image.data() + str.sh_offset);
    for (std::uint64_t k = 1; k < sym.sh_size / sizeof(Elf64_Sym); ++k) {
      const auto s = read_at<Elf64_Sym>(image, sym.sh_offset + k * sizeof(Elf64_Sym));
      if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || ELF64_ST_BIND(s.st_info) != STB_GLOBAL ||
          s.st_shndx == SHN_UNDEF || s.st_name >= str.sh_size)
        continue;
      const std::size_t max = static_cast<std::size_t>(str.sh_size - s.st_name);
      const std::string name(strings + s.st_name, strnlen(strings + s.st_name, max));
      // _init/_fini and other reserved names are the toolchain's, not kernels.
      if (!name.empty() && name[0] != '_') out.push_back(name);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace gpuplug::host
