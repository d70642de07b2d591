// SPDX-License-Identifier: Apache-2.0
// HIP module images read without the runtime: clang offload bundles and AMDGPU ELF symbols.
#pragma once

// Why: HIP has no API that lists a module's kernels, but "function not found" messages must name
// them. A module image is either a clang offload bundle (what `hipcc --genco` writes: one code
// object per target) or a bare AMDGPU code object (an ELF shared object). Both layouts are
// public: the bundle is
//     "__CLANG_OFFLOAD_BUNDLE__" (24 bytes), uint64 entry count,
//     per entry: uint64 offset, uint64 size, uint64 id length, id (not NUL-terminated),
// all little-endian, offsets from the start of the bundle; an id reads
// "<kind>-<triple>-<target id>", e.g. "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+". Compressed
// bundles ("CCOB", ROCm 6.1+) are recognised but not unpacked. Every reader here bounds-checks
// against the span it is given and reports malformed input as nullopt, never by crashing.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpuplug::hip {

inline constexpr std::string_view kBundleMagic = "__CLANG_OFFLOAD_BUNDLE__";
inline constexpr std::string_view kCompressedBundleMagic = "CCOB";
inline constexpr std::uint16_t kElfMachineAmdgpu = 224;  // EM_AMDGPU

/// One entry of an offload bundle. `data` points into the bundle it was parsed from.
struct BundleEntry {
  std::string id;                   // "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+"
  std::span<const std::byte> data;  // the code object (empty for the host entry of --genco)
};

/// True when `image` starts with the (uncompressed) offload-bundle magic.
bool is_offload_bundle(std::span<const std::byte> image) noexcept;
/// True when `image` starts with the compressed offload-bundle magic ("CCOB").
bool is_compressed_bundle(std::span<const std::byte> image) noexcept;
/// True when `image` starts with the ELF magic.
bool is_elf(std::span<const std::byte> image) noexcept;

/// The entries of an uncompressed bundle, in file order; nullopt when `image` is not one or any
/// entry lies outside it.
std::optional<std::vector<BundleEntry>> parse_offload_bundle(std::span<const std::byte> image);

/// The target id of a bundle entry id ("gfx90a:xnack+" for
/// "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+"), or "" when the entry is not an AMDGPU (amdgcn) code
/// object (e.g. the host entry).
std::string_view amdgpu_target_of(std::string_view bundle_id) noexcept;

/// Whether a code object built for `code_target` ("gfx90a:xnack+") runs on a device whose
/// gcnArchName is `device_arch` ("gfx90a:sramecc+:xnack-"): the processors are equal and every
/// feature the code object fixes (+ or -) has that setting on the device; features the code
/// object leaves unspecified ("any") match either way.
bool target_matches(std::string_view code_target, std::string_view device_arch) noexcept;

/// The code object of `image` meant for `device_arch`: for a bundle, the first entry whose target
/// matches, else (device_arch empty or unmatched) the first AMDGPU entry; for a bare ELF, the
/// image itself. Empty when there is none (or the bundle is compressed).
std::span<const std::byte> select_code_object(std::span<const std::byte> image,
                                              std::string_view device_arch);

/// One symbol of an ELF symbol table.
struct ElfSymbol {
  std::string name;
  std::uint8_t type = 0;      // STT_* (low nibble of st_info)
  std::uint8_t binding = 0;   // STB_* (high nibble)
  std::uint16_t section = 0;  // st_shndx
  std::uint64_t value = 0;
  std::uint64_t size = 0;
};

/// e_machine of a little-endian ELF64 image; nullopt when `image` is not one.
std::optional<std::uint16_t> elf_machine(std::span<const std::byte> image) noexcept;

/// Every symbol of the image's .symtab (or .dynsym when it has no .symtab); nullopt when the
/// image is not a well-formed little-endian ELF64.
std::optional<std::vector<ElfSymbol>> read_elf_symbols(std::span<const std::byte> image);

/// The kernels among `symbols`, sorted and unique: names X with a kernel descriptor object
/// "X.kd" (code object v3 and later), plus symbols of type STT_AMDGPU_HSA_KERNEL (v2).
std::vector<std::string> kernel_names(const std::vector<ElfSymbol>& symbols);

/// Why `image` must not reach the runtime, or "" when it may: hipModuleLoadData is given no
/// size, so the runtime trusts the headers it reads, and only images whose structure was checked
/// against the bytes we have are handed over (bundles whose entries lie inside the image, AMDGPU
/// ELF64 code objects, and compressed bundles, which the runtime unpacks itself).
std::string image_problem(std::span<const std::byte> image);

/// The AMDGPU targets an offload bundle carries ({"gfx90a:xnack+", "gfx1030"}); empty for
/// anything else. For the message when none fits the device.
std::vector<std::string> bundle_targets(std::span<const std::byte> image);

}  // namespace gpuplug::hip
