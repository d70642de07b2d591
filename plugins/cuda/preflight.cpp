// SPDX-License-Identifier: Apache-2.0
// CUDA module preflight: the driver's choice among a fatbin's SASS and PTX, and what it defines.
#include "preflight.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplug/support/elf_symbols.hpp"
#include "image.hpp"

namespace gpuplug::cuda {
namespace {

constexpr std::uint16_t kEmCuda = 190;
constexpr std::uint8_t kSttObject = 1;
constexpr std::uint8_t kSttFunc = 2;

std::string sass_name(std::uint32_t arch) { return "sm_" + std::to_string(arch); }
std::string ptx_name(std::uint32_t arch) { return "compute_" + std::to_string(arch); }

/// A cubin's kernels and globals into `out`; false (with `why`) when its ELF is malformed.
bool read_cubin(std::span<const std::byte> cubin, sdk::ModuleInspection& out, std::string& why) {
  constexpr std::array<std::uint32_t, 1> tables{support::elf_sht_symtab};
  const auto elf = support::read_elf64_symbols(cubin, tables, why);
  if (!elf) return false;
  if (elf->machine != kEmCuda) {
    why = "an ELF file for " + std::to_string(elf->machine) + " (e_machine), not a CUDA cubin (190)";
    return false;
  }
  for (const support::ElfSymbolInfo& s : elf->symbols) {
    if (s.section == 0 || s.section >= elf->sections.size() || s.name.empty()) continue;
    if (s.type == kSttFunc && elf->section_names[s.section] == ".text." + s.name) {
      out.functions.push_back(s.name);
    } else if (s.type == kSttObject) {  // local too: nvcc makes __device__ globals local
      const auto value = support::elf_symbol_u32(cubin, *elf, s);
      out.symbols.push_back(value ? s.name + "=" + std::to_string(*value) : s.name);
    }
  }
  return true;
}

/// Whitespace-separated words of one PTX line, comments (//) dropped.
std::vector<std::string_view> words(std::string_view line) {
  if (const auto c = line.find("//"); c != std::string_view::npos) line = line.substr(0, c);
  std::vector<std::string_view> out;
  std::size_t at = 0;
  while (at < line.size()) {
    while (at < line.size() && (line[at] == ' ' || line[at] == '\t' || line[at] == '\r')) ++at;
    std::size_t end = at;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t' && line[end] != '\r') ++end;
    if (end > at) out.push_back(line.substr(at, end - at));
    at = end;
  }
  return out;
}

/// A PTX identifier at the start of `w` ("gemm_f32(" -> "gemm_f32"; "x[4];" -> "x").
std::string_view identifier(std::string_view w) {
  std::size_t n = 0;
  while (n < w.size() && (std::isalnum(static_cast<unsigned char>(w[n])) || w[n] == '_' ||
                          w[n] == '$' || w[n] == '%'))
    ++n;
  return w.substr(0, n);
}

std::optional<std::uint32_t> number(std::string_view w) {
  while (!w.empty() && (w.back() == ';' || w.back() == ',')) w.remove_suffix(1);
  if (w.empty() || w.size() > 10) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : w) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v > 0xFFFFFFFFu) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

/// PTX text: its .target (nullopt when it has none: then it is not PTX) and, into `out`, its
/// .entry kernels and .global/.const variables.
std::optional<std::uint32_t> read_ptx(std::span<const std::byte> image, sdk::ModuleInspection& out) {
  std::string_view text(reinterpret_cast<const char*>(image.data()), image.size());
  text = text.substr(0, std::min(text.find('\0'), text.size()));  // the JIT stops there too
  std::optional<std::uint32_t> target;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const auto w = words(text.substr(at, end - at));
    at = end + 1;
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (w[i] == ".target" && i + 1 < w.size() && !target) {
        const std::string_view t = w[i + 1];
        // "sm_90", "sm_90a" (arch-specific): the number is what the JIT compares.
        if (t.starts_with("sm_")) {
          std::string_view digits = t.substr(3);
          std::size_t n = 0;
          while (n < digits.size() && digits[n] >= '0' && digits[n] <= '9') ++n;
          target = number(digits.substr(0, n));
        }
        break;
      }
      if (w[i] == ".entry" && i + 1 < w.size()) {
        if (const auto name = identifier(w[i + 1]); !name.empty()) out.functions.emplace_back(name);
        break;
      }
      if (w[i] == ".extern") break;  // a declaration, defined elsewhere
      if (w[i] == ".global" || w[i] == ".const") {
        // ".visible .global .align 4 .u32 gemm_f32_n_tile = 64;"
        std::size_t k = i + 1;
        while (k < w.size() && w[k].starts_with(".")) ++k;  // .align 4 leaves "4"
        if (k < w.size() && number(w[k]) && k > 0 && w[k - 1] == ".align") {
          ++k;
          while (k < w.size() && w[k].starts_with(".")) ++k;
        }
        if (k >= w.size()) break;
        const std::string_view type = w[k - 1];
        const std::string_view name = identifier(w[k]);
        if (name.empty()) break;
        const bool scalar32 = (type == ".u32" || type == ".b32" || type == ".s32") &&
                              w[k].find('[') == std::string_view::npos;
        if (scalar32 && k + 2 < w.size() && w[k + 1] == "=") {
          if (const auto v = number(w[k + 2])) {
            out.symbols.push_back(std::string(name) + "=" + std::to_string(*v));
            break;
          }
        }
        out.symbols.emplace_back(name);
        break;
      }
    }
  }
  return target;
}

