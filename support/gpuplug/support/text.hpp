// SPDX-License-Identifier: Apache-2.0
// Internal: the small formatting helpers every message in gpuplug uses (hex, join, byte counts,
// errno text), written once.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace gpuplug::support {

/// "0x1f": how addresses, handles and stream ids appear in every message.
inline std::string hex(std::uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, value);
  return buf;
}

/// Items joined with `separator` ("a, b, c"); an empty range gives "".
template <class Range>
std::string join(const Range& items, std::string_view separator = ", ") {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += separator;
    first = false;
    out += std::string_view(item);
  }
  return out;
}

/// "1536 bytes (1.5 KiB)"; below 1 KiB only the exact count ("1 byte", "12 bytes").
inline std::string describe_bytes(std::uint64_t bytes) {
  static constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  std::string out = std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  if (bytes < 1024) return out;
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (v >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, " (%.1f %s)", v, units[unit]);
  return out + buf;
}

/// `s` without leading and trailing blanks (space, tab, CR, LF).
inline std::string_view trim(std::string_view s) noexcept {
  constexpr std::string_view blanks = " \t\r\n";
  const auto first = s.find_first_not_of(blanks);
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(blanks);
  return s.substr(first, last - first + 1);
}

/// The pieces of `s` between `separator`s, empty ones included ("a,,b" gives "a", "", "b").
inline std::vector<std::string_view> split(std::string_view s, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t end = s.find(separator, start);
    parts.push_back(s.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

/// "512 B", "1.5 KiB", "384.0 MiB": a size for tables and one-line reports (one decimal, binary
/// units), where describe_bytes's exact count would be noise.
inline std::string short_bytes(std::uint64_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (v >= 1024.0 && unit + 1 < std::size(units)) {
    v /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, unit == 0 ? "%.0f %s" : "%.1f %s", v, units[unit]);
  return buf;
}

/// strerror for messages, thread-safe (GNU strerror_r returns the text it chose).
inline std::string errno_text(int err) {
  char buf[128];
  return ::strerror_r(err, buf, sizeof buf);
}

}  // namespace gpuplug::support
