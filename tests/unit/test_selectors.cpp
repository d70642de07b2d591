// SPDX-License-Identifier: Apache-2.0
// Selectors: parsing, lists, '!', ordinals, unknown names, GPUPLUG_BACKEND, reported fallbacks.
#define BOOST_TEST_MODULE selectors
#include <boost/test/unit_test.hpp>
#include <gpuplug/gpuplug.hpp>

#include "contains.hpp"
#include "error_of.hpp"
#include "loader_env.hpp"
#include "test_print.hpp"

using gpuplug::Error;
using gpuplug::parse_selector;
using gpuplug::Status;
using namespace gpuplug::test;

BOOST_TEST_GLOBAL_FIXTURE(LoaderEnvironment);

namespace {

struct Registry {
  Registry() { registry.discover(); }
  gpuplug::PluginRegistry registry;
  std::size_t host_devices() const {
    for (const auto& p : registry.plugins()) {
      if (p.name == "host" && p.state == gpuplug::PluginState::available) return p.devices.size();
    }
    return 0;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(parse)

BOOST_AUTO_TEST_CASE(good_selectors) {
  auto one = parse_selector("auto");
  BOOST_REQUIRE_EQUAL(one.size(), 1u);
  BOOST_TEST(one[0].name == "auto");
  BOOST_TEST(!one[0].ordinal.has_value());
  BOOST_TEST(!one[0].required);

  auto cuda1 = parse_selector("cuda:1");
  BOOST_REQUIRE_EQUAL(cuda1.size(), 1u);
  BOOST_TEST(cuda1[0].name == "cuda");
  BOOST_TEST(cuda1[0].ordinal.value() == 1u);

  auto hip0 = parse_selector("hip:0!");
  BOOST_TEST(hip0[0].name == "hip");
  BOOST_TEST(hip0[0].ordinal.value() == 0u);
  BOOST_TEST(hip0[0].required);

  auto list = parse_selector(" cuda , hip:2 ,host! ");
  BOOST_REQUIRE_EQUAL(list.size(), 3u);
  BOOST_TEST(list[0].name == "cuda");
  BOOST_TEST(list[1].name == "hip");
  BOOST_TEST(list[1].ordinal.value() == 2u);
  BOOST_TEST(list[2].name == "host");
  BOOST_TEST(list[2].required);
  BOOST_TEST(!list[2].ordinal.has_value());

  BOOST_TEST(parse_selector("my_plugin2:4294967295")[0].ordinal.value() == 4294967295u);
  BOOST_TEST(parse_selector("auto!")[0].required);
}

BOOST_AUTO_TEST_CASE(bad_selectors_name_the_selector_and_the_element) {
  struct Case {
    const char* selector;
    const char* element;  // expected in the message
  };
  const Case cases[] = {
      {"", "element 1 is empty"},
      {"cuda,,host", "element 2 is empty"},
      {"cuda,", "element 2 is empty"},
      {"CUDA", "'CUDA'"},
      {"cu da", "'cu da'"},
      {"cuda:", "'cuda:'"},
      {"cuda:x", "'cuda:x'"},
      {"cuda:-1", "'cuda:-1'"},
      {"cuda:+1", "'cuda:+1'"},
      {"cuda:1x", "'cuda:1x'"},
      {"cuda:4294967296", "'cuda:4294967296'"},
      {"auto:0", "'auto:0'"},
      {":1", "':1'"},
      {"!", "'!'"},
      {"cuda!!", "'cuda!!'"},
      {"cuda!:1", "'cuda!:1'"},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT("selector '" << c.selector << "'") {
      const std::string what =
          error_of([&] { parse_selector(c.selector); }, Status::invalid_argument).what();
      BOOST_TEST(contains(what, "'" + std::string(c.selector) + "'"), what);
      BOOST_TEST(contains(what, c.element), what);
    }
  }
  BOOST_TEST(contains(
      error_of([] { parse_selector("cuda:99999999999"); }, Status::invalid_argument).what(),
      "too large"));
  BOOST_TEST(contains(error_of([] { parse_selector("auto:1"); }, Status::invalid_argument).what(),
                      "auto"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(selection, Registry)

BOOST_AUTO_TEST_CASE(host_forms) {
  BOOST_TEST(registry.create("host")->name() == "host:0");
  BOOST_TEST(registry.create("host!")->name() == "host:0");
  BOOST_TEST(registry.create("host:0")->name() == "host:0");
  const auto s = registry.select("host");
  BOOST_TEST(s.chosen == "host:0");
  BOOST_TEST(s.passed_over.empty());
  BOOST_TEST(s.explain() == "chose host:0");
}

BOOST_AUTO_TEST_CASE(bad_ordinal_names_the_selector_and_the_count) {
  const std::size_t n = host_devices();
  BOOST_REQUIRE(n >= 1u);
  // An absent device is not_found, like an absent plugin (one status per kind).
  const std::string what = error_of([&] { registry.create("host:7"); }, Status::not_found).what();
  BOOST_TEST(contains(what, "'host:7'"), what);
  BOOST_TEST(contains(what, "host has " + std::to_string(n) + " device"), what);
  // Required, the same error comes at once.
  const std::string required =
      error_of([&] { registry.create("host:7!,host"); }, Status::not_found).what();
  BOOST_TEST(contains(required, "host has " + std::to_string(n) + " device"), required);
}

BOOST_AUTO_TEST_CASE(unknown_name_lists_the_known_ones) {
  const std::string what = error_of([&] { registry.create("nosuch"); }, Status::not_found).what();
  BOOST_TEST(contains(what, "'nosuch'"), what);
  BOOST_TEST(contains(what, "nosuch: unknown backend (known: "), what);
  BOOST_TEST(contains(what, "host"), what);
  BOOST_TEST(contains(what, "fake_missing"), what);
}

BOOST_AUTO_TEST_CASE(a_list_falls_back_and_says_why) {
  const auto s = registry.select("nosuch,host");
  BOOST_TEST(s.chosen == "host:0");
  BOOST_REQUIRE_EQUAL(s.passed_over.size(), 1u);
  BOOST_TEST(contains(s.passed_over[0], "nosuch: unknown backend"), s.passed_over[0]);
  BOOST_TEST(contains(s.explain(), "chose host:0 (nosuch: unknown backend"), s.explain());

  const auto t = registry.select("fake_missing, host");
  BOOST_TEST(t.chosen == "host:0");
  BOOST_REQUIRE_EQUAL(t.passed_over.size(), 1u);
  BOOST_TEST(t.passed_over[0] == "fake_missing: driver missing: libfakegpu.so.1 not found");

  // A file that is no plugin at all is passed over with its loader reason.
  const auto u = registry.select("notso,host");
  BOOST_TEST(u.chosen == "host:0");
  BOOST_REQUIRE_EQUAL(u.passed_over.size(), 1u);
  BOOST_TEST(contains(u.passed_over[0], "notso: not a shared object"), u.passed_over[0]);
}

BOOST_AUTO_TEST_CASE(required_unavailable_backend_fails_with_its_reason) {
  for (const char* selector : {"fake_missing!", "fake_missing!,host"}) {
    BOOST_TEST_CONTEXT(selector) {
      const std::string what =
          error_of([&] { registry.create(selector); }, Status::unavailable).what();
      BOOST_TEST(contains(what, "driver missing: libfakegpu.so.1 not found"), what);
      BOOST_TEST(contains(what, "required"), what);
    }
  }
  // Without '!' and nothing else to try, it is still an error naming the reason.
  const std::string what =
      error_of([&] { registry.create("fake_missing"); }, Status::unavailable).what();
  BOOST_TEST(contains(what, "no backend for selector 'fake_missing'"), what);
  BOOST_TEST(contains(what, "driver missing"), what);
}

BOOST_AUTO_TEST_CASE(create_failures_fall_through) {
  // The host plugin refuses an unknown option at create; the error names the option.
  const gpuplug::Options bad{{"no_such_option", "1"}};
  const std::string what =
      error_of([&] { registry.create("host", bad); }, Status::invalid_argument).what();
  BOOST_TEST(contains(what, "no_such_option"), what);
  BOOST_TEST(contains(what, "host:0: create: "), what);
}

BOOST_AUTO_TEST_CASE(options_reach_the_plugin) {
  auto gpu = registry.create("host", {{"device_memory_limit", "1M"}});
  const std::string what =
      error_of([&] { gpu->alloc(std::size_t{2} << 20, "too big"); }, Status::out_of_memory).what();
  BOOST_TEST(contains(what, "host:0: alloc: "), what);
}

BOOST_AUTO_TEST_CASE(auto_falls_back_to_host_and_records_why) {
  const auto s = registry.select("auto");
  BOOST_TEST(s.chosen == "host:0");
  BOOST_TEST(s.backend->plugin_name() == "host");
  bool names_fake = false;
  for (const auto& why : s.passed_over) {
    if (why == "fake_missing: driver missing: libfakegpu.so.1 not found") names_fake = true;
    BOOST_TEST(!contains(why, "duplicate name"), why);  // the real host speaks for its name
  }
  BOOST_TEST(names_fake, s.explain());
  BOOST_TEST(contains(s.explain(), "fake_missing: driver missing"));
  BOOST_TEST(registry.create()->name() == "host:0");  // "auto" is the default selector
}

BOOST_AUTO_TEST_CASE(gpuplug_backend_replaces_auto) {
  {
    ScopedEnv env("GPUPLUG_BACKEND", "nosuch,host");
    const auto s = registry.select("auto");
    BOOST_TEST(s.chosen == "host:0");
    BOOST_REQUIRE_EQUAL(s.passed_over.size(), 1u);
    BOOST_TEST(contains(s.passed_over[0], "nosuch"));
  }
  {
    ScopedEnv env("GPUPLUG_BACKEND", "fake_missing!");
    const std::string what = error_of([&] { registry.create("auto"); }, Status::unavailable).what();
    BOOST_TEST(contains(what, "GPUPLUG_BACKEND"), what);
    BOOST_TEST(contains(what, "driver missing"), what);
    // An explicit selector is not replaced.
    BOOST_TEST(registry.create("host")->name() == "host:0");
    // "auto" inside a list is replaced too.
    BOOST_CHECK_THROW(registry.create("nosuch,auto"), Error);
  }
  {
    ScopedEnv env("GPUPLUG_BACKEND", "BAD:");
    const std::string what =
        error_of([&] { registry.create("auto"); }, Status::invalid_argument).what();
    BOOST_TEST(contains(what, "GPUPLUG_BACKEND"), what);
    BOOST_TEST(contains(what, "'BAD:'"), what);
  }
  {
    ScopedEnv env("GPUPLUG_BACKEND", "");  // empty: plain auto
    BOOST_TEST(registry.create("auto")->name() == "host:0");
  }
}

BOOST_AUTO_TEST_CASE(no_plugins_at_all) {
  gpuplug::PluginRegistry never;  // never discovered: the error says what to do
  BOOST_TEST(contains(error_of([&] { never.create("auto"); }, Status::not_found).what(),
                      "call discover() first"));
  BOOST_TEST(contains(error_of([&] { never.create("host"); }, Status::not_found).what(),
                      "call discover() first"));
}

BOOST_AUTO_TEST_SUITE_END()
