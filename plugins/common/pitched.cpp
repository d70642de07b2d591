// SPDX-License-Identifier: Apache-2.0
// The SDK's pitched 2D copies (ABI 1.3): the checks every 2D slot makes before its hook runs,
// and the hooks' defaults, one vendor 1D async copy per row.
#include <cstddef>
#include <limits>
#include <string>

#include "edge.hpp"

namespace gpuplug::sdk {

void Device::vendor_copy_h2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch,
                                      const void* src, std::uint64_t src_pitch,
                                      std::uint64_t width, std::uint64_t height,
                                      std::uint64_t stream) {
  const auto* host = static_cast<const std::byte*>(src);
  for (std::uint64_t r = 0; r < height; ++r)
    vendor_copy_h2d_async(dst + r * dst_pitch, host + r * src_pitch, width, stream);
}

void Device::vendor_copy_d2h_2d_async(void* dst, std::uint64_t dst_pitch, std::uint64_t src,
                                      std::uint64_t src_pitch, std::uint64_t width,
                                      std::uint64_t height, std::uint64_t stream) {
  auto* host = static_cast<std::byte*>(dst);
  for (std::uint64_t r = 0; r < height; ++r)
    vendor_copy_d2h_async(host + r * dst_pitch, src + r * src_pitch, width, stream);
}

void Device::vendor_copy_d2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch,
                                      std::uint64_t src, std::uint64_t src_pitch,
                                      std::uint64_t width, std::uint64_t height,
                                      std::uint64_t stream) {
  for (std::uint64_t r = 0; r < height; ++r)
    vendor_copy_d2d_async(dst + r * dst_pitch, src + r * src_pitch, width, stream);
}

namespace detail {

namespace {

/// One side of a 2D copy: a device pointer, or a host pointer (then `host` is set).
struct Side {
  const char* role;  // "destination", "source"
  std::uint64_t address;
  std::uint64_t pitch;
  bool host;
  bool write;
};

/// The bytes the side spans, pitch * (height - 1) + width, after checking its pitch, that the
/// span does not wrap, and its memory: a device side's whole span against the ledger (which
/// covers every row), a host side's pointer non-null. height > 0, width > 0.
void check_side(Device& d, const char* op, const Side& s, std::uint64_t width,
                std::uint64_t height) {
  if (s.pitch < width)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT, std::string(op) + ": " + s.role + " pitch " +
                                              std::to_string(s.pitch) + " is below width " +
                                              std::to_string(width));
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t rows = height - 1;
  if ((rows != 0 && s.pitch > (max - width) / rows) ||
      s.pitch * rows + width > max - s.address)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         std::string(op) + ": " + s.role + " of " + std::to_string(height) + " rows of pitch " +
             std::to_string(s.pitch) + " wraps around the address space");
  if (s.host) {
    check_host(op, s.role, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(s.address)));
  } else {
    d.check_range(op, s.role, s.address, s.pitch * rows + width, s.write);
  }
}

template <class Call>
gpuplug_status_t pitched(gpuplug_instance_t inst, const char* op, const Side& dst,
                         const Side& src, std::uint64_t width, std::uint64_t height,
                         std::uint64_t stream, Call&& call) noexcept {
  return guarded(inst, op, [&](Device& d) {
    if (width == 0 || height == 0) return;
    d.streams().check(op, stream);
    check_side(d, op, dst, width, height);
    check_side(d, op, src, width, height);
    call(d);
  });
}

std::uint64_t host_address(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

gpuplug_status_t slot_copy_h2d_2d_async(gpuplug_instance_t inst, std::uint64_t dst,
                                        std::uint64_t dst_pitch, const void* src,
                                        std::uint64_t src_pitch, std::uint64_t width,
                                        std::uint64_t height, std::uint64_t stream) noexcept {
  return pitched(inst, "copy_h2d_2d_async", {"destination", dst, dst_pitch, false, true},
                 {"source", host_address(src), src_pitch, true, false}, width, height, stream,
                 [&](Device& d) {
                   d.vendor_copy_h2d_2d_async(dst, dst_pitch, src, src_pitch, width, height,
                                              stream);
                   // As for copy_h2d_async: a DMA engine reads the plugin's pinned memory when
                   // the copy runs, so the source is free at return only once the copy is done.
                   const auto* last = static_cast<const std::byte*>(src) +
                                      src_pitch * (height - 1) + (width - 1);
                   if (d.vendor_dma_reads_pinned() && (d.is_pinned(src, 1) || d.is_pinned(last, 1)))
                     d.vendor_stream_synchronize(stream);
                 });
}

gpuplug_status_t slot_copy_d2h_2d_async(gpuplug_instance_t inst, void* dst,
                                        std::uint64_t dst_pitch, std::uint64_t src,
                                        std::uint64_t src_pitch, std::uint64_t width,
                                        std::uint64_t height, std::uint64_t stream) noexcept {
  return pitched(inst, "copy_d2h_2d_async", {"destination", host_address(dst), dst_pitch, true, true},
                 {"source", src, src_pitch, false, false}, width, height, stream,
                 [&](Device& d) {
                   d.vendor_copy_d2h_2d_async(dst, dst_pitch, src, src_pitch, width, height,
                                              stream);
                 });
}

gpuplug_status_t slot_copy_d2d_2d_async(gpuplug_instance_t inst, std::uint64_t dst,
                                        std::uint64_t dst_pitch, std::uint64_t src,
                                        std::uint64_t src_pitch, std::uint64_t width,
                                        std::uint64_t height, std::uint64_t stream) noexcept {
  return pitched(inst, "copy_d2d_2d_async", {"destination", dst, dst_pitch, false, true},
                 {"source", src, src_pitch, false, false}, width, height, stream,
                 [&](Device& d) {
                   d.vendor_copy_d2d_2d_async(dst, dst_pitch, src, src_pitch, width, height,
                                              stream);
                 });
}

}  // namespace detail

}  // namespace gpuplug::sdk
