// SPDX-License-Identifier: Apache-2.0
// Pitched 2D copies: the checks they share and GpuBackend's defaults, one 1D async copy per row.
#include "memory/pitched.hpp"

#include <gpuplug/backend.hpp>
#include <limits>
#include <string>

namespace gpuplug {

namespace detail {

bool pitched_span(const PitchedSide& side, std::size_t width, std::size_t height,
                  std::uint64_t& span) noexcept {
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t rows = static_cast<std::uint64_t>(height) - 1;
  const std::uint64_t pitch = side.pitch;
  if (rows != 0 && pitch > (max - width) / rows) return false;
  span = pitch * rows + width;
  return span <= max - side.address;
}

bool check_pitched(std::string_view backend, const char* operation, const PitchedSide& dst,
                   const PitchedSide& src, std::size_t width, std::size_t height) {
  if (width == 0 || height == 0) return false;
  for (const PitchedSide* side : {&dst, &src}) {
    if (side->pitch < width) {
      throw Error(Status::invalid_argument, std::string(backend), operation,
                  std::string(side->role) + " pitch " + std::to_string(side->pitch) +
                      " is below width_bytes " + std::to_string(width));
    }
    std::uint64_t span = 0;
    if (!pitched_span(*side, width, height, span)) {
      throw Error(Status::invalid_argument, std::string(backend), operation,
                  std::string(side->role) + " of " + std::to_string(height) + " rows of pitch " +
                      std::to_string(side->pitch) + " from " + std::to_string(side->address) +
                      " wraps around the address space");
    }
  }
  return true;
}

namespace {
/// Runs `row(r)` for every row, the last one first: where a copy runs past the end of its
/// allocation, the row that overruns is refused before any other row is queued. A row's Error is
/// rethrown as the 2D copy's (`operation`), naming the row and the 1D copy that refused it.
template <class Row>
void rows_last_first(const char* operation, std::size_t height, Row&& row) {
  std::size_t r = height - 1;
  try {
    row(r);
    for (r = 0; r + 1 < height; ++r) row(r);
  } catch (const Error& e) {
    throw Error(e.status(), std::string(e.backend()), operation,
                "row " + std::to_string(r) + " of " + std::to_string(height) + ": " +
                    std::string(e.operation()) + ": " + std::string(e.message()));
  }
}
}  // namespace

}  // namespace detail

void GpuBackend::copy_h2d_2d_async(DevicePtr dst, std::size_t dst_pitch, const void* src,
                                   std::size_t src_pitch, std::size_t width_bytes,
                                   std::size_t height, Stream stream) {
  if (!detail::check_pitched(name(), "copy_h2d_2d_async", {"destination", dst.value, dst_pitch},
                             {"source", reinterpret_cast<std::uintptr_t>(src), src_pitch},
                             width_bytes, height))
    return;
  const auto* host = static_cast<const std::byte*>(src);
  detail::rows_last_first("copy_h2d_2d_async", height, [&](std::size_t r) {
    copy_h2d_async(dst + r * dst_pitch, host + r * src_pitch, width_bytes, stream);
  });
}

void GpuBackend::copy_d2h_2d_async(void* dst, std::size_t dst_pitch, DevicePtr src,
                                   std::size_t src_pitch, std::size_t width_bytes,
                                   std::size_t height, Stream stream) {
  if (!detail::check_pitched(name(), "copy_d2h_2d_async",
                             {"destination", reinterpret_cast<std::uintptr_t>(dst), dst_pitch},
                             {"source", src.value, src_pitch}, width_bytes, height))
    return;
  auto* host = static_cast<std::byte*>(dst);
  detail::rows_last_first("copy_d2h_2d_async", height, [&](std::size_t r) {
    copy_d2h_async(host + r * dst_pitch, src + r * src_pitch, width_bytes, stream);
  });
}

void GpuBackend::copy_d2d_2d_async(DevicePtr dst, std::size_t dst_pitch, DevicePtr src,
                                   std::size_t src_pitch, std::size_t width_bytes,
                                   std::size_t height, Stream stream) {
  if (!detail::check_pitched(name(), "copy_d2d_2d_async", {"destination", dst.value, dst_pitch},
                             {"source", src.value, src_pitch}, width_bytes, height))
    return;
  detail::rows_last_first("copy_d2d_2d_async", height, [&](std::size_t r) {
    copy_d2d_async(dst + r * dst_pitch, src + r * src_pitch, width_bytes, stream);
  });
}

}  // namespace gpuplug
