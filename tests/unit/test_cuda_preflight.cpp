// SPDX-License-Identifier: Apache-2.0
// Kernel-binary preflight for CUDA: the cuda plugin's choice among the built fatbins'
// SASS and PTX for GPUs of every compute capability (the function the inspect_module hook calls
// with the driver's answer), what each image defines, and truncated, mutated and garbage images.
// No driver needed: the compute capability is the test's.

#define BOOST_TEST_MODULE test_cuda_preflight
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpuplug/support/files.hpp"
#include "image.hpp"
#include "preflight.hpp"

#ifndef GPUPLUG_TEST_CUDA_ARCHS
#error "tests/unit/CMakeLists.txt passes GPUPLUG_TEST_CUDA_ARCHS (e.g. \"80,90\")"
#endif

namespace {

using gpuplug::cuda::ComputeCapability;
using gpuplug::cuda::inspect_image;
using gpuplug::sdk::ModuleInspection;

std::vector<std::byte> read(const std::string& module) {
  const std::string path = std::string(GPUPLUG_TEST_KERNEL_DIR) + "/cuda/" + module + ".fatbin";
  std::string why;
  auto bytes = gpuplug::support::read_file(path, why);
  BOOST_TEST_REQUIRE(bytes.has_value(), "cannot read " << path << ": " << why);
  return *bytes;
}

std::vector<std::uint32_t> archs() {
  std::vector<std::uint32_t> out;
  std::stringstream list(GPUPLUG_TEST_CUDA_ARCHS);
  for (std::string item; std::getline(list, item, ',');) out.push_back(std::stoul(item));
  return out;
}

ModuleInspection inspect(std::span<const std::byte> image, int major, int minor) {
  ModuleInspection m;
  inspect_image(image, {major, minor}, m);
  return m;
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

/// The status of the Failure inspect_image throws; fails the case when it returns.
gpuplug_status_t refusal(std::span<const std::byte> image, std::string* why = nullptr) {
  try {
    inspect(image, 9, 0);
  } catch (const gpuplug::sdk::Failure& f) {
    if (why != nullptr) *why = f.what();
    return f.status();
  }
  return GPUPLUG_STATUS_SUCCESS;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_driver_rules_pick_sass_then_ptx) {
  // Default configuration: SASS for sm_80 and sm_90, PTX for compute_90.
  const auto configured = archs();
  BOOST_TEST_REQUIRE((configured == std::vector<std::uint32_t>{80, 90}),
                     "the expectations below are for GPUPLUG_CUDA_ARCHS=80;90");
  const auto image = read("gemm");
  struct Case {
    int major, minor;
    const char* target;  // "" when nothing loads
  };
  for (const Case c : {Case{9, 0, "sm_90 (SASS)"}, Case{8, 0, "sm_80 (SASS)"},
                       Case{8, 6, "sm_80 (SASS)"},  // same major, higher minor: binary compatible
                       Case{8, 9, "sm_80 (SASS)"}, Case{10, 0, "compute_90 (PTX, JIT)"},
                       Case{12, 0, "compute_90 (PTX, JIT)"}, Case{7, 5, ""}, Case{6, 1, ""}}) {
    BOOST_TEST_CONTEXT("compute capability " << c.major << "." << c.minor) {
      const auto m = inspect(image, c.major, c.minor);
      BOOST_TEST(m.format == "fatbin");
      BOOST_TEST(m.targets == (std::vector<std::string>{"sm_80", "sm_90", "compute_90"}),
                 boost::test_tools::per_element());
      BOOST_TEST(m.loadable == (c.target[0] != '\0'));
      BOOST_TEST(m.target == c.target);
      if (!m.loadable) {
        const std::string dev = std::to_string(c.major * 10 + c.minor);
        BOOST_TEST(m.reason.find("no SASS for sm_" + dev) != std::string::npos, m.reason);
        BOOST_TEST(m.reason.find("no PTX at or below compute_" + dev) != std::string::npos, m.reason);
        BOOST_TEST(m.reason.find("sm_80, sm_90, compute_90") != std::string::npos, m.reason);
      }
      // Kernels and published tiles, whichever entry was read (cubin or PTX).
      BOOST_TEST(m.functions == (std::vector<std::string>{"gemm_a_e4m3", "gemm_f32"}),
                 boost::test_tools::per_element());
      BOOST_TEST(has(m.symbols, "gemm_f32_n_tile=64"));
      BOOST_TEST(has(m.symbols, "gemm_a_e4m3_n_tile=64"));
      BOOST_TEST(has(m.symbols, "gemm_a_e4m3_a_e4m3=1"));
    }
  }
}

BOOST_AUTO_TEST_CASE(every_module_lists_its_kernels) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> modules = {
      {"axpy", {"axpy"}},
      {"e4m3", {"cast_e4m3_f32", "cast_f32_e4m3"}},
      {"activation", {"bias_relu"}},
  };
  for (const auto& [name, kernels] : modules) {
    BOOST_TEST_CONTEXT(name) {
      for (const auto cc : {ComputeCapability{9, 0}, ComputeCapability{12, 0}}) {
        const auto m = inspect(read(name), cc.major, cc.minor);
        BOOST_TEST(m.loadable);
        BOOST_TEST(m.functions == kernels, boost::test_tools::per_element());
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_bare_cubin_and_bare_ptx_are_inspected_too) {
  const auto image = read("gemm");
  std::string why;
  const auto entries = gpuplug::cuda::fatbin_entries(image, why);
  BOOST_TEST_REQUIRE(entries.has_value(), why);
  bool saw_cubin = false, saw_ptx = false;
  for (const auto& e : *entries) {
    BOOST_TEST_CONTEXT((e.ptx ? "compute_" : "sm_") << e.arch) {
      const std::vector<std::byte> payload(e.payload.begin(), e.payload.end());
      const auto m = inspect(payload, static_cast<int>(e.arch / 10), static_cast<int>(e.arch % 10));
      BOOST_TEST(m.format == (e.ptx ? "ptx" : "cubin"));
      BOOST_TEST(m.loadable);
      BOOST_TEST(m.targets.size() == 1u);
      BOOST_TEST(m.functions == (std::vector<std::string>{"gemm_a_e4m3", "gemm_f32"}),
                 boost::test_tools::per_element());
      BOOST_TEST(has(m.symbols, "gemm_f32_n_tile=64"));
      (e.ptx ? saw_ptx : saw_cubin) = true;
      if (!e.ptx) {
        // The same cubin on an older major does not load: SASS never runs across majors.
        const auto older = inspect(payload, static_cast<int>(e.arch / 10) - 1, 9);
        BOOST_TEST(!older.loadable);
      }
    }
  }
  BOOST_TEST(saw_cubin);
  BOOST_TEST(saw_ptx);
}

BOOST_AUTO_TEST_CASE(truncated_mutated_and_garbage_images_are_refused_never_read_past_the_end) {
  const auto image = read("gemm");
  for (std::size_t size : {std::size_t{4}, std::size_t{15}, std::size_t{16}, std::size_t{40},
                           std::size_t{100}, image.size() / 3, image.size() / 2, image.size() - 1}) {
    BOOST_TEST_CONTEXT("truncated to " << size << " of " << image.size()) {
      // A copy of exactly `size` bytes, so that ASan sees any read past it.
      const std::vector<std::byte> cut(image.begin(), image.begin() + static_cast<long>(size));
      std::string why;
      BOOST_TEST(refusal(cut, &why) == GPUPLUG_STATUS_INVALID_IMAGE);
      BOOST_TEST(!why.empty());
    }
  }
  const std::string text = "not a kernel at all";
  std::string why;
  BOOST_TEST(refusal(std::as_bytes(std::span(text)), &why) == GPUPLUG_STATUS_INVALID_IMAGE);
  BOOST_TEST(why.find("not a CUDA module") != std::string::npos, why);

  std::mt19937 rng(16);
  int refused = 0;
  for (int i = 0; i < 400; ++i) {
    auto mutant = image;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 6); ++k) {
      // The container and first entry headers, or anywhere (the cubin's ELF tables).
      const std::size_t at = k % 2 == 0 ? rng() % 128 : rng() % mutant.size();
      mutant[at] = static_cast<std::byte>(rng());
    }
    const auto status = refusal(mutant);
    BOOST_TEST((status == GPUPLUG_STATUS_SUCCESS || status == GPUPLUG_STATUS_INVALID_IMAGE));
    refused += status == GPUPLUG_STATUS_INVALID_IMAGE;
  }
  BOOST_TEST(refused > 0);
}
