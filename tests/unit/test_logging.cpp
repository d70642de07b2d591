// SPDX-License-Identifier: Apache-2.0
// Logging: the `off` level, the application's callback (also under many threads and
// when it throws), and no warning when "auto" falls back to host because a GPU driver is missing.
#define BOOST_TEST_MODULE logging
#include <unistd.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <gpuplug/gpuplug.hpp>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "contains.hpp"
#include "loader_env.hpp"
#include "log_records.hpp"
#include "stderr_capture.hpp"
#include "test_print.hpp"

using gpuplug::LogLevel;
using namespace gpuplug::test;

namespace gpuplug {
inline std::ostream& boost_test_print_type(std::ostream& os, const LogLevel& l) {
  return os << to_string(l);
}
}  // namespace gpuplug

BOOST_TEST_GLOBAL_FIXTURE(LoaderEnvironment);

namespace {

using Record = LogRecord;
using Captured = LogRecords;

}  // namespace

BOOST_AUTO_TEST_CASE(off_is_a_level) {
  BOOST_TEST(gpuplug::parse_log_level("off").value() == LogLevel::off);
  BOOST_TEST(gpuplug::to_string(LogLevel::off) == "off");
  BOOST_TEST(gpuplug::parse_log_level("error").value() == LogLevel::error);
  BOOST_TEST(!gpuplug::parse_log_level("Off").has_value());
  Captured captured;
  gpuplug::set_log_level(LogLevel::off);
  gpuplug::log(LogLevel::error, "test", "silenced");
  BOOST_TEST(captured.take().empty());
  // Nothing is ever logged *at* off, whatever the threshold.
  gpuplug::set_log_level(LogLevel::trace);
  gpuplug::log(LogLevel::off, "test", "never");
  BOOST_TEST(captured.take().empty());
}

BOOST_AUTO_TEST_CASE(the_callback_receives_level_channel_and_message_and_nothing_goes_to_stderr) {
  StderrCapture err;
  {
    Captured captured;
    gpuplug::set_log_level(LogLevel::info);
    gpuplug::log(LogLevel::warning, "cuda:0", "device is warm");
    gpuplug::log(LogLevel::debug, "cuda:0", "below the level");
    const auto got = captured.take();
    BOOST_REQUIRE_EQUAL(got.size(), 1u);
    BOOST_TEST(got[0].level == LogLevel::warning);
    BOOST_TEST(got[0].channel == "cuda:0");
    BOOST_TEST(got[0].message == "device is warm");
  }
  // Reset (the Captured destructor): the default route, stderr here, is back.
  gpuplug::log(LogLevel::error, "test", "after the reset");
  const std::string text = err.text();
  BOOST_TEST(!contains(text, "device is warm"), text);
  BOOST_TEST(contains(text, "[gpuplug error] test: after the reset\n"), text);
}

BOOST_AUTO_TEST_CASE(a_throwing_callback_does_not_escape) {
  StderrCapture err;
  std::atomic<int> calls{0};
  gpuplug::set_log_callback([&calls](LogLevel, std::string_view, std::string_view) {
    ++calls;
    throw std::runtime_error("callback broke");
  });
  gpuplug::log(LogLevel::error, "test", "one");
  gpuplug::log(LogLevel::error, "test", "two");
  gpuplug::set_log_callback(nullptr);
  BOOST_TEST(calls.load() == 2);
  const std::string text = err.text();
  // Reported once, and the records themselves did not fall through to stderr.
  BOOST_TEST(contains(text, "the log callback threw"), text);
  BOOST_TEST(text.find("the log callback threw") == text.rfind("the log callback threw"), text);
  BOOST_TEST(!contains(text, "test: one"), text);
}

BOOST_AUTO_TEST_CASE(callbacks_swap_safely_under_eight_logging_threads) {
  const LogLevel old = gpuplug::log_level();
  gpuplug::set_log_level(LogLevel::info);
  constexpr int threads = 8;
  constexpr int per_thread = 2000;
  std::atomic<long> a{0}, b{0};
  std::atomic<bool> bad{false};
  auto make = [&bad](std::atomic<long>& counter) {
    return [&counter, &bad](LogLevel l, std::string_view c, std::string_view m) {
      if (l != LogLevel::info || c != "worker" || m != "tick") bad = true;
      ++counter;
    };
  };
  gpuplug::set_log_callback(make(a));
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&go] {
      while (!go) std::this_thread::yield();
      for (int i = 0; i < per_thread; ++i) gpuplug::log(LogLevel::info, "worker", "tick");
    });
  }
  go = true;
  for (int swap = 0; swap < 500; ++swap) gpuplug::set_log_callback(make(swap % 2 ? a : b));
  for (auto& w : workers) w.join();
  gpuplug::set_log_callback({});
  gpuplug::set_log_level(old);
  // Every record reached exactly one callback, intact.
  BOOST_TEST(a.load() + b.load() == long{threads} * per_thread);
  BOOST_TEST(!bad.load());
}

BOOST_AUTO_TEST_CASE(auto_falling_back_to_host_is_not_a_warning) {
  // fake_missing is a GPU-like plugin whose driver is missing: the normal case on a CPU-only
  // machine. Falling back to host must not warn on every start; the reasons are info.
  ScopedEnv no_backend("GPUPLUG_BACKEND", std::nullopt);
  Captured captured;
  gpuplug::set_log_level(LogLevel::trace);
  gpuplug::PluginRegistry registry;
  registry.discover();
  const auto selection = registry.select("auto");
  BOOST_TEST(selection.chosen == "host:0");
  BOOST_TEST(!selection.passed_over.empty());
  bool fallback_at_info = false;
  for (const Record& r : captured.take()) {
    BOOST_TEST(r.level < LogLevel::warning, r.channel << ": " << r.message);
    if (r.level == LogLevel::info && contains(r.message, "fake_missing: driver missing")) {
      fallback_at_info = true;
    }
  }
  BOOST_TEST(fallback_at_info);
}
