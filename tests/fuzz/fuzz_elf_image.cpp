// SPDX-License-Identifier: Apache-2.0
// Fuzz target: gpuplug::support::validate_elf_shared_object and validate_elf_header, the checks a
// kernel module (bytes from anywhere) and a plugin file pass before dlopen. Seeded with the real
// host kernel modules of the build.
//
// Properties: the validator reads nothing outside the image (ASan) and never throws; a refusal
// names its defect in printable ASCII of bounded length; the header-only check agrees with the
// whole check (a header it refuses is refused by the whole check for the same reason, and an
// accepted image has an accepted header); an accepted image really has what ld.so trusts
// without checking (program header table and PT_LOADs inside the image, one PT_DYNAMIC with a
// DT_NULL), checked here independently; cutting an accepted image short of its last file-backed
// byte makes it refused; and the verdict does not change when asked twice.
#include <elf.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "gpuplug/support/elf_image.hpp"

namespace {

using gpuplug::fuzz::broken;
using gpuplug::support::elf_header_size;
using gpuplug::support::validate_elf_header;
using gpuplug::support::validate_elf_shared_object;

/// Real modules are 20 to 40 KB (more with sanitizers); scripts/fuzz passes -max_len=4096 to
/// every target, which would cut each seed off before its segments.
constexpr std::size_t kMaxLen = std::size_t{256} * 1024;

template <class T>
bool read(std::span<const std::byte> image, std::uint64_t offset, T& out) {
  if (offset > image.size() || sizeof(T) > image.size() - offset) return false;
  std::memcpy(&out, image.data() + offset, sizeof out);
  return true;
}

/// An independent minimal check of what an accepted image must have; "" when it holds. Returns
/// in `file_end` the end of the last file-backed byte of a PT_LOAD.
std::string accepted_image_problem(std::span<const std::byte> image, std::uint64_t& file_end) {
  Elf64_Ehdr eh;
  if (!read(image, 0, eh)) return "no ELF header";
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0) return "bad program header size";
  const std::uint64_t table = std::uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr);
  if (eh.e_phoff > image.size() || table > image.size() - eh.e_phoff)
    return "program header table outside the image";
  int dynamics = 0, loads = 0;
  file_end = 0;
  for (std::uint16_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    read(image, eh.e_phoff + std::uint64_t{i} * sizeof ph, ph);
    if (ph.p_type == PT_LOAD) {
      ++loads;
      if (ph.p_offset > image.size() || ph.p_filesz > image.size() - ph.p_offset)
        return "a PT_LOAD outside the image";
      if (ph.p_filesz > ph.p_memsz) return "a PT_LOAD with p_filesz > p_memsz";
      if (ph.p_filesz != 0 && ph.p_offset + ph.p_filesz > file_end)
        file_end = ph.p_offset + ph.p_filesz;
    } else if (ph.p_type == PT_DYNAMIC) {
      ++dynamics;
      if (ph.p_offset > image.size() || ph.p_filesz > image.size() - ph.p_offset)
        return "PT_DYNAMIC outside the image";
      bool terminated = false;
      for (std::uint64_t k = 0; k + sizeof(Elf64_Dyn) <= ph.p_filesz; k += sizeof(Elf64_Dyn)) {
        Elf64_Dyn d;
        read(image, ph.p_offset + k, d);
        if (d.d_tag == DT_NULL) {
          terminated = true;
          break;
        }
      }
      if (!terminated) return "no DT_NULL in PT_DYNAMIC";
    }
  }
  if (loads == 0) return "no PT_LOAD";
  if (dynamics != 1) return std::to_string(dynamics) + " PT_DYNAMIC";
  return {};
}

void check_defect_text(const std::string& defect, const char* which) {
  if (defect.size() > 2000)
    broken(std::string(which) + ": a defect of " + std::to_string(defect.size()) + " characters");
  for (const char c : defect) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f)
      broken(std::string(which) + ": unprintable byte " + std::to_string(u) + " in: " + defect);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // Raise a -max_len below kMaxLen (the last flag wins); replays pass no flags, so nothing changes.
  bool too_small = false;
  for (int i = 1; i < *argc; ++i)
    if (std::strncmp((*argv)[i], "-max_len=", 9) == 0 &&
        std::strtoull((*argv)[i] + 9, nullptr, 10) < kMaxLen)
      too_small = true;
  if (!too_small) return 0;
  static std::vector<char*> args;
  static std::string flag = "-max_len=" + std::to_string(kMaxLen);
  args.assign(*argv, *argv + *argc);
  args.push_back(flag.data());
  args.push_back(nullptr);
  *argc = static_cast<int>(args.size()) - 1;
  *argv = args.data();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> image(reinterpret_cast<const std::byte*>(data), size);
  const auto verdict = validate_elf_shared_object(image);
  const auto header =
      validate_elf_header(image.first(std::min(size, elf_header_size)), std::uint64_t{size});
  check_defect_text(verdict.defect, "validate_elf_shared_object");
  check_defect_text(header.defect, "validate_elf_header");

  if (!header.ok()) {
    if (verdict.defect != header.defect)
      broken("the header check refuses (" + header.defect +
             ") but the whole check says: " + (verdict.ok() ? std::string("ok") : verdict.defect));
    return 0;
  }
  if (!verdict.ok()) {
    if (verdict.defect.empty()) broken("a refusal without a defect");
    return 0;
  }

  // Accepted: independently, what ld.so trusts holds.
  std::uint64_t file_end = 0;
  if (const std::string problem = accepted_image_problem(image, file_end); !problem.empty())
    broken("accepted an image with " + problem);
  if (validate_elf_shared_object(image).defect != verdict.defect)
    broken("a second check of the same image disagrees");
  if (file_end != 0 && validate_elf_shared_object(image.first(file_end - 1)).ok())
    broken("accepted the image cut short of its last file-backed byte (" +
           std::to_string(file_end - 1) + " of " + std::to_string(size) + " bytes)");
  return 0;
}
