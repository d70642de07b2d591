// SPDX-License-Identifier: Apache-2.0
// An application whose sink filters with the standard `trivial::severity >= warning`: gpuplug's
// warnings and errors pass it and its formatter prints their severity; gpuplug's info records
// are dropped by that filter, and not written to stderr instead.
#include <boost/log/core.hpp>
#include <boost/log/expressions.hpp>
#include <boost/log/sinks/sync_frontend.hpp>
#include <boost/log/sinks/text_ostream_backend.hpp>
#include <boost/log/trivial.hpp>
#include <boost/make_shared.hpp>
#include <cstdlib>
#include <gpuplug/gpuplug.hpp>
#include <sstream>

#include "capture.hpp"
#include "gpuplug_warns.hpp"

namespace blog = boost::log;
namespace expr = boost::log::expressions;
namespace trivial = boost::log::trivial;

int main() {
  ::unsetenv("GPUPLUG_LOG");
  logging_test::Checks checks;
  logging_test::Capture err(2);

  auto stream = boost::make_shared<std::ostringstream>();
  auto backend = boost::make_shared<blog::sinks::text_ostream_backend>();
  backend->add_stream(stream);
  backend->auto_flush(true);
  auto sink =
      boost::make_shared<blog::sinks::synchronous_sink<blog::sinks::text_ostream_backend>>(backend);
  sink->set_filter(trivial::severity >= trivial::warning);
  sink->set_formatter(expr::stream << "[" << trivial::severity << "] " << expr::smessage);
  blog::core::get()->add_sink(sink);

  gpuplug::set_log_level(gpuplug::LogLevel::info);  // gpuplug emits info; the app's filter decides
  gpuplug::log(gpuplug::LogLevel::info, "app-test", "an info record");
  logging_test::discover_with_a_relative_path_element();
  gpuplug::log(gpuplug::LogLevel::warning, "app-test", "a warning record");
  gpuplug::log(gpuplug::LogLevel::error, "app-test", "an error record");
  gpuplug::log(gpuplug::LogLevel::info, "app-test", "another info record");
  BOOST_LOG_TRIVIAL(info) << "app info";
  BOOST_LOG_TRIVIAL(error) << "app error";
  blog::core::get()->remove_sink(sink);

  const std::string sink_text = stream->str();
  const std::string stderr_text = err.text();
  checks.expect_count(sink_text, "[warning] a warning record", 1, "the application's sink");
  checks.expect_count(sink_text, "[error] an error record", 1, "the application's sink");
  checks.expect_count(sink_text, "[warning] ignoring relative GPUPLUG_PLUGIN_PATH element", 1,
                      "the application's sink");
  checks.expect_count(sink_text, "info record", 0, "the application's sink");
  checks.expect_count(sink_text, "[error] app error", 1, "the application's sink");
  checks.expect_count(sink_text, "app info", 0, "the application's sink");
  checks.expect_count(stderr_text, "gpuplug", 0, "stderr");
  return checks.exit_status();
}
