// SPDX-License-Identifier: Apache-2.0
// Conformance cases for peer copies (docs/interop.md): copy_peer and copy_peer_async
// between two backends of the plugin under test (its own peer copy when it has the ABI 1.2 slot,
// staged through pinned and pageable memory), and between the host reference and it, for sizes
// 0, 1, one chunk and several chunks with misaligned ends, stream order, and calls from several
// threads at once. Deterministic: no outcome depends on timing.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

constexpr std::size_t kChunk = 4096;

/// The ways to copy: the plugin's own copy where it has one, then staged through pinned and
/// pageable memory (PeerCopyOptions: chunk_bytes, vendor_copy, pinned_staging).
const std::pair<const char*, PeerCopyOptions> kWays[] = {
    {"vendor", {kChunk, true, true}},
    {"pinned staging", {kChunk, false, true}},
    {"pageable staging", {kChunk, false, false}},
};

/// `bytes` distinct bytes starting at `seed`.
std::vector<std::uint8_t> pattern(std::size_t bytes, unsigned seed) {
  std::vector<std::uint8_t> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = static_cast<std::uint8_t>((i * 131 + seed) % 251);
  return v;
}

/// Copies `size` bytes from offset `src_off` of a source allocation to offset `dst_off` of a
/// destination one filled with 0xEE; "" when the destination then holds exactly the source's
/// bytes with the bytes around them intact, else what differs. Safe on worker threads (no check
/// macro inside).
std::string peer_copy_mismatch(GpuBackend& dst, GpuBackend& src, std::size_t size,
                               std::size_t src_off, std::size_t dst_off,
                               const PeerCopyOptions& options) {
  const std::size_t guard = 8;
  const auto in = pattern(size + src_off, static_cast<unsigned>(size));
  const std::vector<std::uint8_t> before(dst_off + size + guard, 0xEE);
  DeviceBuffer s(src, in.size() + 1, "conformance peer src");
  DeviceBuffer d(dst, before.size(), "conformance peer dst");
  if (!in.empty()) src.copy_h2d(s.ptr(), in.data(), in.size());
  dst.copy_h2d(d.ptr(), before.data(), before.size());
  copy_peer(dst, DevicePtr{d.ptr().value + dst_off}, src, DevicePtr{s.ptr().value + src_off},
            size, options);
  std::vector<std::uint8_t> out(before.size());
  dst.copy_d2h(out.data(), d.ptr(), out.size());
  std::vector<std::uint8_t> expected = before;
  std::copy(in.begin() + static_cast<std::ptrdiff_t>(src_off), in.end(),
            expected.begin() + static_cast<std::ptrdiff_t>(dst_off));
  if (out == expected) return {};
  const auto at = std::mismatch(out.begin(), out.end(), expected.begin()).first - out.begin();
  return std::string(src.name()) + " -> " + std::string(dst.name()) + ", " +
         std::to_string(size) + " bytes at offsets " + std::to_string(src_off) + "/" +
         std::to_string(dst_off) + ": first wrong byte at " + std::to_string(at);
}

/// copy_peer_async between a stream of each backend: a memset queued on src_stream before the
/// call fills the source (the copy must see it); a memset queued on dst_stream after the call
/// overwrites the destination's first half (it must land after the copy). "" when the
/// destination holds exactly that.
std::string async_order_mismatch(GpuBackend& dst, GpuBackend& src, std::size_t size,
                                 const PeerCopyOptions& options) {
  const Stream src_stream = src.create_stream();
  const Stream dst_stream = dst.create_stream();
  std::string why;
  {
    DeviceBuffer s(src, size, "conformance peer src");
    DeviceBuffer d(dst, size, "conformance peer dst");
    dst.memset(d.ptr(), 0x00, size, Stream{});
    dst.synchronize();
    src.memset(s.ptr(), 0x5A, size, src_stream);
    PeerCopy copy = copy_peer_async(dst, d.ptr(), dst_stream, src, s.ptr(), src_stream, size, options);
    dst.memset(d.ptr(), 0xA5, size / 2, dst_stream);
    copy.wait();
    dst.synchronize(dst_stream);
    std::vector<std::uint8_t> out(size);
    dst.copy_d2h(out.data(), d.ptr(), size);
    std::vector<std::uint8_t> expected(size, 0x5A);
    std::fill_n(expected.begin(), size / 2, std::uint8_t{0xA5});
    if (out != expected) {
      const auto at = std::mismatch(out.begin(), out.end(), expected.begin()).first - out.begin();
      why = std::string(src.name()) + " -> " + std::string(dst.name()) + ", " +
            std::to_string(size) + " bytes: byte " + std::to_string(at) + " is " +
            std::to_string(out[static_cast<std::size_t>(at)]) + ", expected " +
            std::to_string(expected[static_cast<std::size_t>(at)]);
    }
  }
  src.destroy_stream(src_stream);
  dst.destroy_stream(dst_stream);
  return why;
}

