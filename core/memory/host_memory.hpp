// SPDX-License-Identifier: Apache-2.0
// The host's available memory (core-private): what an integrated GPU, which shares it, can still
// be given, when its driver's free figure undercounts (docs/memory.md, "Budgets").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpuplug::detail {

/// The `MemAvailable:` line of /proc/meminfo text, in bytes; nullopt when there is none or it
/// does not parse (a number of kB that overflows included).
std::optional<std::uint64_t> mem_available_from(std::string_view meminfo) noexcept;

/// MemAvailable of this machine (/proc/meminfo, read as a regular file of at most 64 KiB); nullopt
/// where it cannot be read.
std::optional<std::uint64_t> host_memory_available();

}  // namespace gpuplug::detail
