// SPDX-License-Identifier: Apache-2.0
// The built HIP modules: one offload bundle each, holding an AMDGPU code object per target.

// Two independent readings of every kernels/hip bundle: clang-offload-bundler --list (the
// bundler the build joined the code objects with) and plugins/hip/image.hpp, the reader the
// plugin uses. Both must list every configured target; each code object must be an AMDGPU HSA ELF
// (EM_AMDGPU) of the code-object version its toolchain writes, for its exact processor
// (EF_AMDGPU_MACH) and XNACK setting, define the module's kernels, and publish the launch
// metadata (gemm's n_tile and a_e4m3) as 4-byte global objects. The readers' handling of
// malformed input is checked here too.

#define BOOST_TEST_MODULE test_hip_bundle
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gpuplug/support/files.hpp"
#include "image.hpp"

namespace hip = gpuplug::hip;

namespace {

std::vector<std::string> split_csv(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

const std::vector<std::string> kTargets = split_csv(GPUPLUG_HIP_TEST_TARGETS);
// The code-object version of each target's code object, in kTargets order (4: hipcc of ROCm 5,
// 5: clang-19 and ROCm 6+), as the configure step's check compile found it.
const std::vector<std::string> kCodeObjectVersions =
    split_csv(GPUPLUG_HIP_TEST_CODE_OBJECT_VERSIONS);
const std::vector<std::string> kModules = split_csv(GPUPLUG_HIP_TEST_MODULES);

// The kernels each module must define (sorted, as kernel_names returns them).
const std::map<std::string, std::vector<std::string>> kKernels = {
    {"axpy", {"axpy"}},
    {"gemm", {"gemm_a_e4m3", "gemm_f32"}},
    {"e4m3", {"cast_e4m3_f32", "cast_f32_e4m3"}},
    {"activation", {"bias_relu"}},
    {"sync", {"gate"}},
};

// Every kernel's <func>_args (<gpuplug/kernel_args.h>): its argument sizes, in bytes.
const std::map<std::string, std::vector<std::uint32_t>> kArgs = {
    {"axpy", {4, 4, 8, 8}},
    {"gemm_f32", {4, 4, 4, 8, 8, 8}},
    {"gemm_a_e4m3", {4, 4, 4, 8, 8, 8}},
    {"cast_f32_e4m3", {4, 8, 8}},
    {"cast_e4m3_f32", {4, 8, 8}},
    {"bias_relu", {4, 4, 8, 8}},
    {"gate", {8, 8, 1, 8}},
};

// The 4-byte metadata each module publishes, with its value.
const std::map<std::string, std::map<std::string, std::uint32_t>> kPublished = {
    {"gemm", {{"gemm_f32_n_tile", 64}, {"gemm_a_e4m3_n_tile", 64}, {"gemm_a_e4m3_a_e4m3", 1}}},
};

std::string bundle_path(const std::string& module) {
  return std::string(GPUPLUG_TEST_KERNEL_DIR) + "/hip/" + module + ".hsaco";
}

std::vector<std::byte> read_file(const std::string& path) {
  std::string why;
  auto bytes = gpuplug::support::read_file(path, why);
  BOOST_TEST_REQUIRE(bytes.has_value(), "cannot read " << path << ": " << why);
  return std::move(*bytes);
}

// `clang-offload-bundler --list --type=o --input=<path>`: one bundle id per line.
std::vector<std::string> bundler_list(const std::string& path) {
  const std::string command =
      std::string("'") + GPUPLUG_HIP_TEST_BUNDLER + "' --list --type=o --input='" + path + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  BOOST_TEST_REQUIRE(pipe != nullptr, "popen " << command);
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  BOOST_TEST_REQUIRE(status == 0, command << " failed: " << output);
  std::vector<std::string> lines;
  std::stringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

std::uint64_t le(const std::byte* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t(std::to_integer<unsigned>(p[i])) << (8 * i);
  return v;
}

// The bytes of a defined symbol, found through its section header (sh_addr, sh_offset): an
// independent path to the value, beside the plugin's hipModuleGetGlobal.
std::optional<std::uint32_t> read_u32_symbol(std::span<const std::byte> elf,
                                             const hip::ElfSymbol& sym, std::uint64_t at = 0) {
  const std::uint64_t shoff = le(elf.data() + 40, 8);
  const std::uint64_t shentsize = le(elf.data() + 58, 2);
  const std::uint64_t shnum = le(elf.data() + 60, 2);
  if (sym.section == 0 || sym.section >= shnum || sym.size < at + 4) return std::nullopt;
  const std::byte* sh = elf.data() + shoff + sym.section * shentsize;
  const std::uint64_t addr = le(sh + 16, 8);
  const std::uint64_t offset = le(sh + 24, 8);
  const std::uint64_t size = le(sh + 32, 8);
  if (sym.value < addr || sym.value + at + 4 > addr + size || offset + size > elf.size())
    return std::nullopt;
  return static_cast<std::uint32_t>(le(elf.data() + offset + (sym.value - addr) + at, 4));
}

// EF_AMDGPU_MACH (e_flags & 0xff) of the processors gpuplug builds for and their neighbours, from
// LLVM's ELF.h (llvm/BinaryFormat/ELF.h, EF_AMDGPU_MACH_AMDGCN_GFX*; llvm-readelf-19 -h agrees).
// A target whose processor is missing here fails: add its value.
const std::map<std::string, unsigned> kMach = {
    {"gfx908", 0x30},  {"gfx90a", 0x3f},  {"gfx940", 0x40},  {"gfx941", 0x4b},
    {"gfx942", 0x4c},  {"gfx950", 0x4f},  {"gfx1010", 0x33}, {"gfx1030", 0x36},
    {"gfx1100", 0x41}, {"gfx1150", 0x43}, {"gfx1200", 0x48}, {"gfx1201", 0x4e}};
// The v4+ feature fields of e_flags (EF_AMDGPU_FEATURE_XNACK_*_V4).
constexpr unsigned kXnackMask = 0x300, kXnackAny = 0x100, kXnackOff = 0x200, kXnackOn = 0x300;
constexpr unsigned kElfOsAbiAmdgpuHsa = 64;  // ELFOSABI_AMDGPU_HSA

}  // namespace

BOOST_AUTO_TEST_CASE(the_build_asked_for_targets_and_modules) {
  BOOST_TEST_MESSAGE("targets: " << GPUPLUG_HIP_TEST_TARGETS
                                 << "; modules: " << GPUPLUG_HIP_TEST_MODULES << "; bundler: '"
                                 << GPUPLUG_HIP_TEST_BUNDLER << "'");
  BOOST_TEST(!kTargets.empty());
  BOOST_TEST(kCodeObjectVersions.size() == kTargets.size());
  BOOST_TEST(kModules.size() == kKernels.size());
}

BOOST_AUTO_TEST_CASE(clang_offload_bundler_lists_every_target) {
  // The build joins the code objects with this bundler, so it is always there, except where the
  // build was carried to another machine (scripts/device-check): the parsing tests still run.
  BOOST_TEST_REQUIRE(std::strlen(GPUPLUG_HIP_TEST_BUNDLER) != 0u);
  if (!std::filesystem::exists(GPUPLUG_HIP_TEST_BUNDLER)) {
    BOOST_TEST_MESSAGE("skipped: " << GPUPLUG_HIP_TEST_BUNDLER << " is not on this machine");
    return;
  }
  for (const std::string& module : kModules) {
    const std::vector<std::string> ids = bundler_list(bundle_path(module));
    BOOST_TEST_MESSAGE(module << ".hsaco: " << ids.size() << " entries");
    std::set<std::string> listed;
    for (const std::string& id : ids) listed.insert(std::string(hip::amdgpu_target_of(id)));
    for (const std::string& target : kTargets) {
      BOOST_TEST(listed.count(target) == 1u, module << ": bundler does not list " << target);
      // The id clang writes for a HIP device code object ("hipv4": code object v4 or later).
      BOOST_TEST(std::count(ids.begin(), ids.end(), "hipv4-amdgcn-amd-amdhsa--" + target) == 1,
                 module << ": no hipv4-amdgcn-amd-amdhsa--" << target);
    }
    // The plugin's reader sees exactly the entries the bundler sees (which lists them in an
    // order of its own, not the file's).
    const std::vector<std::byte> image = read_file(bundle_path(module));
    const auto entries = hip::parse_offload_bundle(image);
    BOOST_TEST_REQUIRE(entries.has_value());
    std::vector<std::string> parsed;
    for (const hip::BundleEntry& e : *entries) parsed.push_back(e.id);
    std::vector<std::string> listed_ids = ids;
    std::sort(parsed.begin(), parsed.end());
    std::sort(listed_ids.begin(), listed_ids.end());
    BOOST_TEST(parsed == listed_ids, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(every_code_object_is_amdgpu_elf_with_the_kernels_and_metadata) {
  for (const std::string& module : kModules) {
    const std::vector<std::byte> image = read_file(bundle_path(module));
    BOOST_TEST_REQUIRE(hip::is_offload_bundle(image), module << ".hsaco is not an offload bundle");
    const auto entries = hip::parse_offload_bundle(image);
    BOOST_TEST_REQUIRE(entries.has_value(), module << ".hsaco: malformed bundle");
    for (const std::string& target : kTargets) {
      BOOST_TEST_CONTEXT(module << ".hsaco, " << target) {
        const hip::BundleEntry* entry = nullptr;
        for (const hip::BundleEntry& e : *entries)
          if (hip::amdgpu_target_of(e.id) == target) entry = &e;
        BOOST_TEST_REQUIRE(entry != nullptr);
        BOOST_TEST_REQUIRE(hip::elf_machine(entry->data).value_or(0) == hip::kElfMachineAmdgpu);

        // e_ident: the AMDGPU HSA OS/ABI and the code-object version (EI_ABIVERSION = v - 2).
        const auto index = static_cast<std::size_t>(
            std::find(kTargets.begin(), kTargets.end(), target) - kTargets.begin());
        const unsigned version = index < kCodeObjectVersions.size()
                                     ? static_cast<unsigned>(std::stoul(kCodeObjectVersions[index]))
                                     : 0u;
        BOOST_TEST((version == 4u || version == 5u), "code object v" << version);
        BOOST_TEST(std::to_integer<unsigned>(entry->data[7]) == kElfOsAbiAmdgpuHsa);
        BOOST_TEST(std::to_integer<unsigned>(entry->data[8]) == version - 2u);

        // e_flags: the exact processor, and the XNACK mode the target id fixes; a target id that
        // fixes none leaves it "any" (or unsupported, 0, on processors without XNACK).
        const auto flags = static_cast<unsigned>(le(entry->data.data() + 48, 4));
        const std::string processor = target.substr(0, target.find(':'));
        BOOST_TEST_REQUIRE(kMach.count(processor) == 1u,
                           processor << ": add its EF_AMDGPU_MACH value to kMach");
        BOOST_TEST((flags & 0xffu) == kMach.at(processor),
                   "e_flags 0x" << std::hex << flags << " for " << processor);
        BOOST_TEST_MESSAGE(module << ".hsaco " << target << ": code object v" << version
                                  << ", e_flags 0x" << std::hex << flags);
        if (target.find("xnack+") != std::string::npos) {
          BOOST_TEST((flags & kXnackMask) == kXnackOn);
        } else if (target.find("xnack-") != std::string::npos) {
          BOOST_TEST((flags & kXnackMask) == kXnackOff);
        } else {
          BOOST_TEST(((flags & kXnackMask) == kXnackAny || (flags & kXnackMask) == 0u));
        }

        const auto symbols = hip::read_elf_symbols(entry->data);
        BOOST_TEST_REQUIRE(symbols.has_value());
        BOOST_TEST(hip::kernel_names(*symbols) == kKernels.at(module),
                   boost::test_tools::per_element());
        // <func>_args: a global 72-byte object hipModuleGetGlobal finds, version 1, the sizes.
        for (const std::string& kernel : kKernels.at(module)) {
          const std::string name = kernel + "_args";
          const hip::ElfSymbol* sym = nullptr;
          for (const hip::ElfSymbol& s : *symbols)
            if (s.name == name) sym = &s;
          BOOST_TEST_REQUIRE(sym != nullptr, name << " is not in the symbol table");
          BOOST_TEST(sym->type == 1u);     // STT_OBJECT
          BOOST_TEST(sym->binding == 1u);  // STB_GLOBAL
          BOOST_TEST(sym->size == 72u);
          BOOST_TEST(read_u32_symbol(entry->data, *sym, 0).value_or(0) == 1u, name << " version");
          const std::vector<std::uint32_t>& sizes = kArgs.at(kernel);
          BOOST_TEST(read_u32_symbol(entry->data, *sym, 4).value_or(0) == sizes.size(),
                     name << " count");
          for (std::size_t i = 0; i < sizes.size(); ++i)
            BOOST_TEST(read_u32_symbol(entry->data, *sym, 8 + 4 * i).value_or(0) == sizes[i],
                       name << " size of argument " << i);
        }
        if (kPublished.count(module) == 0) continue;
        for (const auto& [name, value] : kPublished.at(module)) {
          const hip::ElfSymbol* sym = nullptr;
          for (const hip::ElfSymbol& s : *symbols)
            if (s.name == name) sym = &s;
          BOOST_TEST_REQUIRE(sym != nullptr, name << " is not in the symbol table");
          BOOST_TEST(sym->type == 1u);     // STT_OBJECT
          BOOST_TEST(sym->binding == 1u);  // STB_GLOBAL: hipModuleGetGlobal can find it
          BOOST_TEST(sym->size == 4u);
          BOOST_TEST(read_u32_symbol(entry->data, *sym).value_or(0xFFFFFFFFu) == value, name);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(select_code_object_picks_the_device_s_target) {
  const std::vector<std::byte> image = read_file(bundle_path("axpy"));
  const auto entries = hip::parse_offload_bundle(image);
  BOOST_TEST_REQUIRE(entries.has_value());
  auto data_of = [&](std::string_view target) {
    for (const hip::BundleEntry& e : *entries)
      if (hip::amdgpu_target_of(e.id) == target) return e.data.data();
    return static_cast<const std::byte*>(nullptr);
  };
  auto selected = [&](std::string_view arch) {
    return hip::select_code_object(image, arch).data();
  };
  if (data_of("gfx90a:xnack-") != nullptr && data_of("gfx90a:xnack+") != nullptr) {
    BOOST_TEST(selected("gfx90a:sramecc+:xnack-") == data_of("gfx90a:xnack-"));
    BOOST_TEST(selected("gfx90a:sramecc-:xnack+") == data_of("gfx90a:xnack+"));
  }
  if (data_of("gfx1030") != nullptr) BOOST_TEST(selected("gfx1030") == data_of("gfx1030"));
  // MI300X reports "gfx942:sramecc+:xnack-"; RDNA3 and RDNA4 cards their bare processor.
  if (data_of("gfx942") != nullptr)
    BOOST_TEST(selected("gfx942:sramecc+:xnack-") == data_of("gfx942"));
  if (data_of("gfx1100") != nullptr) BOOST_TEST(selected("gfx1100") == data_of("gfx1100"));
  if (data_of("gfx1201") != nullptr) BOOST_TEST(selected("gfx1201") == data_of("gfx1201"));
  // No matching target (or no arch known): the first AMDGPU code object, for listing kernels.
  BOOST_TEST(selected("gfx803") != nullptr);
  BOOST_TEST(selected("") != nullptr);
  // A bare code object is its own selection.
  const auto first = hip::select_code_object(image, "");
  BOOST_TEST(hip::select_code_object(first, "gfx1030").data() == first.data());
}

BOOST_AUTO_TEST_CASE(target_ids_parse_and_match_like_the_runtime) {
  BOOST_TEST(hip::amdgpu_target_of("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+") == "gfx90a:xnack+");
  BOOST_TEST(hip::amdgpu_target_of("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-") == "gfx90a:xnack-");
  BOOST_TEST(hip::amdgpu_target_of("hip-amdgcn-amd-amdhsa-gfx906") == "gfx906");
  BOOST_TEST(hip::amdgpu_target_of("host-x86_64-unknown-linux") == "");

  BOOST_TEST(hip::target_matches("gfx90a:xnack-", "gfx90a:sramecc+:xnack-"));
  BOOST_TEST(!hip::target_matches("gfx90a:xnack+", "gfx90a:sramecc+:xnack-"));
  BOOST_TEST(hip::target_matches("gfx90a", "gfx90a:sramecc+:xnack-"));  // "any" runs on both
  BOOST_TEST(hip::target_matches("gfx90a:xnack+", "gfx90a"));  // the device does not say: allowed
  BOOST_TEST(!hip::target_matches("gfx940", "gfx942:sramecc+:xnack-"));
  BOOST_TEST(hip::target_matches("gfx942", "gfx942:sramecc+:xnack-"));  // MI300X
  BOOST_TEST(!hip::target_matches("gfx1200", "gfx1201"));
  BOOST_TEST(!hip::target_matches("gfx1030", "gfx1031"));
  BOOST_TEST(!hip::target_matches("", "gfx1030"));
}

BOOST_AUTO_TEST_CASE(malformed_images_are_refused_not_read_past) {
  const std::vector<std::byte> good = read_file(bundle_path("axpy"));
  // Every truncation of the header region is refused (entries would lie outside the image).
  for (std::size_t size : {std::size_t{0}, std::size_t{10}, std::size_t{24}, std::size_t{31},
                           std::size_t{40}, std::size_t{200}}) {
    const std::span<const std::byte> cut(good.data(), std::min(size, good.size()));
    BOOST_TEST(!hip::parse_offload_bundle(cut).has_value(), "truncated to " << size);
    BOOST_TEST(hip::select_code_object(cut, "gfx1030").empty());
  }
  // An absurd entry count is refused before anything is reserved.
  std::vector<std::byte> bad = good;
  for (int i = 0; i < 8; ++i) bad[24 + i] = std::byte{0xff};
  BOOST_TEST(!hip::parse_offload_bundle(bad).has_value());
  // An entry offset past the end.
  bad = good;
  for (int i = 0; i < 8; ++i) bad[32 + i] = std::byte{0x7f};
  BOOST_TEST(!hip::parse_offload_bundle(bad).has_value());

  // ELF: not ELF, ELF32, and a section table past the end.
  const auto entries = hip::parse_offload_bundle(good);
  BOOST_TEST_REQUIRE(entries.has_value());
  std::vector<std::byte> elf(hip::select_code_object(good, "").begin(),
                             hip::select_code_object(good, "").end());
  BOOST_TEST_REQUIRE(hip::read_elf_symbols(elf).has_value());
  BOOST_TEST(!hip::read_elf_symbols(std::span(good.data(), 16)).has_value());
  std::vector<std::byte> elf32 = elf;
  elf32[4] = std::byte{1};
  BOOST_TEST(!hip::elf_machine(elf32).has_value());
  BOOST_TEST(!hip::read_elf_symbols(elf32).has_value());
  std::vector<std::byte> far = elf;
  for (int i = 0; i < 8; ++i) far[40 + i] = std::byte{0x7f};
  BOOST_TEST(!hip::read_elf_symbols(far).has_value());
  BOOST_TEST(!hip::read_elf_symbols(std::span(elf.data(), elf.size() / 2)).has_value());
}
