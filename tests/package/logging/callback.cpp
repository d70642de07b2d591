// SPDX-License-Identifier: Apache-2.0
// An application that takes gpuplug's records through set_log_callback (as it would into
// spdlog): the callback gets level, channel and message; nothing reaches stderr or the Boost.Log
// core meanwhile; an empty callback restores the default (stderr here, as the app has no sinks).
#include <boost/log/trivial.hpp>
#include <cstdlib>
#include <gpuplug/gpuplug.hpp>
#include <mutex>
#include <string>
#include <vector>

#include "capture.hpp"
#include "gpuplug_warns.hpp"

struct Received {
  gpuplug::LogLevel level;
  std::string channel;
  std::string message;
};

int main() {
  ::unsetenv("GPUPLUG_LOG");
  logging_test::Checks checks;
  logging_test::Capture out(1);
  logging_test::Capture err(2);

  std::mutex mutex;
  std::vector<Received> received;
  gpuplug::set_log_callback(
      [&](gpuplug::LogLevel level, std::string_view channel, std::string_view message) {
        std::lock_guard lock(mutex);
        received.push_back({level, std::string(channel), std::string(message)});
      });
  logging_test::discover_with_a_relative_path_element();
  gpuplug::log(gpuplug::LogLevel::error, "app-test", "to the callback");
  BOOST_LOG_TRIVIAL(info) << "app record while the callback is set";
  gpuplug::set_log_callback({});
  gpuplug::log(gpuplug::LogLevel::warning, "app-test", "after the reset");
  const std::string stdout_text = out.text();
  const std::string stderr_text = err.text();

  std::string got;
  for (const auto& r : received) {
    got += std::string(gpuplug::to_string(r.level)) + " " + r.channel + ": " + r.message + "\n";
  }
  checks.expect(received.size() == 2, "the callback got 2 records", got);
  if (received.size() == 2) {
    checks.expect(received[0].level == gpuplug::LogLevel::warning &&
                      received[0].channel == "registry" &&
                      received[0].message.find("ignoring relative GPUPLUG_PLUGIN_PATH element "
                                               "'relative-plugin-dir'") == 0,
                  "the registry's warning reached the callback", got);
    checks.expect(received[1].level == gpuplug::LogLevel::error &&
                      received[1].channel == "app-test" && received[1].message == "to the callback",
                  "the public error reached the callback", got);
  }
  checks.expect_count(stderr_text, "gpuplug", 1, "stderr");  // only the line after the reset
  checks.expect_count(stderr_text, "[gpuplug warning] app-test: after the reset", 1, "stderr");
  checks.expect_count(stdout_text, "app record while the callback is set", 1, "stdout");
  checks.expect_count(stdout_text, "gpuplug", 0, "stdout");
  return checks.exit_status();
}
