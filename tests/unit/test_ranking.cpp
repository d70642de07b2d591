// SPDX-License-Identifier: Apache-2.0
// auto's ranking: device class first, then score, then discovery order and ordinal;
// a plugin from before ABI 1.1 (class unknown) ranks as an accelerator; GPUPLUG_BACKEND still
// replaces auto; dry_run chooses as select does without creating anything. The candidates are
// the real host plugin renamed and declaring another class (fake_plugins/ranked_host.c), added
// with add_plugin_file in the discovery order each case needs, so no real GPU changes the result.
#define BOOST_TEST_MODULE ranking
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <gpuplug/gpuplug.hpp>
#include <string>
#include <thread>
#include <vector>

#include "contains.hpp"
#include "loader_env.hpp"

using gpuplug::PluginRegistry;
using gpuplug::ProbeMode;
using gpuplug::Selection;
using namespace gpuplug::test;

BOOST_TEST_GLOBAL_FIXTURE(LoaderEnvironment);

namespace {

std::filesystem::path ranked(const std::string& name) {
  return std::filesystem::path(GPUPLUG_TEST_RANKED_PLUGIN_DIR) / ("libgpuplug-" + name + ".so");
}

/// Adds `files` in this order (discovery order), each probed as `mode`; every one available.
void add(PluginRegistry& r, const std::vector<std::filesystem::path>& files,
         ProbeMode mode = ProbeMode::in_process) {
  for (const auto& f : files) {
    const gpuplug::PluginInfo info = r.add_plugin_file(f, {mode, std::nullopt});
    BOOST_TEST_REQUIRE((info.state == gpuplug::PluginState::available), f << ": " << info.message);
  }
}

/// The plugin:ordinal that ranking line `line` ("3. fake_igpu:0 integrated_gpu, ...") is about.
std::string subject(const std::string& line) {
  const auto start = line.find(". ") + 2;
  return line.substr(start, line.find(' ', start) - start);
}

std::vector<std::string> order(const Selection& s) {
  std::vector<std::string> out;
  for (const auto& line : s.ranking) out.push_back(subject(line));
  return out;
}

}  // namespace

// The emulator (highest peak of all) and a 1.0 plugin come first in discovery order, the GPUs
// last: class decides, not discovery order and not the score across classes.
BOOST_AUTO_TEST_CASE(auto_picks_the_gpu_over_earlier_emulator_and_old_plugins) {
  for (const auto mode : {ProbeMode::in_process, ProbeMode::isolated}) {
    BOOST_TEST_CONTEXT((mode == ProbeMode::in_process ? "in process" : "isolated")) {
      PluginRegistry r;
      add(r,
          {ranked("fake_emu"), GPUPLUG_TEST_OLD_INFO_PLUGIN, host_plugin_file(),
           ranked("fake_igpu"), ranked("fake_gpu")},
          mode);
      const Selection s = r.select("auto");
      BOOST_TEST_REQUIRE(s.backend != nullptr);
      BOOST_TEST(s.chosen == "fake_gpu:0");
      BOOST_TEST((s.backend->device_info().device_class == gpuplug::DeviceClass::discrete_gpu));
      const std::vector<std::string> want{"fake_gpu:0", "fake_igpu:0", "host_info_v1_0:0",
                                          "host:0", "fake_emu:0"};
      BOOST_TEST(order(s) == want, boost::test_tools::per_element());
      BOOST_TEST_REQUIRE(s.ranking.size() == 5u);
      BOOST_TEST(contains(s.ranking[0], "1. fake_gpu:0 discrete_gpu, score: 1000 GFLOP/s"));
      BOOST_TEST(contains(s.ranking[0], ": chosen"));
      BOOST_TEST(contains(s.ranking[1], "integrated_gpu, score: 9000 GFLOP/s"));
      BOOST_TEST(contains(s.ranking[1], "ranked below fake_gpu:0"));
      // A plugin from before ABI 1.1 declares no class: an accelerator with peak unknown.
      BOOST_TEST(contains(s.ranking[2], "3. host_info_v1_0:0 accelerator (declared unknown)"));
      BOOST_TEST(contains(s.ranking[2], "peak unknown"));
      BOOST_TEST(contains(s.ranking[3], "4. host:0 cpu"));
      BOOST_TEST(contains(s.ranking[4], "5. fake_emu:0 emulator, score: 50000 GFLOP/s"));
      BOOST_TEST(s.passed_over.empty());  // nothing was unusable or refused
      BOOST_TEST(s.explain() == "chose fake_gpu:0, ranked 1 of 5");
    }
  }
}

