// SPDX-License-Identifier: Apache-2.0
// ImageCheck's order of checks (run) and the primitives every part uses: failing with a defect,
// where an address lies, the dynamic tags and sections by address; validate_elf_shared_object.
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

#include "gpuplug/support/elf_image.hpp"
#include "gpuplug/support/text.hpp"
#include "image_check.hpp"

namespace gpuplug::support::detail::elf {

// ---- primitives ---------------------------------------------------------------------------------

std::string ImageCheck::run() {
  if (std::string d = check_header(image_, size_); !d.empty()) return d;
  eh_ = at<Elf64_Ehdr>(0);
  if (program_headers() && segments() && dynamic_entries() && dynamic_tags() && strings() &&
      sections() && symbol_count() && versions() && symbols() && relocations() &&
      code_pointers() && other_addresses())
    return {};
  return defect_;
}

bool ImageCheck::fail(std::string defect) {
  defect_ = std::move(defect);
  return false;
}

std::string ImageCheck::ph_name(std::size_t i) const {
  return "program header " + std::to_string(i) + " (" + segment_type_name(phdrs_[i].p_type) + ")";
}

std::string ImageCheck::load_name(const Load& l) const {
  return "program header " + std::to_string(l.index) + " (PT_LOAD " + range(l.vaddr, l.memsz) +
         ")";
}

const ImageCheck::Load* ImageCheck::load_at(std::uint64_t addr) const {
  auto it = std::upper_bound(loads_.begin(), loads_.end(), addr,
                             [](std::uint64_t a, const Load& l) { return a < l.vaddr; });
  if (it == loads_.begin()) return nullptr;
  --it;
  return addr - it->vaddr < it->memsz ? &*it : nullptr;
}

std::string ImageCheck::placement(std::uint64_t addr, std::uint64_t size, bool need_file,
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

const ImageCheck::Tag* ImageCheck::tag(std::int64_t t) const {
  const auto it = tags_.find(t);
  return it == tags_.end() ? nullptr : &it->second;
}

std::string ImageCheck::tag_where(std::int64_t t) const {
  return tag_name(t) + " (dynamic entry " + std::to_string(tag(t)->entry) + ")";
}

const ImageCheck::Section* ImageCheck::section_at(std::uint64_t addr, std::uint32_t type) const {
  for (const auto& s : sections_)
    if (s.h.sh_type == type && (s.h.sh_flags & SHF_ALLOC) != 0 && s.h.sh_addr == addr) return &s;
  return nullptr;
}

const ImageCheck::Section* ImageCheck::first_section(std::uint32_t type) const {
  for (const auto& s : sections_)
    if (s.h.sh_type == type && (s.h.sh_flags & SHF_ALLOC) != 0) return &s;
  return nullptr;
}

std::string ImageCheck::section_name(const Section& s, std::size_t i) {
  return "section " + std::to_string(i) + (s.name.empty() ? "" : " (" + s.name + ")");
}

std::string ImageCheck::section_name(const Section& s) const {
  return section_name(s, static_cast<std::size_t>(&s - sections_.data()));
}

}  // namespace gpuplug::support::detail::elf

namespace gpuplug::support {

ElfVerdict validate_elf_shared_object(std::span<const std::byte> image) {
  return {detail::elf::ImageCheck(image).run()};
}

}  // namespace gpuplug::support