/// The (destination, source) pairs: two backends of the plugin under test both ways, and the
/// host reference with it both ways when there is one.
std::vector<std::pair<GpuBackend*, GpuBackend*>> pairs(Context& ctx,
                                                       std::shared_ptr<GpuBackend>& other) {
  GpuBackend& gpu = ctx.backend();
  other = ctx.make_backend();
  std::vector<std::pair<GpuBackend*, GpuBackend*>> out{{&gpu, other.get()}, {other.get(), &gpu}};
  try {
    GpuBackend& host = ctx.reference();
    out.emplace_back(&gpu, &host);
    out.emplace_back(&host, &gpu);
  } catch (const Skip&) {  // no reference here: the pairs of the plugin under test still run
  }
  return out;
}

void peer_copy_sizes_and_misaligned_ends(Context& ctx) {
  std::shared_ptr<GpuBackend> other;
  for (auto [dst, src] : pairs(ctx, other)) {
    for (const auto& [how, options] : kWays) {
      for (const auto& [size, src_off, dst_off] :
           {std::tuple<std::size_t, std::size_t, std::size_t>{0, 0, 0},
            {1, 0, 0},
            {kChunk, 0, 0},
            {3 * kChunk + 17, 3, 5},
            {2 * kChunk - 1, 1, 0}}) {
        const std::string why = peer_copy_mismatch(*dst, *src, size, src_off, dst_off, options);
        GPUPLUG_CHECK_MSG(why.empty(), how << ": " << why);
      }
    }
  }
}

void peer_copy_async_orders_on_both_streams(Context& ctx) {
  std::shared_ptr<GpuBackend> other;
  for (auto [dst, src] : pairs(ctx, other)) {
    for (const auto& [how, options] : kWays) {
      for (const std::size_t size : {std::size_t{1}, 3 * kChunk + 17}) {
        const std::string why = async_order_mismatch(*dst, *src, size, options);
        GPUPLUG_CHECK_MSG(why.empty(), how << ": " << why);
      }
    }
  }
  // The same backend, from one stream to another.
  const std::string why = async_order_mismatch(ctx.backend(), ctx.backend(), 5000, {kChunk});
  GPUPLUG_CHECK_MSG(why.empty(), "the same backend: " << why);
}

void peer_copy_four_threads(Context& ctx) {
  std::shared_ptr<GpuBackend> other;
  for (auto [dst, src] : pairs(ctx, other)) {
    for (const auto& [how, options] : kWays) {
      std::vector<std::string> why(4);
      std::vector<std::thread> threads;
      for (std::size_t t = 0; t < 4; ++t) {
        threads.emplace_back([&, t, options = options] {
          try {
            why[t] = peer_copy_mismatch(*dst, *src, 20000 + t * 1000, t, 3 - t, options);
            if (why[t].empty()) why[t] = async_order_mismatch(*dst, *src, 9000 + t, options);
          } catch (const std::exception& e) {
            why[t] = e.what();
          }
        });
      }
      for (auto& t : threads) t.join();
      for (std::size_t t = 0; t < 4; ++t)
        GPUPLUG_CHECK_MSG(why[t].empty(), how << ", thread " << t << ": " << why[t]);
    }
  }
}

void peer_copy_bad_input(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const std::shared_ptr<GpuBackend> other = ctx.make_backend();
  DeviceBuffer s(*other, 10000);
  DeviceBuffer d(gpu, 6000);
  for (const auto& [how, options] : kWays) {
    // The destination ends at 6000 bytes.
    const Error e = GPUPLUG_CHECK_THROWS(copy_peer(gpu, d.ptr(), *other, s.ptr(), 10000, options),
                                         Status::invalid_argument);
    GPUPLUG_CHECK_EQ(e.operation(), std::string("copy_peer"));
    GPUPLUG_CHECK_MSG(contains(e.message(), std::string(other->name())) &&
                          contains(e.message(), "10000 bytes"),
                      how << ": the message names neither the source nor the size: " << e.what());
    const Error a = GPUPLUG_CHECK_THROWS(
        copy_peer_async(gpu, d.ptr(), {}, *other, s.ptr(), {}, 10000, options),
        Status::invalid_argument);
    GPUPLUG_CHECK_EQ(a.operation(), std::string("copy_peer_async"));
  }
  // chunk_bytes 0 is refused before anything is copied.
  GPUPLUG_CHECK_THROWS(copy_peer(gpu, d.ptr(), *other, s.ptr(), 16, {0}),
                       Status::invalid_argument);
  // Both backends still copy.
  const std::string why = peer_copy_mismatch(gpu, *other, 5000, 0, 0, {kChunk});
  GPUPLUG_CHECK_MSG(why.empty(), why);
}

const Case cases[] = {
    {"peer_copy_sizes_and_misaligned_ends",
     "copy_peer between two backends and with host, every way: 0, 1, a chunk, chunks + ends",
     peer_copy_sizes_and_misaligned_ends},
    {"peer_copy_async_orders_on_both_streams",
     "copy_peer_async sees the source stream's work before it; dst stream's work lands after",
     peer_copy_async_orders_on_both_streams},
    {"peer_copy_four_threads",
     "4 threads copy between the same backends at once, sync and async; every copy exact",
     peer_copy_four_threads},
    {"peer_copy_bad_input",
     "a range past an allocation is invalid_argument naming the backends; zero chunk_bytes too",
     peer_copy_bad_input},
};

}  // namespace

std::span<const Case> peer_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
