// SPDX-License-Identifier: Apache-2.0
// The conformance suite under Boost.Test: one test suite per backend found at run time.
//
// Registration is dynamic (BOOST_TEST_ALTERNATIVE_INIT_API): at start-up the registry discovers
// the plugins; every available one gets a test suite named after it with one test case per
// conformance case, and every unavailable or broken one a test case "<plugin>_unavailable" that
// Boost reports as skipped with the plugin's reason ("skipped because precondition failed: ...").
// Nothing is dropped silently. GPUPLUG_BACKEND (e.g. "cuda:0") restricts the run to the backends
// it names; a name with '!' ("cuda:0!") makes its absence a failure instead of a skip.
// The verdicts come from the same run_case() that `gpuplug check` uses; after the run a summary
// per backend lists every case that did not pass, with its reason.

#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "cases.hpp"

namespace utf = boost::unit_test;
namespace conf = gpuplug::conformance;

namespace {

struct Run {
  conf::Discovered discovered;
  conf::KnownFailures known;
  std::filesystem::path known_file;
  struct Backend {
    conf::Tally tally;
    std::vector<std::string> remarks;  // "case: outcome: reason"
  };
  std::map<std::string, Backend> backends;  // by backend name, in name order
};

Run& run() {
  static Run r;
  return r;
}

std::string unit_name(std::string text) {
  for (char& c : text) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) c = '_';
  }
  return text;
}

void run_conformance_case(const conf::Target* target, const conf::Case* c) {
  const conf::Result r = conf::run_case(*c, *target, run().known);
  auto& backend = run().backends[target->backend_name()];
  backend.tally.add(r.outcome);
  const std::string label = std::string(c->name) + ": " + std::string(conf::to_string(r.outcome));
  switch (r.outcome) {
    case conf::Outcome::passed:
      for (const auto& n : r.notes) BOOST_TEST_MESSAGE(label << " (" << n << ")");
      BOOST_TEST(true);
      break;
    case conf::Outcome::skipped:
    case conf::Outcome::xfail:
      BOOST_TEST_MESSAGE(label << ": " << r.reason);
      backend.remarks.push_back(label + ": " + r.reason);
      BOOST_TEST(true);
      break;
    case conf::Outcome::failed:
    case conf::Outcome::xpass:
      backend.remarks.push_back(label + ": " + r.reason);
      BOOST_ERROR(target->backend_name() << " " << label << ": " << r.reason);
      break;
  }
}

void check_known_failures_file() {
  BOOST_TEST_MESSAGE("known failures: " << run().known_file.string() << " (" << run().known.size()
                                        << " entries)");
  for (const auto& problem : run().known.problems()) BOOST_ERROR(problem);
  BOOST_TEST(true);
}

void check_unique_case_names() {
  std::set<std::string_view> names;
  for (const auto& c : conf::all_cases())
    BOOST_CHECK_MESSAGE(names.insert(c.name).second, "duplicate case name " << c.name);
}

bool init_conformance() {
  utf::test_suite& master = utf::framework::master_test_suite();
  master.p_name.value = "conformance";
  Run& r = run();
  r.known_file = conf::KnownFailures::default_file();
  r.known = conf::KnownFailures::load(r.known_file);
  master.add(
      utf::make_test_case(&check_known_failures_file, "known_failures_file", __FILE__, __LINE__));
  master.add(
      utf::make_test_case(&check_unique_case_names, "case_names_unique", __FILE__, __LINE__));

  const char* filter = std::getenv("GPUPLUG_BACKEND");
  try {
    r.discovered = conf::discover_targets(filter != nullptr ? filter : "");
  } catch (const std::exception& e) {
    const std::string why =
        std::string("GPUPLUG_BACKEND='") + filter + "' is not a selector: " + e.what();
    master.add(
        utf::make_test_case([why] { BOOST_ERROR(why); }, "backend_selector", __FILE__, __LINE__));
    return true;
  }

  for (const conf::Target& target : r.discovered.targets) {
    const std::string suite_name =
        unit_name(target.ordinal == 0 ? target.plugin : target.backend_name());
    auto* suite = BOOST_TEST_SUITE(suite_name);
    for (const conf::Case& c : conf::all_cases()) {
      suite->add(utf::make_test_case([t = &target, pc = &c] { run_conformance_case(t, pc); },
                                     std::string(c.name), __FILE__, __LINE__));
    }
    master.add(suite);
    r.backends[target.backend_name()];
  }
  for (const gpuplug::PluginInfo& info : r.discovered.unavailable) {
    const std::string reason =
        info.name + " is " + std::string(gpuplug::to_string(info.state)) + " (" +
        std::string(gpuplug::to_string(info.reason)) + "): " + info.message +
        (info.path.empty() ? std::string() : " [" + info.path.string() + "]");
    auto* tc =
        utf::make_test_case([] {}, unit_name(info.name) + "_unavailable", __FILE__, __LINE__);
    tc->add_precondition([reason](utf::test_unit_id) {
      boost::test_tools::assertion_result result(false);
      result.message() << reason;
      return result;
    });
    master.add(tc);
  }
  for (const std::string& demanded : r.discovered.required_missing) {
    const std::string why = "GPUPLUG_BACKEND demands " + demanded + ", which is not available here";
    master.add(utf::make_test_case([why] { BOOST_ERROR(why); }, unit_name(demanded) + "_required",
                                   __FILE__, __LINE__));
  }
  return true;
}

void print_summary() {
  const Run& r = run();
  bool any = false;
  for (const auto& [name, backend] : r.backends)
    any = any || backend.tally.passed + backend.tally.failed + backend.tally.skipped > 0;
  if (!any && r.discovered.unavailable.empty()) return;
  std::cout << "\nconformance summary";
  if (!conf::sanitizer_name().empty()) std::cout << " (" << conf::sanitizer_name() << ")";
  std::cout << ":\n";
  for (const auto& [name, backend] : r.backends) {
    std::cout << "  " << name << ": " << backend.tally.line() << "\n";
    for (const auto& remark : backend.remarks) std::cout << "    " << remark << "\n";
  }
  for (const auto& info : r.discovered.unavailable) {
    std::cout << "  " << info.name << ": not run, " << gpuplug::to_string(info.state) << ": "
              << info.message << "\n";
  }
}

}  // namespace

int main(int argc, char* argv[]) {
  const int status = utf::unit_test_main(&init_conformance, argc, argv);
  print_summary();
  return status;
}
