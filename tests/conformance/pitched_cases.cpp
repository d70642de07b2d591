// SPDX-License-Identifier: Apache-2.0
// Conformance cases for the pitched 2D copies (ABI 1.3): a tile of rows moved in one call, the
// gaps between rows untouched, the host source reusable at once, and the refusals.
#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed) {
  std::vector<std::uint8_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(i * 37 + seed);
  return p;
}

std::vector<std::uint8_t> read_back(GpuBackend& gpu, DevicePtr p, std::size_t n) {
  std::vector<std::uint8_t> out(n);
  gpu.copy_d2h(out.data(), p, n);
  return out;
}

/// A buffer of `bytes` set to `fill`, on the device.
DeviceBuffer filled(GpuBackend& gpu, std::size_t bytes, std::uint8_t fill) {
  DeviceBuffer b(gpu, bytes);
  gpu.memset(b.ptr(), fill, bytes);
  gpu.synchronize();
  return b;
}

/// What a destination of `bytes` holds after a tile of `height` rows of `width` bytes from `src`
/// (rows `src_pitch` apart, from `src_at`) lands at `dst_at` with rows `dst_pitch` apart, over
/// `before`.
std::vector<std::uint8_t> expected_tile(std::vector<std::uint8_t> before,
                                        const std::vector<std::uint8_t>& src, std::size_t src_at,
                                        std::size_t src_pitch, std::size_t dst_at,
                                        std::size_t dst_pitch, std::size_t width,
                                        std::size_t height) {
  for (std::size_t r = 0; r < height; ++r)
    std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(src_at + r * src_pitch), width,
                before.begin() + static_cast<std::ptrdiff_t>(dst_at + r * dst_pitch));
  return before;
}

/// The first byte where `got` and `want` differ, described; empty when they agree.
std::string first_difference(const std::vector<std::uint8_t>& got,
                             const std::vector<std::uint8_t>& want, std::size_t pitch) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i])
      return "byte " + std::to_string(i) + " (row " + std::to_string(i / pitch) + ", column " +
             std::to_string(i % pitch) + ") is " + std::to_string(got[i]) + ", expected " +
             std::to_string(want[i]);
  }
  return {};
}

void pitched_d2d_subtile_leaves_gaps(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  constexpr std::size_t sp = 96, dp = 128, rows = 20, w = 40, h = 10;
  const auto src = pattern(sp * rows, 3);
  DeviceBuffer s = to_device(gpu, src);
  DeviceBuffer d = filled(gpu, dp * rows, 0xEE);
  const Stream stream = gpu.create_stream();
  const std::size_t src_at = 2 * sp + 4, dst_at = 3 * dp + 8;
  gpu.copy_d2d_2d_async(d.ptr() + dst_at, dp, s.ptr() + src_at, sp, w, h, stream);
  gpu.synchronize(stream);
  gpu.destroy_stream(stream);
  const auto want = expected_tile(std::vector<std::uint8_t>(dp * rows, 0xEE), src, src_at, sp,
                                  dst_at, dp, w, h);
  const std::string why = first_difference(read_back(gpu, d.ptr(), dp * rows), want, dp);
  GPUPLUG_CHECK_MSG(why.empty(), "copy_d2d_2d_async of a 40x10 tile: " << why);
}

void pitched_h2d_source_reusable_at_once(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  constexpr std::size_t sp = 64, dp = 80, w = 48, h = 16;
  const auto original = pattern(sp * h, 11);
  std::vector<std::uint8_t> temporary = original;
  // Work queued ahead on the stream keeps the copy waiting while the source is overwritten.
  constexpr std::size_t busy_bytes = std::size_t{64} << 20;
  DeviceBuffer busy(gpu, busy_bytes);
  DeviceBuffer d = filled(gpu, dp * h, 0x5A);
  const Stream stream = gpu.create_stream();
  gpu.memset(busy.ptr(), 1, busy_bytes, stream);
  gpu.copy_h2d_2d_async(d.ptr(), dp, temporary.data(), sp, w, h, stream);
  std::fill(temporary.begin(), temporary.end(), std::uint8_t{0xFF});
  gpu.synchronize(stream);
  gpu.destroy_stream(stream);
  const auto want =
      expected_tile(std::vector<std::uint8_t>(dp * h, 0x5A), original, 0, sp, 0, dp, w, h);
  const std::string why = first_difference(read_back(gpu, d.ptr(), dp * h), want, dp);
  GPUPLUG_CHECK_MSG(why.empty(),
                    "copy_h2d_2d_async from a buffer overwritten right after the call: " << why);
}

