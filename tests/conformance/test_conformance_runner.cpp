// SPDX-License-Identifier: Apache-2.0
// Unit tests of the conformance runner itself: known-failure files, outcomes, tallies, leak check.
#define BOOST_TEST_MODULE conformance_runner
#include <boost/test/unit_test.hpp>
#include <set>

#include "cases.hpp"
#include "helpers.hpp"

namespace conf = gpuplug::conformance;

namespace {

/// The host target, from normal discovery (the build tree's plugin folder).
const conf::Target& host_target() {
  static const conf::Target target = conf::target_for_selector("host!");
  return target;
}

void passes(conf::Context& ctx) { ctx.note("a note"); }
void fails(conf::Context&) { GPUPLUG_CHECK_EQ(1 + 1, 3); }
void skips(conf::Context&) { conf::skip("not here"); }
void throws_error(conf::Context& ctx) { ctx.backend().free(gpuplug::DevicePtr{0xdead0000}); }
void leaks(conf::Context& ctx) { ctx.backend().alloc(100, "runner_leak"); }
void wrong_status(conf::Context& ctx) {
  GPUPLUG_CHECK_THROWS(ctx.backend().free(gpuplug::DevicePtr{0xdead0000}),
                       gpuplug::Status::not_found);
}

}  // namespace

