// SPDX-License-Identifier: Apache-2.0
// The default route of a gpuplug record: the application's Boost.Log sinks when it has any that
// take gpuplug records, else one stderr line. gpuplug never leaves a sink in the Boost.Log core.
#include "logging/log_route.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <boost/log/attributes/attribute_set.hpp>
#include <boost/log/attributes/constant.hpp>
#include <boost/log/attributes/value_extraction.hpp>
#include <boost/log/core.hpp>
#include <boost/log/expressions/message.hpp>
#include <boost/log/sinks/sink.hpp>
#include <boost/log/sources/record_ostream.hpp>
#include <boost/log/trivial.hpp>
#include <boost/smart_ptr/make_shared_object.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace gpuplug::detail {

namespace {

namespace blog = boost::log;
namespace trivial = boost::log::trivial;

// The attributes of a gpuplug record (docs/logging.md). gpuplug's own names carry gpuplug's
// types; the standard "Severity" and "Channel" carry the types Boost.Log's own loggers use, so
// that an application's `trivial::severity >= warning` filter and its formatters work unchanged.
constexpr const char* gpuplug_severity_attr = "gpuplug.Severity";  // LogLevel
constexpr const char* gpuplug_channel_attr = "gpuplug.Channel";    // std::string: "cuda:0"
constexpr const char* severity_attr = "Severity";                  // trivial::severity_level
constexpr const char* channel_attr = "Channel";                    // std::string: "gpuplug"
constexpr const char* channel_value = "gpuplug";

trivial::severity_level trivial_level(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::trace:
      return trivial::trace;
    case LogLevel::debug:
      return trivial::debug;
    case LogLevel::info:
      return trivial::info;
    case LogLevel::warning:
      return trivial::warning;
    case LogLevel::error:
    case LogLevel::off:  // never logged; mapped only to keep the switch total
      return trivial::error;
  }
  return trivial::error;
}

blog::attribute_set record_attributes(LogLevel level, std::string_view channel) {
  blog::attribute_set attrs;
  attrs.insert(gpuplug_severity_attr, blog::attributes::constant<LogLevel>(level));
  attrs.insert(gpuplug_channel_attr, blog::attributes::constant<std::string>(std::string(channel)));
  attrs.insert(severity_attr,
               blog::attributes::constant<trivial::severity_level>(trivial_level(level)));
  attrs.insert(channel_attr, blog::attributes::constant<std::string>(channel_value));
  return attrs;
}

/// Opens a record with `attrs` in the core and, when some sink takes it, pushes `message`.
bool push_through_core(const blog::attribute_set& attrs, std::string_view message) {
  const blog::core_ptr core = blog::core::get();
  blog::record rec = core->open_record(attrs);
  if (!rec) return false;
  {
    blog::record_ostream stream(rec);
    stream << message;
    stream.flush();
  }
  core->push_record(std::move(rec));
  return true;
}

// ---- does the application have sinks? -------------------------------------------------------
//
// Boost.Log cannot list its sinks (boostorg/log#184), and while none is registered its core sends
// every record to a built-in default sink (stdout) that accepts everything, so "some sink took
// the record" cannot tell the application's sinks from that default. gpuplug therefore asks with
// a stand-in registered for the duration of the question: any registered sink switches the
// default sink off, and the stand-in refuses the question's records, so they open only if one of
// the application's sinks takes them. Records the application logs from other threads during
// those microseconds reach the stand-in instead of the switched-off default sink; it holds them
// until the answer is known and then prints them as the default sink would have (or drops them
// when the application's sinks had them), so no application record is lost or doubled.

thread_local bool asking = false;  // set while this thread opens the question's records

/// The Boost.Log default sink's line: "[2026-11-30 20:55:00.123456] [0x00007f...] [info] text".
void print_like_default_sink(const blog::record_view& rec) {
  const auto severity = blog::extract_or_default<trivial::severity_level>(
      severity_attr, rec.attribute_values(), trivial::info);
  const auto message = blog::extract<std::string>("Message", rec.attribute_values());
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch() %
                                                                            std::chrono::seconds(1))
                          .count();
  std::tm tm{};
  ::localtime_r(&seconds, &tm);
  const char* level = trivial::to_string(severity);
  const int pad = std::max(0, 7 - static_cast<int>(std::strlen(level)));  // "[info]    text"
  std::fprintf(stdout, "[%04d-%02d-%02d %02d:%02d:%02d.%06ld] [0x%016lx] [%s]%*s %s\n",
               tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
               static_cast<long>(micros), static_cast<unsigned long>(::pthread_self()), level, pad,
               "", message ? message->c_str() : "");
}