void pitched_d2h_leaves_gaps(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  constexpr std::size_t sp = 72, dp = 50, w = 33, h = 9;
  const auto src = pattern(sp * h, 5);
  DeviceBuffer s = to_device(gpu, src);
  std::vector<std::uint8_t> host(dp * h, 0xAB);
  const Stream stream = gpu.create_stream();
  gpu.copy_d2h_2d_async(host.data(), dp, s.ptr() + 1, sp, w, h, stream);
  gpu.synchronize(stream);
  gpu.destroy_stream(stream);
  const auto want = expected_tile(std::vector<std::uint8_t>(dp * h, 0xAB), src, 1, sp, 0, dp, w, h);
  const std::string why = first_difference(host, want, dp);
  GPUPLUG_CHECK_MSG(why.empty(), "copy_d2h_2d_async of a 33x9 tile: " << why);
}

void pitched_pitch_below_width_refused(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  constexpr std::size_t pitch = 64, h = 4;
  DeviceBuffer a = filled(gpu, pitch * h, 0x11);
  DeviceBuffer b = filled(gpu, pitch * h, 0x22);
  std::vector<std::uint8_t> host(pitch * h, 0x33);
  const auto check_side = [&](const Error& e, const char* side, const char* op) {
    GPUPLUG_CHECK_MSG(contains(e.what(), side) && contains(e.what(), "pitch"),
                      op << ": the error does not name the " << side << " pitch: " << e.what());
  };
  check_side(GPUPLUG_CHECK_THROWS(gpu.copy_d2d_2d_async(a.ptr(), 32, b.ptr(), pitch, 48, h, {}),
                                  Status::invalid_argument),
             "destination", "copy_d2d_2d_async");
  check_side(GPUPLUG_CHECK_THROWS(gpu.copy_d2d_2d_async(a.ptr(), pitch, b.ptr(), 32, 48, h, {}),
                                  Status::invalid_argument),
             "source", "copy_d2d_2d_async");
  check_side(GPUPLUG_CHECK_THROWS(
                 gpu.copy_h2d_2d_async(a.ptr(), 47, host.data(), pitch, 48, h, {}),
                 Status::invalid_argument),
             "destination", "copy_h2d_2d_async");
  check_side(GPUPLUG_CHECK_THROWS(
                 gpu.copy_h2d_2d_async(a.ptr(), pitch, host.data(), 47, 48, h, {}),
                 Status::invalid_argument),
             "source", "copy_h2d_2d_async");
  check_side(GPUPLUG_CHECK_THROWS(
                 gpu.copy_d2h_2d_async(host.data(), 1, b.ptr(), pitch, 48, h, {}),
                 Status::invalid_argument),
             "destination", "copy_d2h_2d_async");
  check_side(GPUPLUG_CHECK_THROWS(
                 gpu.copy_d2h_2d_async(host.data(), pitch, b.ptr(), 0, 48, h, {}),
                 Status::invalid_argument),
             "source", "copy_d2h_2d_async");
  gpu.synchronize();
  GPUPLUG_CHECK_MSG(read_back(gpu, a.ptr(), pitch * h) == std::vector<std::uint8_t>(pitch * h, 0x11),
                    "a refused 2D copy changed its device destination");
  GPUPLUG_CHECK_MSG(host == std::vector<std::uint8_t>(pitch * h, 0x33),
                    "a refused copy_d2h_2d_async changed its host destination");
}

void pitched_last_row_past_allocation_refused(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  constexpr std::size_t pitch = 100, w = 60, h = 8;
  constexpr std::size_t span = pitch * (h - 1) + w;  // what h rows need
  DeviceBuffer small = filled(gpu, span - 1, 0x44);   // the last row ends one byte past it
  DeviceBuffer big = filled(gpu, pitch * h, 0x55);
  const auto host = pattern(pitch * h, 9);
  std::vector<std::uint8_t> sink(pitch * h, 0x66);
  const Stream stream = gpu.create_stream();
  const Error e = GPUPLUG_CHECK_THROWS(
      gpu.copy_h2d_2d_async(small.ptr(), pitch, host.data(), pitch, w, h, stream),
      Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(e.what(), "copy_h2d_2d_async"),
                    "the error does not name the operation: " << e.what());
  GPUPLUG_CHECK_THROWS(gpu.copy_d2d_2d_async(small.ptr(), pitch, big.ptr(), pitch, w, h, stream),
                       Status::invalid_argument);  // destination short
  GPUPLUG_CHECK_THROWS(gpu.copy_d2d_2d_async(big.ptr(), pitch, small.ptr(), pitch, w, h, stream),
                       Status::invalid_argument);  // source short
  GPUPLUG_CHECK_THROWS(gpu.copy_d2h_2d_async(sink.data(), pitch, small.ptr(), pitch, w, h, stream),
                       Status::invalid_argument);
  // A span whose arithmetic wraps around 2^64.
  const std::size_t huge = std::numeric_limits<std::size_t>::max() / 2;
  GPUPLUG_CHECK_THROWS(gpu.copy_d2d_2d_async(big.ptr(), huge, big.ptr() + w, huge, w, 4, stream),
                       Status::invalid_argument);
  gpu.synchronize(stream);
  gpu.destroy_stream(stream);
  GPUPLUG_CHECK_MSG(read_back(gpu, small.ptr(), span - 1) ==
                        std::vector<std::uint8_t>(span - 1, 0x44),
                    "a 2D copy refused for its last row copied some rows");
  GPUPLUG_CHECK_MSG(read_back(gpu, big.ptr(), pitch * h) == std::vector<std::uint8_t>(pitch * h, 0x55),
                    "a 2D copy refused for its short source copied some rows");
  GPUPLUG_CHECK_MSG(sink == std::vector<std::uint8_t>(pitch * h, 0x66),
                    "a copy_d2h_2d_async refused for its last row copied some rows");
}

