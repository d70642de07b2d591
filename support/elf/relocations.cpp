// SPDX-License-Identifier: Apache-2.0
// ImageCheck on what ld.so writes and calls: the relocations (RELA, JMPREL, RELR), the init and
// fini code, and the other addresses the dynamic section names.
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

// ---- relocations --------------------------------------------------------------------------------

bool ImageCheck::in_slot_arrays(std::uint64_t addr, std::uint64_t width) const {
  for (const auto& [start, size] : slot_arrays_)
    if (addr < start + size && start < addr + width) return true;
  return false;
}

bool ImageCheck::rela_table(std::int64_t start_tag, std::int64_t size_tag) {
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

bool ImageCheck::relr_table() {
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

bool ImageCheck::relocations() {
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

// ---- code ld.so calls ---------------------------------------------------------------------------

bool ImageCheck::code_address(const std::string& what, std::uint64_t addr, bool need_start) {
  if (!mapped(what, addr, 1, false, PF_X)) return false;
  if (!have_sections_) return true;
  if (!in_code_section(addr))
    return fail(what + " " + hex(addr) + " is not inside a code section");
  if (need_start && !std::binary_search(function_starts_.begin(), function_starts_.end(), addr))
    return fail(what + " " + hex(addr) + " is not the start of a function or code section");
  return true;
}

bool ImageCheck::code_pointers() {
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

bool ImageCheck::other_addresses() {
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

}  // namespace gpuplug::support::detail::elf
