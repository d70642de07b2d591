// SPDX-License-Identifier: Apache-2.0
// Logging through Boost.Log: one stderr sink for everything gpuplug and its plugins report.
#include <atomic>
#include <boost/core/null_deleter.hpp>
#include <boost/log/attributes/constant.hpp>
#include <boost/log/attributes/value_extraction.hpp>
#include <boost/log/core.hpp>
#include <boost/log/expressions.hpp>
#include <boost/log/sinks/sync_frontend.hpp>
#include <boost/log/sinks/text_ostream_backend.hpp>
#include <boost/log/sources/record_ostream.hpp>
#include <boost/shared_ptr.hpp>
#include <boost/smart_ptr/make_shared_object.hpp>
#include <gpuplug/log.hpp>
#include <iostream>
#include <string>

#include "environment.hpp"

namespace gpuplug {

namespace {

namespace blog = boost::log;

// Attribute names of gpuplug records. The sink only takes records that carry a gpuplug
// severity, so an application's own Boost.Log records are left to the application's sinks.
constexpr const char* severity_attr = "Severity";
constexpr const char* channel_attr = "Channel";

const char* level_name(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::trace:
      return "trace";
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warning:
      return "warning";
    case LogLevel::error:
      return "error";
  }
  return "?";
}

void format_record(const blog::record_view& rec, blog::formatting_ostream& out) {
  const auto level = blog::extract<LogLevel>(severity_attr, rec);
  const auto channel = blog::extract<std::string>(channel_attr, rec);
  out << "[gpuplug " << (level ? level_name(*level) : "?") << "] "
      << (channel ? *channel : std::string("gpuplug")) << ": " << rec[blog::expressions::smessage];
}

// Logging is process-wide by nature (one stderr, one Boost.Log core), so its state is the one
// static of the core. It is created on first use and deliberately never destroyed: plugins and
// backends may log from static destructors of the application, after a destroyed sink would be
// gone. Invariant: `sink` is registered with the Boost.Log core exactly once.
struct LogState {
  std::atomic<int> level{static_cast<int>(LogLevel::warning)};
  boost::shared_ptr<blog::sinks::synchronous_sink<blog::sinks::text_ostream_backend>> sink;
};

void emit(LogLevel level, std::string_view channel, std::string_view message);

LogState& state() noexcept {
  static LogState* const s = [] {
    auto* st = new LogState;  // never deleted, see above
    std::string bad_env;
    // lookup_environment, not read_environment: that one logs, and logging is not set up yet.
    const detail::EnvironmentValue env = detail::lookup_environment("GPUPLUG_LOG");
    if (env.value) {
      if (auto parsed = parse_log_level(*env.value)) {
        st->level.store(static_cast<int>(*parsed), std::memory_order_relaxed);
      } else {
        bad_env = *env.value;
      }
    }
    try {
      auto backend = boost::make_shared<blog::sinks::text_ostream_backend>();
      backend->add_stream(boost::shared_ptr<std::ostream>(&std::cerr, boost::null_deleter()));
      backend->auto_flush(true);
      st->sink =
          boost::make_shared<blog::sinks::synchronous_sink<blog::sinks::text_ostream_backend>>(
              backend);
      st->sink->set_formatter(&format_record);
      st->sink->set_filter(blog::expressions::has_attr<LogLevel>(severity_attr));
      blog::core::get()->add_sink(st->sink);
    } catch (...) {
      st->sink.reset();  // logging stays off rather than failing the caller
    }
    if (env.ignored_elevated && st->sink) {
      emit(LogLevel::warning, "environment",
           "ignoring GPUPLUG_LOG: the process runs with elevated privileges (setuid, setgid or "
           "capabilities)");
    }
    if (!bad_env.empty() && st->sink) {
      // Reported once: this initialiser runs once. emit() does not call state().
      emit(
          LogLevel::warning, "log",
          "ignoring GPUPLUG_LOG='" + bad_env + "' (expected trace, debug, info, warning or error)");
    }
    return st;
  }();
  return *s;
}

void emit(LogLevel level, std::string_view channel, std::string_view message) {
  auto core = blog::core::get();
  blog::attribute_set attrs;
  attrs.insert(severity_attr, blog::attributes::constant<LogLevel>(level));
  attrs.insert(channel_attr, blog::attributes::constant<std::string>(std::string(channel)));
  blog::record rec = core->open_record(attrs);
  if (!rec) return;
  {
    blog::record_ostream stream(rec);
    stream << message;
    stream.flush();
  }
  core->push_record(std::move(rec));
}

}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view text) noexcept {
  if (text == "trace") return LogLevel::trace;
  if (text == "debug") return LogLevel::debug;
  if (text == "info") return LogLevel::info;
  if (text == "warning" || text == "warn") return LogLevel::warning;
  if (text == "error") return LogLevel::error;
  return std::nullopt;
}

void set_log_level(LogLevel level) noexcept {
  state().level.store(static_cast<int>(level), std::memory_order_relaxed);
}

LogLevel log_level() noexcept {
  return static_cast<LogLevel>(state().level.load(std::memory_order_relaxed));
}

void log(LogLevel level, std::string_view channel, std::string_view message) noexcept {
  LogState& st = state();
  if (static_cast<int>(level) < st.level.load(std::memory_order_relaxed) || !st.sink) return;
  try {
    emit(level, channel, message);
  } catch (...) {
    // Logging must never turn into a failure of the operation that logs.
  }
}

}  // namespace gpuplug
