// SPDX-License-Identifier: Apache-2.0
// Internal to gpuplug_support: what the ELF checks of gpuplug/support/elf_image.hpp share (bounds
// arithmetic, the names messages use, the header check) and ImageCheck, the whole-image check,
// whose parts are defined in the files of support/elf/ named after what they check.
#pragma once

#include <elf.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpuplug/support/elf_image.hpp"
#include "gpuplug/support/text.hpp"

namespace gpuplug::support::detail::elf {

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
/// The machine's names ("x86-64", "EM_X86_64"), or nullptr for a machine this file does not know.
const MachineName* find_machine(std::uint16_t machine) noexcept;
/// "PT_LOAD", or "type 0x..." for a type this file does not know.
std::string segment_type_name(std::uint32_t type);
/// "DT_NEEDED", or "tag 0x..." for a tag this file does not know.
std::string tag_name(std::int64_t tag);
/// Tags whose value is an offset into the string table.
bool is_string_tag(std::int64_t tag) noexcept;
/// Tags that may appear more than once.
bool is_repeatable_tag(std::int64_t tag) noexcept;

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
/// Describes relocation `type` for `machine`. A type missing from a machine's table is refused
/// (ld.so would fail on it); machines without a table get a generic answer (8 bytes written,
/// nothing else known).
RelocKind reloc_kind(std::uint16_t machine, std::uint32_t type);
/// Whether reloc_kind has a table for `machine` (x86-64 and aarch64).
bool knows_reloc_types(std::uint16_t machine) noexcept;

/// The ELF header checks shared by both entry points; "" when `head` passes. `file_size`, when
/// known, bounds the program and section header tables.
std::string check_header(std::span<const std::byte> head, std::optional<std::uint64_t> file_size);

/// The whole-image check: one object per image, run once. See validate_elf_shared_object.
class ImageCheck {
 public:
  explicit ImageCheck(std::span<const std::byte> image) : image_(image), size_(image.size()) {}

  std::string run();

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

  bool fail(std::string defect);

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

  std::string ph_name(std::size_t i) const;
  std::string load_name(const Load& l) const;

  /// The PT_LOAD whose memory holds `addr`, or nullptr. PT_LOADs are sorted and disjoint.
  const Load* load_at(std::uint64_t addr) const;

  /// Why [addr, addr + size) is not where ld.so can use it, or "" when it is: inside one
  /// PT_LOAD's memory, from the file when `need_file` (ld.so reads it before anything else could
  /// have written it), in a segment with the p_flags bits `need_flags`.
  std::string placement(std::uint64_t addr, std::uint64_t size, bool need_file,
                        std::uint32_t need_flags) const;

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

  const Tag* tag(std::int64_t t) const;
  std::string tag_where(std::int64_t t) const;

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

  const Section* section_at(std::uint64_t addr, std::uint32_t type) const;
  const Section* first_section(std::uint32_t type) const;
  static std::string section_name(const Section& s, std::size_t i);
  std::string section_name(const Section& s) const;

  // ---- program headers -------------------------------------------------------------------------

  bool program_headers();

  /// Notes in the file at [offset, offset + size), aligned to `alignment`.
  bool notes(const std::string& who, std::uint64_t offset, std::uint64_t size,
             std::uint64_t alignment);

  /// The segment `i` is inside the file-backed part of a PT_LOAD, which maps its p_offset.
  bool in_load_as_in_file(std::size_t i, std::uint64_t size, std::uint32_t need_flags = 0);

  bool segments();

  // ---- the dynamic section ---------------------------------------------------------------------

  bool dynamic_entries();

  bool dynamic_tags();

  bool strings();

  // ---- section headers: a second witness -------------------------------------------------------

  /// ld.so never reads section headers, but a linker writes them from the same layout as the
  /// dynamic section. Where an image has them they must agree with it: that catches a pointer
  /// that moved yet still lands inside a segment (DT_INIT a few bytes into the code, DT_SYMTAB
  /// shifted onto other data), which no bounds check can see.
  bool sections();

  /// Adds the start of every function with unwind information: the binary-search table of
  /// PT_GNU_EH_FRAME (.eh_frame_hdr) in the encoding GNU ld and lld write (datarel sdata4 pairs).
  /// A stripped object linked with -init=<function> names its DT_INIT nowhere else. Other
  /// encodings add nothing.
  void eh_frame_function_starts();

  bool in_code_section(std::uint64_t addr) const;

  // ---- symbols and hash tables -----------------------------------------------------------------

  /// How many symbols DT_SYMTAB holds: what the section says when there is one, else what the
  /// hash tables index (ld.so reads no further than they lead it).
  bool symbol_count();

  bool versions();

  bool symbols();

  // ---- relocations -----------------------------------------------------------------------------

  bool in_slot_arrays(std::uint64_t addr, std::uint64_t width) const;

  bool rela_table(std::int64_t start_tag, std::int64_t size_tag);

  bool relr_table();

  bool relocations();

  // ---- code ld.so calls ------------------------------------------------------------------------

  /// `addr` is where ld.so will call: in an executable PT_LOAD, and where the section headers can
  /// tell, inside a code section at the start of a function (`need_start`).
  bool code_address(const std::string& what, std::uint64_t addr, bool need_start);

  bool code_pointers();

  bool other_addresses();

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

}  // namespace gpuplug::support::detail::elf