class DefaultSinkStandIn final : public blog::sinks::sink {
 public:
  // cross_thread: records may be held and printed by the thread that asked, after the logging
  // thread moved on, so the core must detach them from that thread's attributes first.
  DefaultSinkStandIn() : sink(/*cross_thread=*/true) {}

  bool will_consume(const blog::attribute_value_set&) override { return !asking; }

  void consume(const blog::record_view& rec) override {
    std::unique_lock lock(mutex_);
    if (!app_has_sinks_) {
      held_.push_back(rec);  // the answer is not known yet
      return;
    }
    const bool print = !*app_has_sinks_;
    lock.unlock();
    if (print) print_like_default_sink(rec);
  }

  void flush() override { std::fflush(stdout); }

  /// A new question: records it takes from now on wait for its answer.
  void begin() {
    std::lock_guard lock(mutex_);
    app_has_sinks_.reset();
  }

  /// Records the answer and prints what was held when the default sink would have had it.
  void settle(bool app_has_sinks) {
    std::vector<blog::record_view> held;
    {
      std::lock_guard lock(mutex_);
      app_has_sinks_ = app_has_sinks;
      held.swap(held_);
    }
    if (!app_has_sinks) {
      for (const auto& rec : held) print_like_default_sink(rec);
    }
  }

 private:
  std::mutex mutex_;
  std::optional<bool> app_has_sinks_;    // guarded by mutex_; unset until settle()
  std::vector<blog::record_view> held_;  // guarded by mutex_
};

/// Whether an application sink takes `attrs`, or at least takes gpuplug's errors.
enum class Answer { takes_this_record, takes_gpuplug_records, none };

Answer ask_the_core(const blog::attribute_set& attrs,
                    const boost::shared_ptr<DefaultSinkStandIn>& stand_in) {
  const blog::core_ptr core = blog::core::get();
  Answer answer = Answer::none;
  stand_in->begin();
  core->add_sink(stand_in);
  try {
    asking = true;
    if (core->open_record(attrs)) {
      answer = Answer::takes_this_record;
    } else if (core->open_record(record_attributes(LogLevel::error, channel_value))) {
      // The record was filtered out by the application; its sinks do take gpuplug records.
      answer = Answer::takes_gpuplug_records;
    }
  } catch (...) {
    answer = Answer::none;
  }
  asking = false;
  core->remove_sink(stand_in);  // before anything else: nothing of ours stays in the core
  stand_in->settle(answer != Answer::none);
  return answer;
}

// Process-wide by nature, as the core is. Once an application sink took gpuplug records, gpuplug
// routes through the core from then on without asking again (an application that later removes
// all its sinks gets gpuplug's records from Boost.Log's default sink, on stdout).
struct RouteState {
  std::mutex asking_mutex;  // one question at a time: the stand-in holds one answer
  std::atomic<bool> app_has_sinks{false};
  std::mutex stderr_mutex;  // one line at a time
  // One stand-in for every question, alive for the whole process: a record another thread opened
  // during a question holds only a weak reference to it and is pushed after the question ended;
  // a stand-in destroyed by then would make the core drop that record.
  boost::shared_ptr<DefaultSinkStandIn> stand_in;
};

RouteState& route_state() {
  static RouteState* const s = [] {
    auto* st = new RouteState;  // never deleted: used by late destructors
    st->stand_in = boost::make_shared<DefaultSinkStandIn>();
    return st;
  }();
  return *s;
}

}  // namespace

void write_stderr_line(LogLevel level, std::string_view channel,
                       std::string_view message) noexcept {
  try {
    std::string line = "[gpuplug ";
    line.append(to_string(level)).append("] ").append(channel).append(": ").append(message);
    line.push_back('\n');
    RouteState& st = route_state();
    std::lock_guard lock(st.stderr_mutex);
    std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
    std::cerr.flush();
  } catch (...) {
    // No memory for the line, or a broken stream: logging never fails the caller.
  }
}

void route_record(LogLevel level, std::string_view channel, std::string_view message) noexcept {
  try {
    RouteState& st = route_state();
    const blog::attribute_set attrs = record_attributes(level, channel);
    if (!st.app_has_sinks.load(std::memory_order_acquire)) {
      std::unique_lock lock(st.asking_mutex);
      if (!st.app_has_sinks.load(std::memory_order_relaxed)) {
        const Answer answer = ask_the_core(attrs, st.stand_in);
        if (answer == Answer::none) {
          lock.unlock();
          write_stderr_line(level, channel, message);
          return;
        }
        st.app_has_sinks.store(true, std::memory_order_release);
        if (answer == Answer::takes_gpuplug_records) return;  // the application filtered it out
      }
    }
    push_through_core(attrs, message);
  } catch (...) {
    // Logging must never turn into a failure of the operation that logs.
  }
}

}  // namespace gpuplug::detail
