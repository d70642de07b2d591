// SPDX-License-Identifier: Apache-2.0
// An application with no Boost.Log sink of its own: its BOOST_LOG_TRIVIAL records still reach
// Boost.Log's default sink (stdout) after gpuplug has logged, and gpuplug's warnings go to
// stderr, each once, in gpuplug's own format.
#include <boost/log/trivial.hpp>
#include <cstdlib>
#include <gpuplug/gpuplug.hpp>

#include "capture.hpp"
#include "gpuplug_warns.hpp"

int main() {
  ::unsetenv("GPUPLUG_LOG");
  logging_test::Checks checks;
  logging_test::Capture out(1);
  logging_test::Capture err(2);
  BOOST_LOG_TRIVIAL(info) << "app record before gpuplug";
  gpuplug::log_level();  // touching gpuplug's logging changes nothing
  logging_test::discover_with_a_relative_path_element();
  gpuplug::log(gpuplug::LogLevel::warning, "app-test", "a public warning");
  BOOST_LOG_TRIVIAL(warning) << "app record after gpuplug";
  const std::string stdout_text = out.text();
  const std::string stderr_text = err.text();

  checks.expect_count(stdout_text, "app record before gpuplug", 1, "stdout");
  checks.expect_count(stdout_text, "app record after gpuplug", 1, "stdout");
  checks.expect_count(
      stderr_text, std::string("[gpuplug warning] ") + logging_test::registry_warning, 1, "stderr");
  checks.expect_count(stderr_text, "[gpuplug warning] app-test: a public warning", 1, "stderr");
  // Not through the default sink (stdout) as well.
  checks.expect_count(stdout_text, "relative GPUPLUG_PLUGIN_PATH", 0, "stdout");
  checks.expect_count(stdout_text, "a public warning", 0, "stdout");
  checks.expect_count(stderr_text, "app record", 0, "stderr");  // the app's records stay its own
  return checks.exit_status();
}
