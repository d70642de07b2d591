// SPDX-License-Identifier: Apache-2.0
// Errors an application can act on: the operation as a field and once in what(), one
// status per kind of selection failure, and messages that say what to do.
#define BOOST_TEST_MODULE errors
#include <boost/test/unit_test.hpp>
#include <gpuplug/gpuplug.hpp>
#include <string>
#include <vector>

#include "contains.hpp"
#include "error_of.hpp"
#include "loader_env.hpp"
#include "test_print.hpp"

using gpuplug::Error;
using gpuplug::Status;
using namespace gpuplug::test;

BOOST_TEST_GLOBAL_FIXTURE(LoaderEnvironment);

namespace {

std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

struct Registry {
  Registry() { registry.discover(); }
  gpuplug::PluginRegistry registry;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(operation)

BOOST_AUTO_TEST_CASE(the_operation_is_a_field_and_appears_once) {
  const Error e(Status::invalid_argument, "host:0", "copy_h2d", "copy_h2d: range overruns");
  BOOST_TEST(e.operation() == "copy_h2d");
  BOOST_TEST(e.message() == "range overruns");
  BOOST_TEST(std::string(e.what()) == "host:0: copy_h2d: range overruns");
  const Error old(Status::not_found, "host:0", "kernel k not found");  // the 3-argument form
  BOOST_TEST(old.operation().empty());
  BOOST_TEST(std::string(old.what()) == "host:0: kernel k not found");
}

BOOST_FIXTURE_TEST_CASE(a_plugin_failure_names_its_operation_once, Registry) {
  auto gpu = registry.create("host");
  const auto p = gpu->alloc(64, "test");
  std::vector<char> host(128);
  const Error e =
      error_of([&] { gpu->copy_h2d(p, host.data(), host.size()); }, Status::invalid_argument);
  BOOST_TEST(e.operation() == "copy_h2d");
  BOOST_TEST(e.backend() == "host:0");
  const std::string what = e.what();
  BOOST_TEST(occurrences(what, "copy_h2d") == 1u, what);
  BOOST_TEST(!contains(e.message(), "copy_h2d"), e.message());
  gpu->free(p);

  const Error create = error_of(
      [&] {
        registry.create("host", {{"no_such_option", "1"}});
      },
      Status::invalid_argument);
  BOOST_TEST(create.operation() == "create");
  BOOST_TEST(occurrences(create.what(), "create:") == 1u, create.what());
}

BOOST_FIXTURE_TEST_CASE(a_selection_failure_is_operation_select, Registry) {
  // Every failure to choose (malformed, unknown, absent, unusable, required, nothing found),
  // from select and from create; a backend's create refusing an option stays "create" (above).
  for (const char* s : {"", "host:x", "nosuch", "nosuch!", "host:7", "fake_missing",
                        "fake_missing!,host", "nosuch,nosuch2"}) {
    BOOST_TEST_CONTEXT(s) {
      const Error created = error_of([&] { registry.create(s); }, std::nullopt);
      BOOST_TEST(created.operation() == "select", created.what());
      const Error selected = error_of([&] { registry.select(s); }, std::nullopt);
      BOOST_TEST(selected.operation() == "select", selected.what());
      BOOST_TEST(contains(selected.what(), "select: "), selected.what());
    }
  }
  gpuplug::PluginRegistry undiscovered;
  BOOST_TEST(error_of([&] { undiscovered.select("host"); }, Status::not_found).operation() ==
             "select");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(selection_statuses, Registry)

BOOST_AUTO_TEST_CASE(unknown_name_is_not_found) {
  for (const char* s : {"nosuch", "nosuch!", "nosuch,nosuch2"}) {
    BOOST_TEST_CONTEXT(s) {
      error_of([&] { registry.create(s); }, Status::not_found);
    }
  }
}

BOOST_AUTO_TEST_CASE(an_absent_device_is_not_found) {
  for (const char* s : {"host:7", "host:7!", "host:7!,host"}) {
    BOOST_TEST_CONTEXT(s) {
      const Error e = error_of([&] { registry.create(s); }, Status::not_found);
      BOOST_TEST(contains(e.what(), "no such device"), e.what());
    }
  }
}

BOOST_AUTO_TEST_CASE(an_unusable_driver_is_unavailable) {
  for (const char* s : {"fake_missing", "fake_missing!", "fake_missing!,host", "abi2"}) {
    BOOST_TEST_CONTEXT(s) {
      error_of([&] { registry.create(s); }, Status::unavailable);
    }
  }
}

BOOST_AUTO_TEST_CASE(malformed_selectors_and_bad_options_are_invalid_argument) {
  for (const char* s : {"", "host:x", "Host", "host,,cuda", "host!opt=bad"}) {
    BOOST_TEST_CONTEXT(s) {
      error_of([&] { registry.create(s); }, Status::invalid_argument);
    }
  }
  // An option written into the selector is named as an option, with where options go.
  const Error in_selector =
      error_of([&] { registry.create("host!opt=bad"); }, Status::invalid_argument);
  BOOST_TEST(contains(in_selector.what(), "holds an option ('opt=bad')"), in_selector.what());
  BOOST_TEST(contains(in_selector.what(), "gpuplug::Options"), in_selector.what());
  const gpuplug::Options bad{{"no_such_option", "1"}};
  for (const char* s : {"host", "auto", "fake_missing,host", "host!"}) {
    BOOST_TEST_CONTEXT(s) {
      const Error e = error_of([&] { registry.create(s, bad); }, Status::invalid_argument);
      const std::string what = e.what();
      BOOST_TEST(contains(what, "bad option"), what);
      BOOST_TEST(contains(what, "'no_such_option'"), what);
      BOOST_TEST(!contains(what, "no backend for selector"), what);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(messages)

BOOST_AUTO_TEST_CASE(select_before_discover_says_so) {
  gpuplug::PluginRegistry registry;
  for (const char* s : {"auto", "host"}) {
    BOOST_TEST_CONTEXT(s) {
      const Error e = error_of([&] { registry.select(s); }, Status::not_found);
      BOOST_TEST(contains(e.what(), "no plugins discovered: call discover() first"), e.what());
    }
  }
}

BOOST_FIXTURE_TEST_CASE(a_typo_gets_a_suggestion, Registry) {
  const Error host = error_of([&] { registry.create("hots"); }, Status::not_found);
  BOOST_TEST(contains(host.what(), "did you mean host?"), host.what());
  const Error fake = error_of([&] { registry.create("fake_mising"); }, Status::not_found);
  BOOST_TEST(contains(fake.what(), "did you mean fake_missing?"), fake.what());
  // Plugins that failed to load are known names too.
  const Error failed = error_of([&] { registry.create("abi3"); }, Status::not_found);
  BOOST_TEST(contains(failed.what(), "did you mean abi2?"), failed.what());
  // Nothing close: no suggestion.
  const Error far = error_of([&] { registry.create("zzzzzzzz"); }, Status::not_found);
  BOOST_TEST(!contains(far.what(), "did you mean"), far.what());
}

BOOST_FIXTURE_TEST_CASE(an_error_from_gpuplug_backend_names_the_variable, Registry) {
  {
    ScopedEnv env("GPUPLUG_BACKEND", "hots");
    const Error e = error_of([&] { registry.create("auto"); }, Status::not_found);
    BOOST_TEST(contains(e.what(), "GPUPLUG_BACKEND='hots'"), e.what());
    BOOST_TEST(contains(e.what(), "did you mean host?"), e.what());
  }
  {
    ScopedEnv env("GPUPLUG_BACKEND", "host");
    const Error e = error_of(
        [&] {
          registry.create("auto", {{"no_such_option", "1"}});
        },
        Status::invalid_argument);
    BOOST_TEST(contains(e.what(), "GPUPLUG_BACKEND='host'"), e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()
