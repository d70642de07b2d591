// SPDX-License-Identifier: Apache-2.0
// Internal: where a gpuplug record goes when no callback is set (core/logging/log_route.cpp).
#pragma once

#include <gpuplug/log.hpp>
#include <string_view>

namespace gpuplug::detail {

/// Hands a record (already past the level check, no callback set) to the application's
/// Boost.Log sinks when it has any that take gpuplug records, else writes it to stderr as
/// "[gpuplug <level>] <channel>: <message>". Never registers anything in the Boost.Log core
/// beyond the duration of the call. Thread-safe; never throws.
void route_record(LogLevel level, std::string_view channel, std::string_view message) noexcept;

/// Writes "[gpuplug <level>] <channel>: <message>" to stderr as one line. Never throws.
void write_stderr_line(LogLevel level, std::string_view channel, std::string_view message) noexcept;

}  // namespace gpuplug::detail
