// SPDX-License-Identifier: Apache-2.0
// ImageCheck on the section headers, a second witness: where an image has them they must agree
// with the dynamic section, and they tell where functions start.
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

// ---- section headers: a second witness ----------------------------------------------------------

bool ImageCheck::sections() {
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

void ImageCheck::eh_frame_function_starts() {
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

bool ImageCheck::in_code_section(std::uint64_t addr) const {
  return std::any_of(code_sections_.begin(), code_sections_.end(),
                     [&](const auto& c) { return addr >= c.first && addr - c.first < c.second; });
}

}  // namespace gpuplug::support::detail::elf