// Without any GPU, the unknown-class plugin (an accelerator) beats the CPU, which beats the
// emulator; a discovered plugin that cannot be used ranks nowhere and is passed over with its
// reason, as before.
BOOST_AUTO_TEST_CASE(classes_below_the_gpus_keep_their_order) {
  PluginRegistry r;
  add(r, {ranked("fake_emu"), host_plugin_file(), GPUPLUG_TEST_OLD_INFO_PLUGIN});
  const Selection s = r.select("auto");
  BOOST_TEST(s.chosen == "host_info_v1_0:0");
  const std::vector<std::string> want{"host_info_v1_0:0", "host:0", "fake_emu:0"};
  BOOST_TEST(order(s) == want, boost::test_tools::per_element());

  PluginRegistry only_cpu_and_emulator;
  add(only_cpu_and_emulator, {ranked("fake_emu"), host_plugin_file()});
  const auto missing = only_cpu_and_emulator.add_plugin_file(
      fake_plugin_dir() / "libgpuplug-fake_missing.so", {ProbeMode::in_process, std::nullopt});
  BOOST_TEST_REQUIRE((missing.state == gpuplug::PluginState::unavailable));
  const Selection s2 = only_cpu_and_emulator.select("auto");
  BOOST_TEST(s2.chosen == "host:0");  // the CPU before the emulator
  const std::vector<std::string> want2{"host:0", "fake_emu:0"};
  BOOST_TEST(order(s2) == want2, boost::test_tools::per_element());
  BOOST_TEST_REQUIRE(s2.passed_over.size() == 1u);
  BOOST_TEST(contains(s2.passed_over[0], "fake_missing: "));
  BOOST_TEST(contains(s2.explain(), "chose host:0, ranked 1 of 2 (fake_missing: "), s2.explain());
}

// Within a class the larger score wins whatever the discovery order; equal scores keep
// discovery order, either way round.
BOOST_AUTO_TEST_CASE(score_then_a_stable_tiebreak) {
  {
    PluginRegistry r;
    add(r, {ranked("fake_gpu"), ranked("fake_gpu_big")});
    BOOST_TEST(r.select("auto").chosen == "fake_gpu_big:0");
  }
  {
    PluginRegistry r;
    add(r, {ranked("fake_gpu_twin"), ranked("fake_gpu")});
    const Selection s = r.select("auto");
    BOOST_TEST(s.chosen == "fake_gpu_twin:0");
    const std::vector<std::string> want{"fake_gpu_twin:0", "fake_gpu:0"};
    BOOST_TEST(order(s) == want, boost::test_tools::per_element());
  }
  {
    PluginRegistry r;
    add(r, {ranked("fake_gpu"), ranked("fake_gpu_twin")});
    BOOST_TEST(r.select("auto").chosen == "fake_gpu:0");
  }
}

// GPUPLUG_BACKEND still replaces auto (no ranking then), and a named selector is not ranked.
BOOST_AUTO_TEST_CASE(gpuplug_backend_and_names_are_not_ranked) {
  PluginRegistry r;
  add(r, {ranked("fake_emu"), ranked("fake_gpu")});
  {
    ScopedEnv env("GPUPLUG_BACKEND", "fake_emu");
    const Selection s = r.select("auto");
    BOOST_TEST(s.chosen == "fake_emu:0");
    BOOST_TEST(s.ranking.empty());
  }
  {
    ScopedEnv env("GPUPLUG_BACKEND", "nosuch,auto");  // an auto inside the variable ranks
    const Selection s = r.select("auto");
    BOOST_TEST(s.chosen == "fake_gpu:0");
    BOOST_TEST(s.ranking.size() == 2u);
  }
  const Selection named = r.select("fake_emu,fake_gpu");
  BOOST_TEST(named.chosen == "fake_emu:0");
  BOOST_TEST(named.ranking.empty());
  BOOST_TEST(r.select("nosuch,auto").chosen == "fake_gpu:0");
}

// dry_run chooses as select does, from discovery alone: no backend, the same ranking, and the
// same errors (an unknown name is not_found, a malformed selector invalid_argument).
BOOST_AUTO_TEST_CASE(dry_run_chooses_as_select_does_and_creates_nothing) {
  PluginRegistry r;
  add(r, {ranked("fake_emu"), ranked("fake_igpu"), ranked("fake_gpu")});
  const Selection dry = r.dry_run("auto");
  BOOST_TEST(dry.backend == nullptr);
  BOOST_TEST(dry.chosen == "fake_gpu:0");
  BOOST_TEST_REQUIRE(dry.ranking.size() == 3u);
  BOOST_TEST(contains(dry.ranking[0], ": would be chosen"));
  BOOST_TEST(order(dry) == order(r.select("auto")), boost::test_tools::per_element());
  BOOST_TEST(r.dry_run("fake_igpu").chosen == "fake_igpu:0");
  BOOST_CHECK_EXCEPTION(r.dry_run("fake_gpu:7"), gpuplug::Error, [](const gpuplug::Error& e) {
    return e.status() == gpuplug::Status::not_found && contains(e.message(), "no such device");
  });
  BOOST_CHECK_EXCEPTION(r.dry_run("cuda:"), gpuplug::Error, [](const gpuplug::Error& e) {
    return e.status() == gpuplug::Status::invalid_argument;
  });
  PluginRegistry empty;
  BOOST_CHECK_EXCEPTION(empty.dry_run("auto"), gpuplug::Error, [](const gpuplug::Error& e) {
    return e.status() == gpuplug::Status::not_found && contains(e.message(), "discover() first");
  });
}