BOOST_AUTO_TEST_CASE(known_failures_parse) {
  const auto kf = conf::KnownFailures::parse(
      "# comment\n"
      "\n"
      "cuda diff_gemm_f32   TF32 on sm_80 (issue 12)  # trailing comment\n"
      "  hip\tstreams\tno stream priorities\n"
      "host only_two_fields\n",
      "test.txt");
  BOOST_TEST(kf.size() == 2u);
  BOOST_TEST(kf.reason("cuda", "diff_gemm_f32").value_or("") == "TF32 on sm_80 (issue 12)");
  BOOST_TEST(kf.reason("hip", "streams").value_or("") == "no stream priorities");
  BOOST_TEST(!kf.reason("host", "diff_gemm_f32").has_value());
  const auto problems = kf.problems();
  BOOST_TEST(problems.size() == 1u);
  BOOST_TEST(problems.at(0).find("test.txt:5") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(known_failures_naming_no_case_are_problems) {
  const auto kf = conf::KnownFailures::parse("host no_such_case why\nhost zero_byte_alloc why\n");
  const auto problems = kf.problems();
  BOOST_TEST(problems.size() == 1u);
  BOOST_TEST(problems.at(0).find("no_such_case") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(installed_known_failures_file_is_clean) {
  const auto kf = conf::KnownFailures::load(conf::KnownFailures::default_file());
  for (const auto& p : kf.problems()) BOOST_ERROR(p);
}

BOOST_AUTO_TEST_CASE(outcomes) {
  const conf::KnownFailures none;
  const auto run = [&](void (*f)(conf::Context&)) {
    return conf::run_case({"runner", "", f}, host_target(), none);
  };

  const auto p = run(passes);
  BOOST_TEST(p.outcome == conf::Outcome::passed);
  BOOST_TEST(p.notes == std::vector<std::string>{"a note"});

  const auto f = run(fails);
  BOOST_TEST(f.outcome == conf::Outcome::failed);
  BOOST_TEST(f.reason.find("1 + 1 == 3 (2 vs 3)") != std::string::npos, f.reason);
  BOOST_TEST(f.reason.find("test_conformance_runner.cpp:") != std::string::npos, f.reason);

  const auto s = run(skips);
  BOOST_TEST(s.outcome == conf::Outcome::skipped);
  BOOST_TEST(s.reason == "not here");

  const auto e = run(throws_error);
  BOOST_TEST(e.outcome == conf::Outcome::failed);
  BOOST_TEST(e.reason.find("unexpected Error(invalid_argument") != std::string::npos, e.reason);

  const auto w = run(wrong_status);
  BOOST_TEST(w.outcome == conf::Outcome::failed);
  BOOST_TEST(w.reason.find("expected Error(not_found)") != std::string::npos, w.reason);

  const auto l = run(leaks);
  BOOST_TEST(l.outcome == conf::Outcome::failed);
  BOOST_TEST(l.reason.find("left 1 allocation") != std::string::npos, l.reason);
  BOOST_TEST(l.reason.find("runner_leak") != std::string::npos, l.reason);
}

// A failure message stands on its own: the kit installs no test sources, so an author reading
// `gpuplug check` output must learn from the line itself what was checked and with what inputs.
BOOST_AUTO_TEST_CASE(failures_say_what_was_checked_and_with_which_inputs) {
  const conf::KnownFailures none;
  const auto bare = conf::run_case({"runner", "one plus one makes three", fails}, host_target(), none);
  BOOST_TEST(bare.reason.find("the case checks that one plus one makes three") != std::string::npos,
             bare.reason);
  const auto worded = conf::run_case(
      {"runner", "unused", [](conf::Context&) { conf::fail("a worded message"); }}, host_target(),
      none);
  BOOST_TEST(worded.reason.find("the case checks") == std::string::npos, worded.reason);

  const std::vector<float> in = {1.0f, 1.0625f};
  const auto message_of = [](auto&& check) {
    try {
      check();
    } catch (const conf::CheckFailure& f) {
      return f.message();
    }
    return std::string("(no failure)");
  };
  const std::string e4m3 = message_of([&] {
    conf::check_bytes_equal({0x38, 0x39}, {0x38, 0x38}, "cast",
                         [&](std::size_t i) { return "f32 input " + conf::float_text(in[i]); });
  });
  BOOST_TEST(e4m3 == "cast: byte 1 for f32 input 1.0625 (0x3f880000) is 0x39, expected 0x38");
  const std::string ulps = message_of([&] {
    conf::check_within_ulps({1.0f, 2.0f}, {1.0f, 1.5f}, 1, "axpy",
                         [&](std::size_t i) { return "x = " + conf::float_text(in[i]); });
  });
  BOOST_TEST(ulps == "axpy: element 1 for x = 1.0625 (0x3f880000) is 2 (0x40000000), expected 1.5 "
                     "(0x3fc00000) (within 1 ulp)");
}

BOOST_AUTO_TEST_CASE(known_failures_turn_into_xfail_and_xpass) {
  const auto kf = conf::KnownFailures::parse("host runner known bug\n");
  const auto xfail = conf::run_case({"runner", "", fails}, host_target(), kf);
  BOOST_TEST(xfail.outcome == conf::Outcome::xfail);
  BOOST_TEST(xfail.reason.find("known bug") != std::string::npos, xfail.reason);
  BOOST_TEST(xfail.reason.find("2 vs 3") != std::string::npos, xfail.reason);

  const auto xpass = conf::run_case({"runner", "", passes}, host_target(), kf);
  BOOST_TEST(xpass.outcome == conf::Outcome::xpass);

  const auto skipped = conf::run_case({"runner", "", skips}, host_target(), kf);
  BOOST_TEST(skipped.outcome == conf::Outcome::skipped);

  // A "crash" entry is not run at all.
  const auto crash = conf::KnownFailures::parse("host runner crash: segfaults\n");
  const auto not_run = conf::run_case({"runner", "", fails}, host_target(), crash);
  BOOST_TEST(not_run.outcome == conf::Outcome::xfail);
  BOOST_TEST(not_run.reason.find("not run") != std::string::npos, not_run.reason);
}

BOOST_AUTO_TEST_CASE(tally_line) {
  conf::Tally t;
  for (auto o : {conf::Outcome::passed, conf::Outcome::failed, conf::Outcome::xpass,
                 conf::Outcome::skipped, conf::Outcome::xfail, conf::Outcome::xfail}) {
    t.add(o);
  }
  BOOST_TEST(t.line() == "1 passed, 2 failed, 3 skipped");
}

BOOST_AUTO_TEST_CASE(case_names_are_unique_snake_case) {
  std::set<std::string_view> names;
  for (const auto& c : conf::all_cases()) {
    BOOST_TEST(names.insert(c.name).second, "duplicate case " << c.name);
    BOOST_TEST(!c.summary.empty(), c.name << " has no summary");
    for (char ch : c.name)
      BOOST_TEST(((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_'), c.name);
  }
}

BOOST_AUTO_TEST_CASE(selector_filter_reports_missing_and_required) {
  const auto d = conf::discover_targets("host,no_such_plugin:2!");
  BOOST_TEST(d.targets.size() == 1u);
  BOOST_TEST(d.targets.at(0).plugin == "host");
  BOOST_TEST(d.unavailable.size() == 1u);
  BOOST_TEST(d.unavailable.at(0).name == "no_such_plugin");
  BOOST_TEST(d.required_missing == std::vector<std::string>{"no_such_plugin:2!"});
}
