// SPDX-License-Identifier: Apache-2.0
// The built CUDA kernel fatbins carry SASS for every configured sm_XX and PTX for the newest one.

// There is no cuobjdump on the build machine, so the test reads the fatbin container itself.
// Layout (little endian; public, e.g. the fatbinary.h that older toolkits shipped and the
// open-source fatbin readers):
//   container header, 16 bytes: u32 magic 0xBA55ED50, u16 version (1), u16 header size (16),
//                               u64 size of the entries that follow
//   entry header, `header size` bytes (64, or 80 for PTX since CUDA 12.x):
//     +0 u16 kind (1 = PTX, 2 = ELF cubin)   +2 u16 version   +4 u32 header size
//     +8 u64 payload size (padded)   +16 u32 compressed size (0 = stored plain)
//     +24 u16 code version minor   +26 u16 major   +28 u32 sm arch (80, 90, ...)
//     +40 u64 flags (0x1 64-bit, 0x10 Linux, 0x2000 LZ4- or 0x8000 zstd-compressed)
//   then the payload; the next entry follows at entry + header size + payload size.
// kernels/cuda/CMakeLists.txt builds with -Xfatbin=-compress=false, so payloads are plain: each
// cubin's ELF header (EM_CUDA = 190, the SM in e_flags) and each PTX text can be checked too.

#define BOOST_TEST_MODULE test_cuda_fatbin
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "contains.hpp"
#include "gpuplug/support/files.hpp"

#ifndef GPUPLUG_TEST_CUDA_ARCHS
#error \
    "tests/unit/CMakeLists.txt passes GPUPLUG_TEST_CUDA_ARCHS (GPUPLUG_CUDA_ARCHS joined by commas, e.g. \"80,90\")"
#endif

