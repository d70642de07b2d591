// SPDX-License-Identifier: Apache-2.0
// Host module preflight: the ELF's machine, exports and 4-byte values, without dlopen.
#include "preflight.hpp"

#include <elf.h>

#include <algorithm>
#include <array>
#include <string>

#include "gpuplug/support/elf_image.hpp"
#include "gpuplug/support/elf_symbols.hpp"
#include "image.hpp"

namespace gpuplug::host {
namespace {

/// The machine as a target name ("x86_64", as uname -m and compilers' triples spell it).
std::string target_name(std::uint16_t machine) {
  switch (machine) {
    case EM_X86_64:
      return "x86_64";
    case EM_AARCH64:
      return "aarch64";
    case EM_PPC64:
      return "ppc64le";
    case EM_RISCV:
      return "riscv64";
    case EM_386:
      return "i386";
    case EM_ARM:
      return "arm";
    case EM_S390:
      return "s390x";
    case 190:  // EM_CUDA
      return "cuda";
    case 224:  // EM_AMDGPU
      return "amdgcn";
    default:  // one word: targets are a space-separated list
      return "e_machine_" + std::to_string(machine);
  }
}

}  // namespace

void inspect_module(std::span<const std::byte> image, sdk::ModuleInspection& out) {
  // .dynsym: what dlsym can find, which is what a launch can name.
  constexpr std::array<std::uint32_t, 1> tables{support::elf_sht_dynsym};
  std::string why;
  const auto elf = support::read_elf64_symbols(image, tables, why);
  if (!elf) sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, "not a host module: " + why);
  out.format = elf->type == ET_DYN ? "ELF shared object"
                                   : "ELF file of type " + std::to_string(elf->type);
  out.targets = {target_name(elf->machine)};
  for (const support::ElfSymbolInfo& s : elf->symbols) {
    if (s.section == SHN_UNDEF || s.name.empty() || s.name[0] == '_') continue;  // toolchain's
    if ((s.binding != STB_GLOBAL && s.binding != STB_WEAK) || s.visibility == STV_HIDDEN ||
        s.visibility == STV_INTERNAL)
      continue;
    if (s.type == STT_FUNC) {
      out.functions.push_back(s.name);
    } else if (s.type == STT_OBJECT) {
      const auto value = support::elf_symbol_u32(image, *elf, s);
      out.symbols.push_back(value ? s.name + "=" + std::to_string(*value) : s.name);
    }
  }
  std::sort(out.functions.begin(), out.functions.end());
  out.functions.erase(std::unique(out.functions.begin(), out.functions.end()), out.functions.end());
  std::sort(out.symbols.begin(), out.symbols.end());
  out.symbols.erase(std::unique(out.symbols.begin(), out.symbols.end()), out.symbols.end());

  if (elf->type != ET_DYN) {
    out.reason = "an ELF file of type " + std::to_string(elf->type) +
                 ", not a shared object (build the module with -shared)";
    return;
  }
  if (elf->machine != support::host_elf_machine) {
    out.reason = "built for " + target_name(elf->machine) + "; this machine is " +
                 target_name(support::host_elf_machine);
    return;
  }
  // For this machine: the same checks load_module makes before dlopen sees the bytes.
  if (const support::ElfVerdict v = support::validate_elf_shared_object(image); !v.ok())
    sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, "dlopen would be refused this module: " + v.defect);
  if (std::string problem = image_problem(image); !problem.empty())
    sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, "dlopen would be refused this module: " + problem);
  out.loadable = true;
  out.target = target_name(elf->machine);
}

}  // namespace gpuplug::host
