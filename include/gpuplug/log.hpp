// SPDX-License-Identifier: Apache-2.0
// Logging: one level and one destination for everything gpuplug and its plugins report, chosen
// by the application (a callback, its own Boost.Log sinks, or gpuplug's stderr line by default).
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

#include <functional>
#include <optional>
#include <string_view>

GPUPLUG_API_BEGIN
namespace gpuplug {

/// Severity of a gpuplug record. `off` is a threshold only: nothing is ever logged at `off`, so
/// set_log_level(LogLevel::off) (or GPUPLUG_LOG=off) silences gpuplug.
enum class LogLevel { trace = 0, debug = 1, info = 2, warning = 3, error = 4, off = 5 };

/// Parses "trace", "debug", "info", "warning" (or "warn"), "error", "off"; nullopt otherwise.
std::optional<LogLevel> parse_log_level(std::string_view text) noexcept;

/// "trace" ... "error", "off".
std::string_view to_string(LogLevel level) noexcept;

/// Sets the threshold for everything logged through gpuplug. The initial level comes from
/// GPUPLUG_LOG (default warning; ignored in setuid/setgid programs); an unknown GPUPLUG_LOG value
/// is reported once, then ignored. Thread-safe.
void set_log_level(LogLevel level) noexcept;
LogLevel log_level() noexcept;

/// Receives every gpuplug record at or above the level: its level (never `off`), its channel (a
/// backend name like "cuda:0", or "registry", "environment", ...) and its message. The views are
/// valid only during the call.
using LogCallback =
    std::function<void(LogLevel level, std::string_view channel, std::string_view message)>;

/// Sends gpuplug's records to `callback` instead of Boost.Log or stderr; an empty callback
/// restores the default (docs/logging.md). While a callback is set gpuplug touches neither the
/// Boost.Log core nor stderr. Thread-safe: it may be called while other threads log; a call that
/// started before it returns may still finish in the previous callback, which stays alive until
/// then. The callback may be called from any thread, concurrently; no gpuplug lock is held while
/// it runs. An exception it throws is caught and the record dropped (the first such failure is
/// reported once on stderr, since the callback cannot report it).
void set_log_callback(LogCallback callback);

/// Logs `message` from `channel` when `level` is at or above log_level(): to the callback when
/// one is set; else through the Boost.Log core when the application has sinks of its own (with
/// the attributes listed in docs/logging.md, so its filters and formatters apply); else to stderr
/// as "[gpuplug <level>] <channel>: <message>". Thread-safe; never throws.
void log(LogLevel level, std::string_view channel, std::string_view message) noexcept;

}  // namespace gpuplug
GPUPLUG_API_END
