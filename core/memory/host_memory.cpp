// SPDX-License-Identifier: Apache-2.0
#include "memory/host_memory.hpp"

#include <charconv>
#include <cstdio>
#include <limits>
#include <algorithm>
#include <string>

namespace gpuplug::detail {

std::optional<std::uint64_t> mem_available_from(std::string_view meminfo) noexcept {
  constexpr std::string_view key = "MemAvailable:";
  std::size_t at = 0;
  while (at < meminfo.size()) {
    const std::size_t end = std::min(meminfo.find('\n', at), meminfo.size());
    std::string_view line = meminfo.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(key)) continue;
    line.remove_prefix(key.size());
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    std::uint64_t kib = 0;
    const auto [rest, ec] = std::from_chars(line.data(), line.data() + line.size(), kib);
    if (ec != std::errc{} || std::string_view(rest, line.data() + line.size()) != " kB" ||
        kib > std::numeric_limits<std::uint64_t>::max() / 1024)
      return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> host_memory_available() {
  // procfs reports a size of 0, so the text is read until its end, at most 64 KiB of it.
  std::FILE* f = std::fopen("/proc/meminfo", "re");
  if (f == nullptr) return std::nullopt;
  std::string text(64 * 1024, '\0');
  const std::size_t n = std::fread(text.data(), 1, text.size(), f);
  std::fclose(f);
  text.resize(n);
  return mem_available_from(text);
}

}  // namespace gpuplug::detail
