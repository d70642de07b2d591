// SPDX-License-Identifier: Apache-2.0
// HIP module preflight: the runtime's choice among an offload bundle's code objects, and what the
// chosen one defines.
#include "preflight.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "gpuplug/support/elf_symbols.hpp"
#include "image.hpp"

namespace gpuplug::hip {
namespace {

constexpr std::uint8_t kSttObject = 1;

/// EF_AMDGPU_MACH values (LLVM's AMDGPUUsage, "AMDGPU ELF Header") of the processors ROCm ships.
struct Mach {
  std::uint32_t value;
  const char* processor;
};
constexpr std::array<Mach, 22> kMachs{{
    {0x02c, "gfx900"},  {0x02f, "gfx906"},  {0x030, "gfx908"},  {0x03f, "gfx90a"},
    {0x040, "gfx940"},  {0x04b, "gfx941"},  {0x04c, "gfx942"},  {0x04f, "gfx950"},
    {0x033, "gfx1010"}, {0x034, "gfx1011"}, {0x035, "gfx1012"}, {0x036, "gfx1030"},
    {0x037, "gfx1031"}, {0x038, "gfx1032"}, {0x039, "gfx1033"}, {0x03a, "gfx1034"},
    {0x03e, "gfx1035"}, {0x041, "gfx1100"}, {0x046, "gfx1101"}, {0x047, "gfx1102"},
    {0x048, "gfx1200"}, {0x04e, "gfx1201"},
}};

/// A code object's kernels and globals into `out`; false (with `why`) when its ELF is malformed.
bool read_code_object(std::span<const std::byte> code, sdk::ModuleInspection& out,
                      std::string& why) {
  constexpr std::array<std::uint32_t, 2> tables{support::elf_sht_symtab, support::elf_sht_dynsym};
  const auto elf = support::read_elf64_symbols(code, tables, why);
  if (!elf) return false;
  if (elf->machine != kElfMachineAmdgpu) {
    why = "an ELF file for machine " + std::to_string(elf->machine) +
          ", not an AMDGPU code object (224)";
    return false;
  }
  std::vector<ElfSymbol> kernels_in;
  for (const support::ElfSymbolInfo& s : elf->symbols) {
    kernels_in.push_back({s.name, s.type, s.binding, s.section, s.value, s.size});
    if (s.type == kSttObject && s.section != 0 && s.binding != 0 /* STB_LOCAL */ &&
        !s.name.ends_with(".kd") && !s.name.empty()) {
      const auto value = support::elf_symbol_u32(code, *elf, s);
      out.symbols.push_back(value ? s.name + "=" + std::to_string(*value) : s.name);
    }
  }
  out.functions = kernel_names(kernels_in);
  std::sort(out.symbols.begin(), out.symbols.end());
  out.symbols.erase(std::unique(out.symbols.begin(), out.symbols.end()), out.symbols.end());
  return true;
}

}  // namespace

std::string code_object_target(std::span<const std::byte> code_object) {
  if (elf_machine(code_object) != kElfMachineAmdgpu) return "";
  const std::uint32_t flags = static_cast<std::uint32_t>(code_object[48]) |
                              static_cast<std::uint32_t>(code_object[49]) << 8 |
                              static_cast<std::uint32_t>(code_object[50]) << 16 |
                              static_cast<std::uint32_t>(code_object[51]) << 24;
  const std::uint32_t mach = flags & 0xFFu;
  const auto it = std::find_if(kMachs.begin(), kMachs.end(),
                               [&](const Mach& m) { return m.value == mach; });
  if (it == kMachs.end()) return "";
  std::string target = it->processor;
  // Code object v4+ (EI_ABIVERSION >= 2): sramecc bits 10..11, xnack bits 8..9; 1 any, 2 off,
  // 3 on. Named in LLVM's order (sramecc before xnack), as gcnArchName does.
  if (static_cast<unsigned char>(code_object[8]) >= 2) {
    const std::uint32_t sramecc = (flags >> 10) & 3u;
    const std::uint32_t xnack = (flags >> 8) & 3u;
    if (sramecc >= 2) target += sramecc == 3 ? ":sramecc+" : ":sramecc-";
    if (xnack >= 2) target += xnack == 3 ? ":xnack+" : ":xnack-";
  }
  return target;
}

void inspect_image(std::span<const std::byte> image, std::string_view device_arch,
                   sdk::ModuleInspection& out) {
  if (const std::string problem = image_problem(image); !problem.empty())
    sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, problem);
  if (is_compressed_bundle(image))
    sdk::fail(GPUPLUG_STATUS_UNSUPPORTED,
              "a compressed offload bundle (CCOB): only the HIP runtime unpacks it; rebuild "
              "without --offload-compress to inspect it");

  // (target id, code object) in file order.
  std::vector<std::pair<std::string, std::span<const std::byte>>> objects;
  if (is_elf(image)) {
    out.format = "code object";
    std::string target = code_object_target(image);
    // One word (targets are a space-separated list); the reason then says it is unknown.
    if (target.empty()) target = "gfx-unknown";
    objects.emplace_back(std::move(target), image);
  } else {
    out.format = "offload bundle";
    const auto entries = parse_offload_bundle(image);
    if (!entries) sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, "malformed clang offload bundle");
    for (const BundleEntry& e : *entries)
      if (const std::string_view t = amdgpu_target_of(e.id); !t.empty() && !e.data.empty())
        objects.emplace_back(std::string(t), e.data);
    if (objects.empty())
      sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, "an offload bundle without AMDGPU code objects");
  }
  for (const auto& o : objects) out.targets.push_back(o.first);

  const std::pair<std::string, std::span<const std::byte>>* chosen = nullptr;
  if (!device_arch.empty())
    for (const auto& o : objects)
      if (target_matches(o.first, device_arch)) {
        chosen = &o;
        break;
      }
  if (chosen != nullptr) {
    out.loadable = true;
    out.target = chosen->first;
  } else if (device_arch.empty()) {
    out.reason = "the runtime did not report the device's gcnArchName, so no target can be chosen";
  } else {
    std::string carried;
    for (const auto& t : out.targets) carried += (carried.empty() ? "" : ", ") + t;
    out.reason = "no code object for " + std::string(device_arch) +
                 " (a target loads only on its own processor, with matching xnack/sramecc); the "
                 "image carries " + carried;
  }
  // The kernels: of the code object that loads, else of the first (same source, other target).
  const auto& defs = chosen != nullptr ? *chosen : objects.front();
  std::string why;
  if (!read_code_object(defs.second, out, why))
    sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, "the " + defs.first + " code object: " + why);
}

}  // namespace gpuplug::hip
