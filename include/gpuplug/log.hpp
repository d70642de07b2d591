// SPDX-License-Identifier: Apache-2.0
// Logging: a thin front over Boost.Log so that applications and plugins share one sink and level.
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

#include <optional>
#include <string_view>

GPUPLUG_API_BEGIN
namespace gpuplug {

enum class LogLevel { trace = 0, debug = 1, info = 2, warning = 3, error = 4 };

/// Parses "trace", "debug", "info", "warning" (or "warn"), "error"; nullopt otherwise.
std::optional<LogLevel> parse_log_level(std::string_view text) noexcept;

/// Sets the threshold for everything logged through gpuplug. The initial level comes from
/// GPUPLUG_LOG (default warning); an unknown GPUPLUG_LOG value is reported once, then ignored.
void set_log_level(LogLevel level) noexcept;
LogLevel log_level() noexcept;

/// Logs `message` from `channel` (a backend name like "cuda:0", or "registry") through Boost.Log
/// to stderr as "[gpuplug <level>] <channel>: <message>". Thread-safe; never throws.
void log(LogLevel level, std::string_view channel, std::string_view message) noexcept;

}  // namespace gpuplug
GPUPLUG_API_END
