// SPDX-License-Identifier: Apache-2.0
// ImageCheck on the program headers: the segments ld.so maps, their notes and their layout.
#include <elf.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuplug/support/text.hpp"
#include "image_check.hpp"

namespace gpuplug::support::detail::elf {

// ---- program headers ----------------------------------------------------------------------------

bool ImageCheck::program_headers() {
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

bool ImageCheck::notes(const std::string& who, std::uint64_t offset, std::uint64_t size,
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

bool ImageCheck::in_load_as_in_file(std::size_t i, std::uint64_t size, std::uint32_t need_flags) {
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

bool ImageCheck::segments() {
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

}  // namespace gpuplug::support::detail::elf