void pitched_zero_width_or_height_is_a_no_op(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  constexpr std::size_t pitch = 32, h = 4;
  DeviceBuffer d = filled(gpu, pitch * h, 0x77);
  const auto host = pattern(pitch * h, 1);
  std::vector<std::uint8_t> sink(pitch * h, 0x88);
  const Stream stream = gpu.create_stream();
  for (const auto& [w, rows] : {std::pair<std::size_t, std::size_t>{0, h}, {pitch, 0}, {0, 0}}) {
    // A pitch of 0 is below no width of 0; with no rows no range is touched.
    gpu.copy_h2d_2d_async(d.ptr(), w == 0 ? 0 : pitch, host.data(), pitch, w, rows, stream);
    gpu.copy_d2h_2d_async(sink.data(), pitch, d.ptr(), pitch, w, rows, stream);
    gpu.copy_d2d_2d_async(d.ptr(), pitch, d.ptr() + pitch, pitch, w, rows, stream);
  }
  gpu.synchronize(stream);
  gpu.destroy_stream(stream);
  GPUPLUG_CHECK_MSG(read_back(gpu, d.ptr(), pitch * h) == std::vector<std::uint8_t>(pitch * h, 0x77),
                    "a 2D copy of width or height 0 changed its device destination");
  GPUPLUG_CHECK_MSG(sink == std::vector<std::uint8_t>(pitch * h, 0x88),
                    "a copy_d2h_2d_async of width or height 0 changed its host destination");
}

void pitched_copies_keep_stream_order(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  constexpr std::size_t pitch = 256, w = 200, h = 64;
  const auto src = pattern(pitch * h, 13);
  DeviceBuffer a(gpu, pitch * h);
  DeviceBuffer b(gpu, pitch * h);
  std::vector<std::uint8_t> out(pitch * h, 0);
  const Stream stream = gpu.create_stream();
  // Each step reads what the one before wrote: only stream order makes the result right.
  gpu.memset(a.ptr(), 0x99, pitch * h, stream);
  gpu.memset(b.ptr(), 0x99, pitch * h, stream);
  gpu.copy_h2d_2d_async(a.ptr(), pitch, src.data(), pitch, w, h, stream);
  gpu.copy_d2d_2d_async(b.ptr(), pitch, a.ptr(), pitch, w, h, stream);
  gpu.memset(a.ptr(), 0, pitch * h, stream);
  gpu.copy_d2h_2d_async(out.data(), pitch, b.ptr(), pitch, pitch, h, stream);
  gpu.synchronize(stream);
  gpu.destroy_stream(stream);
  const auto want =
      expected_tile(std::vector<std::uint8_t>(pitch * h, 0x99), src, 0, pitch, 0, pitch, w, h);
  const std::string why = first_difference(out, want, pitch);
  GPUPLUG_CHECK_MSG(why.empty(), "memset -> h2d_2d -> d2d_2d -> d2h_2d on one created stream: "
                                     << why);
}

const Case cases[] = {
    {"pitched_d2d_subtile_leaves_gaps",
     "copy_d2d_2d_async of a sub-tile between buffers of different pitches; the gaps untouched",
     pitched_d2d_subtile_leaves_gaps},
    {"pitched_h2d_source_reusable_at_once",
     "copy_h2d_2d_async from a buffer overwritten right after the call copies the original bytes",
     pitched_h2d_source_reusable_at_once},
    {"pitched_d2h_leaves_gaps",
     "copy_d2h_2d_async of a tile into a host buffer of another pitch; the gaps untouched",
     pitched_d2h_leaves_gaps},
    {"pitched_pitch_below_width_refused",
     "a pitch below the width is invalid_argument naming the side; nothing is copied",
     pitched_pitch_below_width_refused},
    {"pitched_last_row_past_allocation_refused",
     "a last row past its allocation, or a span that wraps, is invalid_argument; nothing copied",
     pitched_last_row_past_allocation_refused},
    {"pitched_zero_width_or_height_is_a_no_op",
     "a 2D copy of width 0 or height 0 copies nothing and succeeds",
     pitched_zero_width_or_height_is_a_no_op},
    {"pitched_copies_keep_stream_order",
     "2D copies and memsets on one created stream run in the order they were queued",
     pitched_copies_keep_stream_order},
};

}  // namespace

std::span<const Case> pitched_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
