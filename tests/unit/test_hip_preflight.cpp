// SPDX-License-Identifier: Apache-2.0
// Kernel-binary preflight for HIP: the hip plugin's choice among the built offload
// bundles' code objects for devices of every gcnArchName (the function the inspect_module hook
// calls with the runtime's answer), the code objects' own target ids read from e_flags, what
// each module defines, and truncated, mutated and garbage images. No GPU needed.

#define BOOST_TEST_MODULE test_hip_preflight
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpuplug/support/files.hpp"
#include "image.hpp"
#include "preflight.hpp"

namespace {

namespace hip = gpuplug::hip;
using gpuplug::sdk::ModuleInspection;

std::vector<std::string> split_csv(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) out.push_back(item);
  return out;
}

const std::vector<std::string> kTargets = split_csv(GPUPLUG_HIP_TEST_TARGETS);

bool configured(const std::string& target) {
  return std::find(kTargets.begin(), kTargets.end(), target) != kTargets.end();
}

std::vector<std::byte> read(const std::string& module) {
  const std::string path = std::string(GPUPLUG_TEST_KERNEL_DIR) + "/hip/" + module + ".hsaco";
  std::string why;
  auto bytes = gpuplug::support::read_file(path, why);
  BOOST_TEST_REQUIRE(bytes.has_value(), "cannot read " << path << ": " << why);
  return *bytes;
}

ModuleInspection inspect(std::span<const std::byte> image, std::string_view arch) {
  ModuleInspection m;
  hip::inspect_image(image, arch, m);
  return m;
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

gpuplug_status_t refusal(std::span<const std::byte> image, std::string* why = nullptr) {
  try {
    inspect(image, "gfx942:sramecc+:xnack-");
  } catch (const gpuplug::sdk::Failure& f) {
    if (why != nullptr) *why = f.what();
    return f.status();
  }
  return GPUPLUG_STATUS_SUCCESS;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_runtime_rules_pick_the_matching_code_object) {
  const auto image = read("gemm");
  struct Case {
    const char* device;  // gcnArchName as the runtime reports it
    const char* target;  // the code object that loads; "" when none
    const char* needs;   // the configured target this case depends on
  };
  for (const Case c : {
           Case{"gfx942:sramecc+:xnack-", "gfx942", "gfx942"},
           Case{"gfx90a:sramecc-:xnack+", "gfx90a:xnack+", "gfx90a:xnack+"},
           Case{"gfx90a:sramecc-:xnack-", "gfx90a:xnack-", "gfx90a:xnack-"},
           Case{"gfx1030", "gfx1030", "gfx1030"},
           Case{"gfx1100", "gfx1100", "gfx1100"},
           Case{"gfx908:sramecc+:xnack-", "", ""},  // no gfx908 code object
           Case{"gfx940:sramecc+:xnack-", "", ""},  // gfx942 code does not run on gfx940
       }) {
    if (c.needs[0] != '\0' && !configured(c.needs)) continue;
    BOOST_TEST_CONTEXT("device " << c.device) {
      const auto m = inspect(image, c.device);
      BOOST_TEST(m.format == "offload bundle");
      BOOST_TEST(m.targets == kTargets, boost::test_tools::per_element());
      BOOST_TEST(m.loadable == (c.target[0] != '\0'));
      BOOST_TEST(m.target == c.target);
      if (!m.loadable) {
        BOOST_TEST(m.reason.find(std::string("no code object for ") + c.device) != std::string::npos,
                   m.reason);
        BOOST_TEST(m.reason.find(kTargets.front()) != std::string::npos, m.reason);
      }
      BOOST_TEST(m.functions == (std::vector<std::string>{"gemm_a_e4m3", "gemm_f32"}),
                 boost::test_tools::per_element());
      BOOST_TEST(has(m.symbols, "gemm_f32_n_tile=64"));
      BOOST_TEST(has(m.symbols, "gemm_a_e4m3_n_tile=64"));
      BOOST_TEST(has(m.symbols, "gemm_a_e4m3_a_e4m3=1"));
    }
  }
  const auto unknown = inspect(image, "");
  BOOST_TEST(!unknown.loadable);
  BOOST_TEST(unknown.reason.find("gcnArchName") != std::string::npos, unknown.reason);
}

BOOST_AUTO_TEST_CASE(each_code_object_names_its_own_target_and_kernels) {
  for (const std::string module : {"axpy", "gemm", "e4m3", "activation"}) {
    const auto image = read(module);
    const auto entries = hip::parse_offload_bundle(image);
    BOOST_TEST_REQUIRE(entries.has_value());
    for (const auto& e : *entries) {
      const std::string target(hip::amdgpu_target_of(e.id));
      if (target.empty()) continue;  // the host entry
      BOOST_TEST_CONTEXT(module << " " << target) {
        // e_flags agree with the bundle's entry id: a bare code object is placed as well.
        BOOST_TEST(hip::code_object_target(e.data) == target);
        const std::vector<std::byte> code(e.data.begin(), e.data.end());
        const auto m = inspect(code, target);
        BOOST_TEST(m.format == "code object");
        BOOST_TEST(m.loadable);
        BOOST_TEST(!m.functions.empty());
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(truncated_mutated_and_garbage_images_are_refused) {
  const auto image = read("gemm");
  for (std::size_t size : {std::size_t{10}, std::size_t{24}, std::size_t{40}, std::size_t{100},
                           image.size() / 2, image.size() - 1}) {
    BOOST_TEST_CONTEXT("truncated to " << size << " of " << image.size()) {
      const std::vector<std::byte> cut(image.begin(), image.begin() + static_cast<long>(size));
      std::string why;
      BOOST_TEST(refusal(cut, &why) == GPUPLUG_STATUS_INVALID_IMAGE);
      BOOST_TEST(!why.empty());
    }
  }
  const std::string text = "garbage, not a bundle";
  std::string why;
  BOOST_TEST(refusal(std::as_bytes(std::span(text)), &why) == GPUPLUG_STATUS_INVALID_IMAGE);
  BOOST_TEST(why.find("not a HIP code object") != std::string::npos, why);
  const std::string ccob = "CCOB and then compressed bytes";
  BOOST_TEST(refusal(std::as_bytes(std::span(ccob)), &why) == GPUPLUG_STATUS_UNSUPPORTED);

  std::mt19937 rng(16);
  int refused = 0;
  for (int i = 0; i < 400; ++i) {
    auto mutant = image;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 6); ++k) {
      const std::size_t at = k % 2 == 0 ? rng() % 256 : rng() % mutant.size();
      mutant[at] = static_cast<std::byte>(rng());
    }
    const auto status = refusal(mutant);
    BOOST_TEST((status == GPUPLUG_STATUS_SUCCESS || status == GPUPLUG_STATUS_INVALID_IMAGE));
    refused += status == GPUPLUG_STATUS_INVALID_IMAGE;
  }
  BOOST_TEST(refused > 0);
}