// Many threads select and dry-run at once while another adds a better GPU: each sees a whole
// ranking, either before the addition or after it.
BOOST_AUTO_TEST_CASE(ranking_from_many_threads) {
  PluginRegistry r;
  add(r, {ranked("fake_emu"), ranked("fake_gpu")});
  std::vector<std::thread> threads;
  std::vector<std::string> seen(8);
  for (std::size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const Selection s = (t % 2 == 0) ? r.select("auto") : r.dry_run("auto");
        const bool before = s.chosen == "fake_gpu:0" && s.ranking.size() == 2;
        const bool after = s.chosen == "fake_gpu_big:0" && s.ranking.size() == 3;
        if (!before && !after) seen[t] = s.chosen + " of " + std::to_string(s.ranking.size());
      }
    });
  }
  r.add_plugin_file(ranked("fake_gpu_big"), {ProbeMode::in_process, std::nullopt});
  for (auto& t : threads) t.join();
  for (const auto& s : seen) BOOST_TEST(s.empty(), s);
  BOOST_TEST(r.select("auto").chosen == "fake_gpu_big:0");
}

// One GPU through its vendor's plugin and through Vulkan (both report PCI 0000:c1:00.0; the
// Vulkan route declares the higher peak): auto tries the native plugin first and says why, in
// either discovery order. A Vulkan device no native plugin reaches keeps its place by score.
BOOST_AUTO_TEST_CASE(native_plugin_ranks_above_the_same_gpu_through_vulkan) {
  for (const bool vulkan_first : {true, false}) {
    BOOST_TEST_CONTEXT("vulkan discovered " << (vulkan_first ? "first" : "second")) {
      PluginRegistry r;
      if (vulkan_first)
        add(r, {ranked("vulkan"), ranked("fake_native"), host_plugin_file()});
      else
        add(r, {ranked("fake_native"), ranked("vulkan"), host_plugin_file()});
      const Selection s = r.dry_run("auto");
      const std::vector<std::string> want{"fake_native:0", "vulkan:0", "host:0"};
      BOOST_TEST(order(s) == want, boost::test_tools::per_element());
      BOOST_TEST_REQUIRE(s.ranking.size() == 3u);
      BOOST_TEST(contains(s.ranking[1], "2. vulkan:0 discrete_gpu (the GPU of fake_native:0, "
                                        "whose native plugin ranks first), score: 3000 GFLOP/s"),
                 s.ranking[1]);
      BOOST_TEST(!contains(s.ranking[0], "the GPU of"));
    }
  }
  // With a GPU on another PCI address (0000:41:00.0), vulkan is ranked by its score as any
  // plugin is.
  PluginRegistry r;
  add(r, {ranked("fake_gpu_big"), ranked("vulkan")});
  const Selection s = r.dry_run("auto");
  const std::vector<std::string> want{"vulkan:0", "fake_gpu_big:0"};
  BOOST_TEST(order(s) == want, boost::test_tools::per_element());
}

std::vector<std::string> created(PluginRegistry& r, const std::string& selector) {
  std::vector<std::string> out;
  for (const auto& b : r.create_all(selector)) out.emplace_back(b->name());
  return out;
}

// create_all("auto") makes one backend per GPU: the Vulkan route to a GPU a native plugin drives
// is left out, in either discovery order; a Vulkan device of its own is kept, and naming vulkan
// still makes it.
BOOST_AUTO_TEST_CASE(create_all_auto_makes_one_backend_per_gpu) {
  for (const bool vulkan_first : {true, false}) {
    BOOST_TEST_CONTEXT("vulkan discovered " << (vulkan_first ? "first" : "second")) {
      PluginRegistry r;
      if (vulkan_first)
        add(r, {ranked("vulkan"), ranked("fake_native"), host_plugin_file()});
      else
        add(r, {ranked("fake_native"), ranked("vulkan"), host_plugin_file()});
      BOOST_TEST(created(r, "auto") == std::vector<std::string>{"fake_native:0"},
                 boost::test_tools::per_element());
      BOOST_TEST(created(r, "vulkan,auto") ==
                     (std::vector<std::string>{"vulkan:0", "fake_native:0"}),
                 boost::test_tools::per_element());
    }
  }
  PluginRegistry r;
  add(r, {ranked("fake_gpu_big"), ranked("vulkan")});
  BOOST_TEST(created(r, "auto") == (std::vector<std::string>{"fake_gpu_big:0", "vulkan:0"}),
             boost::test_tools::per_element());
}
