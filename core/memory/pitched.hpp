// SPDX-License-Identifier: Apache-2.0
// The checks every pitched 2D copy makes before a row moves (core-private), shared by
// GpuBackend's per-row defaults and the plugin-backed backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gpuplug::detail {

/// One side of a pitched copy: where its first row starts and how far apart its rows are.
struct PitchedSide {
  const char* role;       // "destination", "source"
  std::uint64_t address;  // a device pointer, or a host pointer as an integer
  std::size_t pitch;
};

/// The bytes a side of `height` rows of `width` spans: pitch * (height - 1) + width; height > 0.
/// False when that, or address + span, does not fit in 64 bits.
bool pitched_span(const PitchedSide& side, std::size_t width, std::size_t height,
                  std::uint64_t& span) noexcept;

/// Throws Error(invalid_argument, backend, operation, ...) naming the side whose pitch is below
/// `width` or whose span wraps. Returns false when the copy moves nothing (width or height 0),
/// which is then a no-op before any other check, as a zero-byte copy is.
bool check_pitched(std::string_view backend, const char* operation, const PitchedSide& dst,
                   const PitchedSide& src, std::size_t width, std::size_t height);

}  // namespace gpuplug::detail