using gpuplug::test::contains;
namespace {

constexpr std::uint32_t kFatbinMagic = 0xBA55ED50u;
constexpr std::uint16_t kKindPtx = 1;
constexpr std::uint16_t kKindElf = 2;
constexpr std::uint64_t kFlagCompressedLz4 = 0x2000;
constexpr std::uint64_t kFlagCompressedZstd = 0x8000;
constexpr std::uint16_t kEmCuda = 190;

struct Entry {
  std::uint16_t kind = 0;
  std::uint32_t arch = 0;
  std::uint64_t flags = 0;
  std::uint32_t compressed_size = 0;
  std::string payload;  // the stored bytes
};

template <class T>
T read(const std::string& bytes, std::size_t offset) {
  BOOST_TEST_REQUIRE(offset + sizeof(T) <= bytes.size(), "read past the end at offset " << offset);
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

std::string slurp(const std::string& path) {
  std::string why;
  const auto bytes = gpuplug::support::read_file(path, why);
  BOOST_TEST_REQUIRE(bytes.has_value(),
                     "cannot read " << path << ": " << why << " (is gpuplug-kernels-cuda built?)");
  return {reinterpret_cast<const char*>(bytes->data()), bytes->size()};
}

// Every entry of every container in the file.
std::vector<Entry> parse_fatbin(const std::string& bytes) {
  std::vector<Entry> entries;
  std::size_t container = 0;
  while (container < bytes.size()) {
    BOOST_TEST_REQUIRE(read<std::uint32_t>(bytes, container) == kFatbinMagic,
                       "bad magic at " << container);
    BOOST_TEST_REQUIRE(read<std::uint16_t>(bytes, container + 4) == 1u);
    const std::uint16_t header_size = read<std::uint16_t>(bytes, container + 6);
    const std::uint64_t fat_size = read<std::uint64_t>(bytes, container + 8);
    BOOST_TEST_REQUIRE(header_size == 16u);
    const std::size_t end = container + header_size + fat_size;
    BOOST_TEST_REQUIRE(end <= bytes.size(), "container overruns the file");
    std::size_t at = container + header_size;
    while (at < end) {
      Entry e;
      e.kind = read<std::uint16_t>(bytes, at);
      const std::uint32_t entry_header = read<std::uint32_t>(bytes, at + 4);
      const std::uint64_t payload_size = read<std::uint64_t>(bytes, at + 8);
      e.compressed_size = read<std::uint32_t>(bytes, at + 16);
      e.arch = read<std::uint32_t>(bytes, at + 28);
      e.flags = read<std::uint64_t>(bytes, at + 40);
      BOOST_TEST_REQUIRE(entry_header >= 64u);
      BOOST_TEST_REQUIRE(at + entry_header + payload_size <= end, "entry overruns its container");
      e.payload = bytes.substr(at + entry_header, payload_size);
      entries.push_back(std::move(e));
      at += entry_header + payload_size;
    }
    container = end;
  }
  return entries;
}

// GPUPLUG_CUDA_ARCHS in its order: SASS for each, PTX for the last (kernels/cuda/CMakeLists.txt).
std::vector<std::uint32_t> configured_archs() {
  std::vector<std::uint32_t> archs;
  std::stringstream list(GPUPLUG_TEST_CUDA_ARCHS);
  for (std::string item; std::getline(list, item, ',');) {
    archs.push_back(static_cast<std::uint32_t>(std::stoul(item)));
  }
  return archs;
}

// The SM a cubin was built for. CUDA 12.8+ (ELF ABI version 8, OSABI 0x41) keeps it in bits
// 8..15 of e_flags; older cubins (OSABI 0x33, ABI version 7) in bits 0..7.
std::uint32_t cubin_sm(const std::string& elf) {
  const auto abi_version = static_cast<unsigned char>(elf[8]);
  const std::uint32_t e_flags = read<std::uint32_t>(elf, 48);
  return abi_version >= 8 ? (e_flags >> 8) & 0xFFu : e_flags & 0xFFu;
}

struct Module {
  const char* name;
  std::vector<std::string> kernels;
  std::vector<std::string> globals;
};

const std::vector<Module>& modules() {
  static const std::vector<Module> m = {
      // Every kernel publishes <func>_args (<gpuplug/kernel_args.h>).
      {"axpy", {"axpy"}, {"axpy_args"}},
      {"gemm",
       {"gemm_f32", "gemm_a_e4m3"},
       {"gemm_f32_n_tile", "gemm_a_e4m3_n_tile", "gemm_a_e4m3_a_e4m3", "gemm_f32_args",
        "gemm_a_e4m3_args"}},
      {"e4m3", {"cast_f32_e4m3", "cast_e4m3_f32"}, {"cast_f32_e4m3_args", "cast_e4m3_f32_args"}},
      {"activation", {"bias_relu"}, {"bias_relu_args"}},
      {"sync", {"gate"}, {"gate_args"}},
  };
  return m;
}

}  // namespace

BOOST_AUTO_TEST_CASE(default_archs_are_sm80_and_sm90_with_compute90_ptx) {
  // The requirement, as configured by default (GPUPLUG_CUDA_ARCHS="80;90").
  BOOST_TEST_MESSAGE("GPUPLUG_CUDA_ARCHS = " << GPUPLUG_TEST_CUDA_ARCHS);
  const auto archs = configured_archs();
  BOOST_TEST((std::find(archs.begin(), archs.end(), 80u) != archs.end()));
  BOOST_TEST((std::find(archs.begin(), archs.end(), 90u) != archs.end()));
  BOOST_TEST(archs.back() >= 90u);  // the PTX, for the last arch, serves GPUs newer than sm_90
}

BOOST_AUTO_TEST_CASE(every_module_has_sass_per_arch_and_ptx_for_the_newest) {
  const auto configured = configured_archs();
  const std::set<std::uint32_t> archs(configured.begin(), configured.end());
  const std::uint32_t ptx_arch = configured.back();
  for (const Module& m : modules()) {
    BOOST_TEST_CONTEXT("module " << m.name) {
      const auto entries =
          parse_fatbin(slurp(std::string(GPUPLUG_TEST_KERNEL_DIR) + "/cuda/" + m.name + ".fatbin"));
      std::set<std::uint32_t> sass;
      std::set<std::uint32_t> ptx;
      for (const Entry& e : entries) {
        BOOST_TEST_CONTEXT("entry kind " << e.kind << " arch " << e.arch) {
          BOOST_TEST((e.flags & 0x1u) != 0u);  // 64-bit code
          const bool compressed =
              (e.flags & (kFlagCompressedLz4 | kFlagCompressedZstd)) != 0 || e.compressed_size != 0;
          BOOST_TEST(!compressed,
                     "payload is compressed: the build must pass -Xfatbin=-compress=false");
          if (compressed) continue;
          if (e.kind == kKindElf) {
            sass.insert(e.arch);
            const std::string& elf = e.payload;
            BOOST_TEST_REQUIRE(elf.size() >= 64u);
            BOOST_TEST(elf.compare(0, 4,
                                   "\x7f"
                                   "ELF") == 0);
            BOOST_TEST(static_cast<int>(elf[4]) == 2);  // ELFCLASS64
            BOOST_TEST(read<std::uint16_t>(elf, 18) == kEmCuda);
            BOOST_TEST(cubin_sm(elf) == e.arch, "e_flags name sm_" << cubin_sm(elf));
            for (const std::string& k : m.kernels)
              BOOST_TEST(contains(elf, ".text." + k), "cubin lacks kernel " << k);
            for (const std::string& g : m.globals)
              BOOST_TEST(contains(elf, g), "cubin lacks symbol " << g);
          } else if (e.kind == kKindPtx) {
            ptx.insert(e.arch);
            const std::string& text = e.payload;
            BOOST_TEST(contains(text, ".target sm_" + std::to_string(e.arch)));
            for (const std::string& k : m.kernels)
              BOOST_TEST(contains(text, ".entry " + k), "PTX lacks kernel " << k);
            for (const std::string& g : m.globals)
              BOOST_TEST(contains(text, g), "PTX lacks symbol " << g);
          } else {
            BOOST_ERROR("unexpected entry kind " << e.kind);
          }
        }
      }
      BOOST_TEST(sass == archs, "SASS for every configured arch, and only those");
      BOOST_TEST(ptx == std::set<std::uint32_t>{ptx_arch},
                 "PTX for compute_" << ptx_arch << " only");
    }
  }
}
