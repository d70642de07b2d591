// SPDX-License-Identifier: Apache-2.0
// GPUPLUG_LOG=off (set by the test): gpuplug says nothing, anywhere, even errors; the
// application's own records are untouched.
#include <boost/log/trivial.hpp>
#include <gpuplug/gpuplug.hpp>

#include "capture.hpp"
#include "gpuplug_warns.hpp"

int main() {
  logging_test::Checks checks;
  logging_test::Capture out(1);
  logging_test::Capture err(2);
  logging_test::discover_with_a_relative_path_element();
  gpuplug::log(gpuplug::LogLevel::error, "app-test", "an error");
  BOOST_LOG_TRIVIAL(info) << "app record";
  const bool level_off = gpuplug::log_level() == gpuplug::LogLevel::off;
  const std::string stdout_text = out.text();
  const std::string stderr_text = err.text();
  checks.expect(level_off, "GPUPLUG_LOG=off sets the level to off", "");
  checks.expect_count(stderr_text, "gpuplug", 0, "stderr");
  checks.expect_count(stdout_text, "gpuplug", 0, "stdout");
  checks.expect_count(stdout_text, "app record", 1, "stdout");
  return checks.exit_status();
}
