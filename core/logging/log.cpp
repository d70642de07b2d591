// SPDX-License-Identifier: Apache-2.0
// Logging's front: the level (GPUPLUG_LOG), the application's callback, and the one log() that
// hands each record to the callback or to the default route (core/log_route.cpp).
#include <atomic>
#include <gpuplug/log.hpp>
#include <memory>
#include <mutex>
#include <string>

#include "logging/environment.hpp"
#include "logging/log_route.hpp"

namespace gpuplug {

namespace {

// Logging is process-wide by nature (one stderr, one Boost.Log core), so its state is one static
// of the core. It is created on first use and deliberately never destroyed: plugins and backends
// may log from static destructors of the application, after a destroyed state would be gone.
struct LogState {
  std::atomic<int> level{static_cast<int>(LogLevel::warning)};
  // What reading GPUPLUG_LOG has to say, said at the first record that passes the level (so that
  // it reaches a callback set before it, not a stderr line at first touch).
  std::string pending_warning;
  std::once_flag pending_said;
  std::mutex callback_mutex;
  // The application's callback; null: the default route. Replaced as a whole under the mutex and
  // copied out under it, so a call in progress keeps its callback alive past a replacement.
  std::shared_ptr<const LogCallback> callback;
  std::atomic<bool> callback_failure_reported{false};
};

LogState& state() noexcept {
  static LogState* const s = [] {
    auto* st = new LogState;  // never deleted, see above
    // lookup_environment, not read_environment: that one logs, and logging is not set up yet.
    const detail::EnvironmentValue env = detail::lookup_environment("GPUPLUG_LOG");
    try {
      if (env.value) {
        if (auto parsed = parse_log_level(*env.value)) {
          st->level.store(static_cast<int>(*parsed), std::memory_order_relaxed);
        } else {
          st->pending_warning = "ignoring GPUPLUG_LOG='" + *env.value +
                                "' (expected trace, debug, info, warning, error or off)";
        }
      } else if (env.ignored_elevated) {
        st->pending_warning =
            "ignoring GPUPLUG_LOG: the process runs with elevated privileges (setuid, setgid or "
            "capabilities)";
      }
    } catch (...) {
      st->pending_warning.clear();  // no memory for the warning: nothing to say
    }
    return st;
  }();
  return *s;
}

bool passes(const LogState& st, LogLevel level) noexcept {
  return level != LogLevel::off &&
         static_cast<int>(level) >= st.level.load(std::memory_order_relaxed);
}

/// Sends one record that passed the level to the callback, or else along the default route.
void dispatch(LogState& st, LogLevel level, std::string_view channel,
              std::string_view message) noexcept {
  std::shared_ptr<const LogCallback> callback;
  {
    std::lock_guard lock(st.callback_mutex);
    callback = st.callback;
  }
  if (!callback) {
    detail::route_record(level, channel, message);
    return;
  }
  try {
    (*callback)(level, channel, message);
  } catch (...) {
    // The callback is the application's only channel for our records, so its own failure can
    // only go to stderr; once, so that a callback that always throws does not flood it.
    if (!st.callback_failure_reported.exchange(true)) {
      detail::write_stderr_line(LogLevel::error, "log",
                                "the log callback threw; records it fails on are dropped");
    }
  }
}

}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view text) noexcept {
  if (text == "trace") return LogLevel::trace;
  if (text == "debug") return LogLevel::debug;
  if (text == "info") return LogLevel::info;
  if (text == "warning" || text == "warn") return LogLevel::warning;
  if (text == "error") return LogLevel::error;
  if (text == "off") return LogLevel::off;
  return std::nullopt;
}

std::string_view to_string(LogLevel level) noexcept {
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
    case LogLevel::off:
      return "off";
  }
  return "?";
}

void set_log_level(LogLevel level) noexcept {
  state().level.store(static_cast<int>(level), std::memory_order_relaxed);
}

LogLevel log_level() noexcept {
  return static_cast<LogLevel>(state().level.load(std::memory_order_relaxed));
}

void set_log_callback(LogCallback callback) {
  // Allocated before the lock; the old callback is released after it, outside the lock, since
  // its destructor is the application's code.
  std::shared_ptr<const LogCallback> next;
  if (callback) next = std::make_shared<const LogCallback>(std::move(callback));
  LogState& st = state();
  {
    std::lock_guard lock(st.callback_mutex);
    next.swap(st.callback);
  }
}

void log(LogLevel level, std::string_view channel, std::string_view message) noexcept {
  LogState& st = state();
  if (!passes(st, level)) return;
  if (!st.pending_warning.empty()) {
    try {
      std::call_once(st.pending_said, [&st] {
        if (passes(st, LogLevel::warning))
          dispatch(st, LogLevel::warning, "log", st.pending_warning);
      });
    } catch (...) {
      // call_once can only throw what the warning's dispatch does not: nothing to do.
    }
  }
  dispatch(st, level, channel, message);
}

}  // namespace gpuplug
