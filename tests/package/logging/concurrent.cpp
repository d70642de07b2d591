// SPDX-License-Identifier: Apache-2.0
// While gpuplug finds out whether the application has Boost.Log sinks, it registers a stand-in
// for a moment (docs/logging.md). Application records logged from other threads at that moment
// must be neither lost nor doubled: threads log BOOST_LOG_TRIVIAL records while gpuplug logs
// warnings, and every application record appears exactly once. With the argument "sinks" the
// application has a sink of its own (a stringstream) and nothing may reach stdout.
#include <atomic>
#include <boost/log/core.hpp>
#include <boost/log/expressions.hpp>
#include <boost/log/sinks/sync_frontend.hpp>
#include <boost/log/sinks/text_ostream_backend.hpp>
#include <boost/log/trivial.hpp>
#include <boost/make_shared.hpp>
#include <cstdlib>
#include <gpuplug/gpuplug.hpp>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "capture.hpp"

namespace blog = boost::log;

int main(int argc, char** argv) {
  const bool with_sinks = argc > 1 && std::string(argv[1]) == "sinks";
  ::unsetenv("GPUPLUG_LOG");
  logging_test::Checks checks;
  logging_test::Capture out(1);
  logging_test::Capture err(2);

  auto stream = boost::make_shared<std::ostringstream>();
  using sink_t = blog::sinks::synchronous_sink<blog::sinks::text_ostream_backend>;
  boost::shared_ptr<sink_t> sink;
  if (with_sinks) {
    auto backend = boost::make_shared<blog::sinks::text_ostream_backend>();
    backend->add_stream(stream);
    sink = boost::make_shared<sink_t>(backend);
    sink->set_formatter(blog::expressions::stream << blog::expressions::smessage);
    blog::core::get()->add_sink(sink);
  }

  // The application's threads log for as long as gpuplug does, so gpuplug's every record finds
  // them logging.
  constexpr int app_threads = 3;
  constexpr int gpuplug_records = 2000;
  // The trivial logger is made on first use; made here, before the threads, since
  // ThreadSanitizer cannot see the (uninstrumented) library's own locking of that first use.
  blog::trivial::logger::get();
  std::atomic<bool> go{false};
  std::atomic<bool> done{false};
  std::vector<int> per_thread(app_threads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < app_threads; ++t) {
    threads.emplace_back([&go, &done, &per_thread, t] {
      while (!go) std::this_thread::yield();
      int i = 0;
      for (; !done || i < 100; ++i) BOOST_LOG_TRIVIAL(info) << "app " << t << ":" << i << ";";
      per_thread[t] = i;
    });
  }
  go = true;
  for (int i = 0; i < gpuplug_records; ++i) {
    gpuplug::log(gpuplug::LogLevel::warning, "app-test", "gpuplug " + std::to_string(i) + ";");
  }
  done = true;
  for (auto& t : threads) t.join();
  if (sink) blog::core::get()->remove_sink(sink);

  const std::string stdout_text = out.text();
  const std::string stderr_text = err.text();
  const std::string& app_text = with_sinks ? stream->str() : stdout_text;
  const std::string where = with_sinks ? "the application's sink" : "stdout";
  // Each application record once: count the "app T:I;" tokens in one pass.
  std::map<std::string, int> seen;
  for (std::size_t at = app_text.find("app "); at != std::string::npos;
       at = app_text.find("app ", at + 1)) {
    const std::size_t end = app_text.find(';', at);
    if (end != std::string::npos) ++seen[app_text.substr(at, end - at + 1)];
  }
  int missing_or_doubled = 0;
  for (int t = 0; t < app_threads; ++t) {
    for (int i = 0; i < per_thread[t]; ++i) {
      const std::string record = "app " + std::to_string(t) + ":" + std::to_string(i) + ";";
      const auto it = seen.find(record);
      const int n = it == seen.end() ? 0 : it->second;
      if (n != 1 && ++missing_or_doubled <= 5) {
        checks.expect(false, where + " has '" + record + "' " + std::to_string(n) +
                                 " times, expected 1", "(output not shown)");
      }
    }
  }
  checks.expect(missing_or_doubled == 0,
                std::to_string(missing_or_doubled) + " application records lost or doubled", "");
  if (with_sinks) {
    checks.expect_count(stdout_text, "app ", 0, "stdout");
    checks.expect_count(app_text, "gpuplug ", gpuplug_records, where);
    checks.expect_count(stderr_text, "gpuplug", 0, "stderr");
  } else {
    checks.expect_count(stderr_text, "[gpuplug warning] app-test: gpuplug ", gpuplug_records,
                        "stderr");
    checks.expect_count(stdout_text, "gpuplug ", 0, "stdout");
  }
  return checks.exit_status();
}