void sort_unique(std::vector<std::string>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

/// The driver's choice for `cc` among `entries`; fills target/loadable/reason.
const FatbinEntry* choose(const std::vector<FatbinEntry>& entries, ComputeCapability cc,
                          sdk::ModuleInspection& out) {
  const auto device = static_cast<std::uint32_t>(cc.major * 10 + cc.minor);
  const FatbinEntry* best = nullptr;
  for (const FatbinEntry& e : entries)
    if (!e.ptx && static_cast<int>(e.arch / 10) == cc.major &&
        static_cast<int>(e.arch % 10) <= cc.minor && (best == nullptr || e.arch > best->arch))
      best = &e;
  if (best != nullptr) {
    out.loadable = true;
    out.target = sass_name(best->arch) + " (SASS)";
    return best;
  }
  for (const FatbinEntry& e : entries)
    if (e.ptx && e.arch <= device && (best == nullptr || e.arch > best->arch)) best = &e;
  if (best != nullptr) {
    out.loadable = true;
    out.target = ptx_name(best->arch) + " (PTX, JIT)";
    return best;
  }
  const std::string dev = std::to_string(device);
  out.reason = "no SASS for sm_" + dev + " (SASS runs only on GPUs of its own major, sm_" +
               std::to_string(cc.major) + "0 up to sm_" + dev + ") and no PTX at or below compute_" +
               dev + "; the image carries " +
               (out.targets.empty() ? std::string("nothing") : [&] {
                 std::string t;
                 for (const auto& x : out.targets) t += (t.empty() ? "" : ", ") + x;
                 return t;
               }());
  return nullptr;
}

}  // namespace

void inspect_image(std::span<const std::byte> image, ComputeCapability cc,
                   sdk::ModuleInspection& out) {
  // The checks load_module makes: what the driver would be refused is refused here too.
  if (const std::string problem = image_problem(image); !problem.empty())
    sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, problem);
  std::string why;
  std::vector<FatbinEntry> entries;
  switch (image_kind(image)) {
    case ImageKind::fatbin: {
      out.format = "fatbin";
      auto parsed = fatbin_entries(image, why);
      if (!parsed) sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, why);
      entries = std::move(*parsed);
      break;
    }
    case ImageKind::cubin: {
      out.format = "cubin";
      const auto arch = cubin_arch(image);
      if (!arch) sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, "not a 64-bit ELF cubin");
      entries.push_back({false, *arch, false, image});
      break;
    }
    case ImageKind::ptx: {
      out.format = "ptx";
      sdk::ModuleInspection scratch;
      const auto target = read_ptx(image, scratch);
      if (!target)
        sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE,
                  "not a CUDA module: neither a fatbin (0xBA55ED50), a cubin (ELF) nor PTX text "
                  "with a .target sm_XY directive");
      entries.push_back({true, *target, false, image});
      break;
    }
  }
  // SASS first, then PTX, each by architecture: the order the driver prefers them in.
  std::vector<std::pair<bool, std::uint32_t>> kinds;
  for (const FatbinEntry& e : entries) kinds.emplace_back(e.ptx, e.arch);
  std::sort(kinds.begin(), kinds.end());
  kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());
  for (const auto& [ptx, arch] : kinds) out.targets.push_back(ptx ? ptx_name(arch) : sass_name(arch));

  const FatbinEntry* chosen = choose(entries, cc, out);
  // What the module defines: from the entry that loads when it can be read, else from the first
  // readable one (every entry of one fatbin is the same source compiled for another target).
  std::vector<const FatbinEntry*> order;
  if (chosen != nullptr && !chosen->compressed) order.push_back(chosen);
  for (const FatbinEntry& e : entries)
    if (!e.compressed && &e != chosen && !e.ptx) order.push_back(&e);
  for (const FatbinEntry& e : entries)
    if (!e.compressed && &e != chosen && e.ptx) order.push_back(&e);
  for (const FatbinEntry* e : order) {
    sdk::ModuleInspection defs;
    if (e->ptx) {
      read_ptx(e->payload, defs);
    } else if (!read_cubin(e->payload, defs, why)) {
      sdk::fail(GPUPLUG_STATUS_INVALID_IMAGE, "the " + sass_name(e->arch) + " cubin: " + why);
    }
    out.functions = std::move(defs.functions);
    out.symbols = std::move(defs.symbols);
    break;
  }
  sort_unique(out.functions);
  sort_unique(out.symbols);
}

}  // namespace gpuplug::cuda
