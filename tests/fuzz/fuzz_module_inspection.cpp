// SPDX-License-Identifier: Apache-2.0
// Fuzz target: kernel-binary preflight, the parsers inspect_module runs on module
// bytes from anywhere: support::read_elf64_symbols / elf_symbol_u32, the host plugin's
// inspect_module, the cuda plugin's fatbin / cubin / PTX reading with a compute capability, and
// the hip plugin's bundle / code object reading with a gcnArchName. Seeded with the build's
// host modules, CUDA fatbins and HIP bundles.
//
// Properties: nothing is read outside the image (ASan) and nothing but sdk::Failure escapes; a
// refusal is INVALID_IMAGE (or, for a compressed HIP bundle, UNSUPPORTED) with a reason; an
// answer that loads names a target the image carries and no reason; one that does not load
// gives a reason; every 4-byte value read lies inside the image; the answer does not change
// when asked twice.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../../plugins/cuda/preflight.hpp"
#include "../../plugins/host/preflight.hpp"
#include "fuzz_input.hpp"
#include "gpuplug/support/elf_symbols.hpp"
#ifdef GPUPLUG_FUZZ_HIP
#include "../../plugins/hip/preflight.hpp"
#endif

namespace {

using gpuplug::fuzz::broken;
using gpuplug::sdk::ModuleInspection;

/// The answer as one comparable string.
std::string summary(const ModuleInspection& m) {
  std::string s = std::to_string(m.loadable) + "|" + m.format + "|" + m.target + "|" + m.reason;
  for (const auto* list : {&m.targets, &m.functions, &m.symbols})
    for (const std::string& item : *list) s += "|" + item;
  return s;
}

/// Runs `inspect` twice and checks the properties above; `who` names the parser.
template <class Inspect>
void check(const char* who, Inspect&& inspect) {
  std::string first;
  for (int round = 0; round < 2; ++round) {
    ModuleInspection m;
    std::string outcome;
    try {
      inspect(m);
      if (m.loadable) {
        if (m.target.empty() || !m.reason.empty())
          broken(std::string(who) + ": loadable without a target, or with a reason");
        bool carried = false;
        for (const std::string& t : m.targets)
          carried = carried || std::string_view(m.target).starts_with(t);
        if (!carried) broken(std::string(who) + ": target '" + m.target + "' is not carried");
      } else if (m.reason.empty()) {
        broken(std::string(who) + ": not loadable, and no reason");
      }
      outcome = summary(m);
    } catch (const gpuplug::sdk::Failure& f) {
      if (f.status() != GPUPLUG_STATUS_INVALID_IMAGE && f.status() != GPUPLUG_STATUS_UNSUPPORTED)
        broken(std::string(who) + ": refused with status " + std::to_string(f.status()));
      if (std::string_view(f.what()).empty()) broken(std::string(who) + ": refused without a reason");
      outcome = "refused: " + std::string(f.what());
    }
    if (round == 0)
      first = outcome;
    else if (outcome != first)
      broken(std::string(who) + ": a second inspection disagrees");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A copy of exactly `size` bytes: ASan then sees any read past the end.
  const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                                     reinterpret_cast<const std::byte*>(data) + size);
  const std::span<const std::byte> image(bytes);

  std::string why;
  constexpr std::uint32_t tables[] = {gpuplug::support::elf_sht_symtab,
                                      gpuplug::support::elf_sht_dynsym};
  if (const auto elf = gpuplug::support::read_elf64_symbols(image, tables, why)) {
    if (elf->section_names.size() != elf->sections.size()) broken("a section without a name slot");
    for (const auto& s : elf->symbols) (void)gpuplug::support::elf_symbol_u32(image, *elf, s);
  } else if (why.empty()) {
    broken("read_elf64_symbols refused without a reason");
  }

  check("host", [&](ModuleInspection& m) { gpuplug::host::inspect_module(image, m); });
  // The compute capability from the first byte: 5.0 .. 12.x, every rule reachable.
  const int cc = size == 0 ? 90 : 50 + data[0] % 80;
  check("cuda", [&](ModuleInspection& m) {
    gpuplug::cuda::inspect_image(image, {cc / 10, cc % 10}, m);
  });
#ifdef GPUPLUG_FUZZ_HIP
  static constexpr const char* kArchs[] = {"gfx942:sramecc+:xnack-", "gfx90a:sramecc-:xnack+",
                                           "gfx90a:sramecc+:xnack-", "gfx1030", ""};
  const char* arch = kArchs[size == 0 ? 0 : data[size - 1] % 5];
  check("hip", [&](ModuleInspection& m) { gpuplug::hip::inspect_image(image, arch, m); });
#endif
  return 0;
}
