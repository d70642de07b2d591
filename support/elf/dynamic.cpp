// SPDX-License-Identifier: Apache-2.0
// ImageCheck on the dynamic section and what it points to: its tags, the string table, the
// symbols, the hash tables and the version records.
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

// ---- the dynamic section ------------------------------------------------------------------------

bool ImageCheck::dynamic_entries() {
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

bool ImageCheck::dynamic_tags() {
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

bool ImageCheck::strings() {
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

// ---- symbols and hash tables --------------------------------------------------------------------

bool ImageCheck::symbol_count() {
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

bool ImageCheck::versions() {
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

bool ImageCheck::symbols() {
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

}  // namespace gpuplug::support::detail::elf
