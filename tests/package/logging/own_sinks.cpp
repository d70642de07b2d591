// SPDX-License-Identifier: Apache-2.0
// An application with a Boost.Log sink of its own: gpuplug's records reach that sink exactly
// once, with the standard Severity and Channel and gpuplug's own attributes, and nothing of
// gpuplug's is duplicated on stderr or stdout.
#include <boost/core/null_deleter.hpp>
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

int main() {
  ::unsetenv("GPUPLUG_LOG");
  logging_test::Checks checks;
  logging_test::Capture out(1);
  logging_test::Capture err(2);

  auto stream = boost::make_shared<std::ostringstream>();
  auto backend = boost::make_shared<blog::sinks::text_ostream_backend>();
  backend->add_stream(stream);
  backend->auto_flush(true);
  using sink_t = blog::sinks::synchronous_sink<blog::sinks::text_ostream_backend>;
  auto sink = boost::make_shared<sink_t>(backend);
  sink->set_formatter(
      expr::stream << "<" << blog::trivial::severity << "> " << expr::attr<std::string>("Channel")
                   << "/" << expr::attr<std::string>("gpuplug.Channel") << ": " << expr::smessage);
  blog::core::get()->add_sink(sink);

  BOOST_LOG_TRIVIAL(info) << "app record";
  logging_test::discover_with_a_relative_path_element();
  gpuplug::log(gpuplug::LogLevel::error, "app-test", "a public error");
  blog::core::get()->remove_sink(sink);

  const std::string sink_text = stream->str();
  const std::string stdout_text = out.text();
  const std::string stderr_text = err.text();
  checks.expect_count(sink_text, "<info> /: app record", 1, "the application's sink");
  checks.expect_count(sink_text,
                      "<warning> gpuplug/registry: ignoring relative GPUPLUG_PLUGIN_PATH element "
                      "'relative-plugin-dir'",
                      1, "the application's sink");
  checks.expect_count(sink_text, "<error> gpuplug/app-test: a public error", 1,
                      "the application's sink");
  checks.expect_count(stderr_text, "gpuplug", 0, "stderr");
  checks.expect_count(stdout_text, "gpuplug", 0, "stdout");
  return checks.exit_status();
}
