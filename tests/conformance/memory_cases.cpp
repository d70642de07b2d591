// SPDX-License-Identifier: Apache-2.0
// Conformance cases for memory: alloc/free, copies, memset, managed memory and their error
// paths.
#include <numeric>

#include "gpuplug/support/text.hpp"
#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed = 7) {
  std::vector<std::uint8_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(i * 31 + seed);
  return p;
}

std::vector<std::uint8_t> read_back(GpuBackend& gpu, DevicePtr p, std::size_t n) {
  std::vector<std::uint8_t> out(n);
  gpu.copy_d2h(out.data(), p, n);
  return out;
}

void alloc_copy_roundtrip(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const LedgerStats before = gpu.ledger_stats();
  const auto data = pattern(4099);
  {
    DeviceBuffer b(gpu, data.size());
    GPUPLUG_CHECK(b.ptr());
    const LedgerStats during = gpu.ledger_stats();
    GPUPLUG_CHECK_EQ(during.live_count, before.live_count + 1);
    GPUPLUG_CHECK(during.live_bytes >= before.live_bytes + data.size());
    GPUPLUG_CHECK(during.peak_bytes >= during.live_bytes);
    GPUPLUG_CHECK_EQ(during.total_allocs, before.total_allocs + 1);
    GPUPLUG_CHECK_EQ(gpu.live_alloc_count(), during.live_count);

    gpu.copy_h2d(b.ptr(), data.data(), data.size());
    GPUPLUG_CHECK(read_back(gpu, b.ptr(), data.size()) == data);
    // Interior pointers address the middle of an allocation.
    const auto tail = read_back(gpu, b.ptr() + 100, 50);
    GPUPLUG_CHECK(std::equal(tail.begin(), tail.end(), data.begin() + 100));
    const std::uint8_t last = 0xEE;
    gpu.copy_h2d(b.ptr() + (data.size() - 1), &last, 1);
    GPUPLUG_CHECK_EQ(read_back(gpu, b.ptr() + (data.size() - 1), 1)[0], last);
  }
  const LedgerStats after = gpu.ledger_stats();
  GPUPLUG_CHECK_EQ(after.live_count, before.live_count);
  GPUPLUG_CHECK_EQ(after.live_bytes, before.live_bytes);
  GPUPLUG_CHECK_EQ(after.total_frees, before.total_frees + 1);
}

void zero_byte_alloc(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const LedgerStats before = gpu.ledger_stats();
  const DevicePtr a = gpu.alloc(0);
  const DevicePtr b = gpu.alloc(0);
  GPUPLUG_CHECK_MSG(a && b, "alloc(0) returned a null pointer");
  GPUPLUG_CHECK_MSG(a != b, "two live zero-byte allocations share the address " << detail::show(a));
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_count, before.live_count + 2);
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_bytes, before.live_bytes);  // zero bytes count as zero
  // A copy of nothing touches nothing; one byte already overruns the allocation.
  const std::uint8_t byte = 1;
  gpu.copy_h2d(a, &byte, 0);
  GPUPLUG_CHECK_THROWS(gpu.copy_h2d(a, &byte, 1), Status::invalid_argument);
  if (gpu.device_info().managed_memory) {
    const DevicePtr m = gpu.alloc_managed(0);
    GPUPLUG_CHECK_MSG(m && m != a && m != b, "alloc_managed(0) returned "
                                                 << detail::show(m) << ", not a distinct pointer");
    gpu.free(m);
  }
  gpu.free(a);
  gpu.free(b);
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_count, before.live_count);
  GPUPLUG_CHECK_THROWS(gpu.free(a), Status::invalid_argument);
}

void free_null_is_noop(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const LedgerStats before = gpu.ledger_stats();
  gpu.free(DevicePtr{});
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().total_frees, before.total_frees);
}

void free_unknown_pointer(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  DeviceBuffer live(gpu, 256);
  const LedgerStats before = gpu.ledger_stats();
  const Error e1 = GPUPLUG_CHECK_THROWS(gpu.free(DevicePtr{0xdead0000}), Status::invalid_argument);
  GPUPLUG_CHECK_MSG(e1.backend() == gpu.name(),
                    "the error names backend '" << e1.backend() << "', not " << gpu.name());
  GPUPLUG_CHECK_MSG(contains(e1.what(), "0xdead0000"),
                    "the error does not name the pointer: " << e1.what());
  // A host address (this stack) is no device allocation either.
  std::uint64_t local = 0;
  GPUPLUG_CHECK_THROWS(gpu.free(DevicePtr{reinterpret_cast<std::uintptr_t>(&local)}),
                       Status::invalid_argument);
  // A pointer into the middle of a live allocation is not the allocation.
  GPUPLUG_CHECK_THROWS(gpu.free(live.ptr() + 8), Status::invalid_argument);
  const LedgerStats after = gpu.ledger_stats();
  GPUPLUG_CHECK_EQ(after.live_count, before.live_count);
  GPUPLUG_CHECK_EQ(after.live_bytes, before.live_bytes);
  // The backend still works, and the live allocation was not disturbed.
  const auto data = pattern(256);
  gpu.copy_h2d(live.ptr(), data.data(), data.size());
  GPUPLUG_CHECK(read_back(gpu, live.ptr(), data.size()) == data);
}

void double_free(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const DevicePtr p = gpu.alloc(1024);
  gpu.free(p);
  const LedgerStats before = gpu.ledger_stats();
  const Error e = GPUPLUG_CHECK_THROWS(gpu.free(p), Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(e.what(), support::hex(p.value)),
                    "the error does not name the pointer: " << e.what());
  const LedgerStats after = gpu.ledger_stats();
  GPUPLUG_CHECK_EQ(after.total_frees, before.total_frees);
  GPUPLUG_CHECK_EQ(after.live_count, before.live_count);
}

void copy_out_of_range(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const auto data = pattern(256);
  const std::vector<std::uint8_t> big(4096, 0xCC);
  std::vector<std::uint8_t> sink(4096);
  DeviceBuffer b(gpu, 256);
  DeviceBuffer small(gpu, 128);
  gpu.copy_h2d(b.ptr(), data.data(), data.size());
  const Stream s = gpu.create_stream();

  const Error over =
      GPUPLUG_CHECK_THROWS(gpu.copy_h2d(b.ptr(), big.data(), 257), Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(over.what(), "copy_h2d") &&
                        contains(over.what(), support::hex(b.ptr().value)) &&
                        contains(over.what(), "256"),
                    "the error does not name the operation, the pointer and the allocation's size: "
                        << over.what());
  GPUPLUG_CHECK_THROWS(gpu.copy_h2d(b.ptr() + 200, big.data(), 100), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.copy_d2h(sink.data(), b.ptr() + 255, 2), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.copy_d2d(b.ptr(), small.ptr(), 256),
                       Status::invalid_argument);  // source short
  GPUPLUG_CHECK_THROWS(gpu.copy_d2d(small.ptr(), b.ptr(), 256),
                       Status::invalid_argument);  // target short
  GPUPLUG_CHECK_THROWS(gpu.copy_h2d_async(b.ptr(), big.data(), 300, s), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.copy_d2h_async(sink.data(), b.ptr() + 1, 256, s),
                       Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.copy_d2d_async(b.ptr() + 128, small.ptr(), 129, s),
                       Status::invalid_argument);
  const Error ms = GPUPLUG_CHECK_THROWS(gpu.memset(b.ptr() + 1, 0, 256), Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(ms.what(), "memset"),
                    "the error does not name the operation: " << ms.what());
  GPUPLUG_CHECK_THROWS(gpu.memset(b.ptr(), 0, 257, s), Status::invalid_argument);
  // Sizes that wrap around 2^64 when added to the address.
  const std::size_t huge = std::numeric_limits<std::size_t>::max() - 4;
  GPUPLUG_CHECK_THROWS(gpu.copy_h2d(b.ptr() + 8, big.data(), huge), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.copy_d2h(sink.data(), b.ptr() + 8, huge), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.memset(b.ptr() + 8, 0, huge), Status::invalid_argument);

  gpu.synchronize(s);
  gpu.destroy_stream(s);
  // Refused operations wrote nothing: the range check comes before the copy.
  GPUPLUG_CHECK_MSG(read_back(gpu, b.ptr(), data.size()) == data,
                    "a refused copy or memset changed the buffer");
}

void copy_null_pointer(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  std::vector<std::uint8_t> host(64, 1);
  DeviceBuffer b(gpu, 64);
  GPUPLUG_CHECK_THROWS(gpu.copy_h2d(DevicePtr{}, host.data(), 16), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.copy_d2h(host.data(), DevicePtr{}, 16), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.copy_d2d(b.ptr(), DevicePtr{}, 16), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.memset(DevicePtr{}, 0, 16), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.copy_h2d(b.ptr(), nullptr, 16), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.copy_d2h(nullptr, b.ptr(), 16), Status::invalid_argument);
  const Stream s = gpu.create_stream();
  GPUPLUG_CHECK_THROWS(gpu.copy_h2d_async(b.ptr(), nullptr, 16, s), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.copy_d2h_async(nullptr, b.ptr(), 16, s), Status::invalid_argument);
  gpu.destroy_stream(s);
}

void copy_unknown_pointer(Context& ctx) {
  // Addresses no allocation, module global or mapping of this backend covers. The SDK leaves
  // pointers its ledger does not know to the vendor (module globals live there), so this is
  // the vendor's check: a GPU driver refuses them, the host plugin must too.
  GpuBackend& gpu = ctx.backend();
  std::vector<std::uint8_t> host(64, 1);
  DeviceBuffer b(gpu, 64);
  const DevicePtr unknown{0x1000};
  GPUPLUG_CHECK_THROWS(gpu.copy_h2d(unknown, host.data(), 16), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.copy_d2h(host.data(), unknown, 16), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.copy_d2d(b.ptr(), unknown, 16), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.memset(unknown, 0, 16), Status::invalid_argument);
  const Stream s = gpu.create_stream();
  GPUPLUG_CHECK_THROWS(gpu.copy_d2h_async(host.data(), unknown, 16, s), Status::invalid_argument);
  gpu.destroy_stream(s);
  // A freed pointer is no longer known.
  const DevicePtr stale = gpu.alloc(64);
  gpu.free(stale);
  GPUPLUG_CHECK_THROWS(gpu.copy_h2d(stale, host.data(), 16), Status::invalid_argument);
}

void copies_async_and_d2d(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const auto data = pattern(10000, 3);
  std::vector<std::uint8_t> out(data.size(), 0);
  DeviceBuffer x(gpu, data.size());
  DeviceBuffer y(gpu, data.size());
  DeviceBuffer z(gpu, data.size());
  const Stream s = gpu.create_stream();
  GPUPLUG_CHECK_MSG(s.value != 0, "create_stream returned the default stream");
  gpu.copy_h2d_async(x.ptr(), data.data(), data.size(), s);
  gpu.copy_d2d_async(y.ptr(), x.ptr(), data.size(), s);
  gpu.copy_d2h_async(out.data(), y.ptr(), data.size(), s);
  gpu.synchronize(s);
  GPUPLUG_CHECK_MSG(out == data,
                    "h2d_async -> d2d_async -> d2h_async on one stream did not round-trip");

  // The synchronous d2d, halves swapped, and the default stream's async copies.
  const std::size_t half = data.size() / 2;
  gpu.copy_d2d(z.ptr(), x.ptr() + half, half);
  gpu.copy_d2d(z.ptr() + half, x.ptr(), half);
  std::fill(out.begin(), out.end(), 0);
  gpu.copy_d2h_async(out.data(), z.ptr(), data.size(), Stream{});
  gpu.synchronize(Stream{});
  GPUPLUG_CHECK(std::equal(out.begin(), out.begin() + half, data.begin() + half));
  GPUPLUG_CHECK(std::equal(out.begin() + half, out.end(), data.begin()));
  gpu.destroy_stream(s);
}

void memset_ordered_on_stream(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  DeviceBuffer b(gpu, 1000);
  std::vector<std::uint8_t> out(1000, 0);
  const Stream s = gpu.create_stream();
  gpu.memset(b.ptr(), 0xAB, 1000, s);
  gpu.memset(b.ptr() + 10, 0x00, 20, s);
  gpu.memset(b.ptr() + 999, 0x7F, 1, s);
  gpu.copy_d2h_async(out.data(), b.ptr(), out.size(), s);
  gpu.synchronize(s);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint8_t want = i == 999 ? 0x7F : (i >= 10 && i < 30) ? 0x00 : 0xAB;
    GPUPLUG_CHECK_MSG(out[i] == want, "byte " << i << " is " << unsigned{out[i]} << ", expected "
                                              << unsigned{want} << " after ordered memsets");
  }
  gpu.destroy_stream(s);
}

void memset_any_offset_and_length(Context& ctx) {
  // Every start offset modulo 8 and lengths around the 4-byte words a device fill may use
  // (vkCmdFillBuffer, cuMemsetD32): the bytes around the range are untouched, the range exact.
  GpuBackend& gpu = ctx.backend();
  constexpr std::size_t kBytes = 4096 + 64;
  DeviceBuffer b(gpu, kBytes);
  std::vector<std::uint8_t> want(kBytes, 0x11);
  gpu.copy_h2d(b.ptr(), want.data(), kBytes);
  std::uint8_t value = 0x20;
  for (const std::size_t length : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{4},
                                   std::size_t{5}, std::size_t{7}, std::size_t{8}, std::size_t{13},
                                   std::size_t{4000}, std::size_t{4095}}) {
    for (std::size_t offset = 0; offset < 8; ++offset) {
      const std::size_t at = offset + (length % 3) * 8;
      gpu.memset(b.ptr() + at, value, length);
      std::fill(want.begin() + static_cast<std::ptrdiff_t>(at),
                want.begin() + static_cast<std::ptrdiff_t>(at + length), value);
      const auto out = read_back(gpu, b.ptr(), kBytes);
      const auto bad = std::mismatch(out.begin(), out.end(), want.begin());
      GPUPLUG_CHECK_MSG(bad.first == out.end(),
                        "after memset(offset " << at << ", " << length << " bytes, value "
                                               << unsigned{value} << ") byte "
                                               << (bad.first - out.begin()) << " is "
                                               << unsigned{*bad.first} << ", expected "
                                               << unsigned{*bad.second});
      ++value;
    }
  }
}

void sync_copy_orders_after_default_stream(Context& ctx) {
  // Like CUDA's legacy default stream: a synchronous copy sees the default stream's earlier work.
  GpuBackend& gpu = ctx.backend();
  DeviceBuffer b(gpu, 1 << 20);
  gpu.memset(b.ptr(), 0x5A, b.bytes());
  const auto out = read_back(gpu, b.ptr(), b.bytes());
  const auto bad = std::find_if(out.begin(), out.end(), [](std::uint8_t v) { return v != 0x5A; });
  GPUPLUG_CHECK_MSG(bad == out.end(), "copy_d2h right after memset on the default stream read byte "
                                          << (bad - out.begin()) << " = " << unsigned{*bad}
                                          << ", expected 0x5a");

  // The default stream waits for every other stream: a synchronous copy sees what another stream
  // queued before it ...
  const Stream s = gpu.create_stream(StreamFlags::blocking);  // ordered with the default stream
  const auto data = pattern(b.bytes(), 5);
  gpu.copy_h2d_async(b.ptr(), data.data(), data.size(), s);
  GPUPLUG_CHECK_MSG(read_back(gpu, b.ptr(), b.bytes()) == data,
                    "copy_d2h did not see copy_h2d_async queued on another stream before it");
  // ... and a launch on the default stream between two operations of another stream runs after
  // the first and before the second.
  constexpr std::uint32_t n = 4096;
  const std::vector<float> x(n, 3.0f), y(n, 1.0f);
  std::vector<float> got(n, 0.0f);
  DeviceBuffer dx(gpu, n * sizeof(float)), dy(gpu, n * sizeof(float));
  gpu.copy_h2d_async(dx.ptr(), x.data(), n * sizeof(float), s);
  gpu.copy_h2d_async(dy.ptr(), y.data(), n * sizeof(float), s);
  launch_axpy(gpu, n, 2.0f, dx.ptr(), dy.ptr(), Stream{});
  gpu.copy_d2h_async(got.data(), dy.ptr(), n * sizeof(float), s);
  gpu.synchronize(s);
  gpu.destroy_stream(s);
  GPUPLUG_CHECK_MSG(std::all_of(got.begin(), got.end(), [](float v) { return v == 7.0f; }),
                    "axpy on the default stream was not ordered with the copies on stream s");
}

void sync_copies_complete_on_return(Context& ctx) {
  // copy_h2d and copy_d2h promise the data is in place when they return, on every backend: the
  // source may be reused (overwritten) at once and the destination read at once. 8 MiB from
  // pageable memory, where a driver may return once the source is staged.
  GpuBackend& gpu = ctx.backend();
  const std::size_t n = std::size_t{8} << 20;
  const auto data = pattern(n, 11);
  std::vector<std::uint8_t> host = data;
  DeviceBuffer b(gpu, n);
  gpu.copy_h2d(b.ptr(), host.data(), n);
  std::fill(host.begin(), host.end(), std::uint8_t{0xC3});  // the source reused at once
  DeviceBuffer c(gpu, n);
  const Stream s = gpu.create_stream();
  gpu.copy_d2d_async(c.ptr(), b.ptr(), n, s);  // another stream reads what copy_h2d wrote
  gpu.synchronize(s);
  gpu.destroy_stream(s);
  std::vector<std::uint8_t> out(n, 0);
  gpu.copy_d2h(out.data(), c.ptr(), n);
  // Read at once, with no synchronize in between.
  const auto bad = std::mismatch(out.begin(), out.end(), data.begin());
  GPUPLUG_CHECK_MSG(bad.first == out.end(),
                    "copy_h2d then overwriting the host buffer at once, then copy_d2h: byte "
                        << (bad.first - out.begin()) << " is " << unsigned{*bad.first}
                        << ", expected " << unsigned{*bad.second});
  gpu.copy_d2h(host.data(), b.ptr(), n);
  GPUPLUG_CHECK_MSG(host == data, "copy_d2h did not return the bytes copy_h2d wrote");
}

void managed_memory(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  if (!gpu.device_info().managed_memory) {
    GPUPLUG_CHECK_THROWS(gpu.alloc_managed(4096), Status::unsupported);
    ctx.note("the device has no managed memory: checked that alloc_managed is unsupported");
    return;
  }
  const LedgerStats before = gpu.ledger_stats();
  {
    DeviceBuffer m = DeviceBuffer::managed(gpu, 4096);
    GPUPLUG_CHECK(m.ptr());
    const LedgerStats during = gpu.ledger_stats();
    GPUPLUG_CHECK(during.live_managed_bytes >= before.live_managed_bytes + 4096);
    GPUPLUG_CHECK_EQ(during.live_count, before.live_count + 1);
    const auto data = pattern(4096, 11);
    gpu.copy_h2d(m.ptr(), data.data(), data.size());
    GPUPLUG_CHECK(read_back(gpu, m.ptr(), data.size()) == data);
  }
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_managed_bytes, before.live_managed_bytes);
}

const Case cases[] = {
    {"alloc_copy_roundtrip",
     "alloc, copies and free move bytes exactly and keep the ledger in step", alloc_copy_roundtrip},
    {"zero_byte_alloc", "a zero-byte allocation is non-null, distinct and freeable once",
     zero_byte_alloc},
    {"free_null_is_noop", "free(null) does nothing", free_null_is_noop},
    {"free_unknown_pointer",
     "free of an unknown or interior pointer is invalid_argument, never a crash",
     free_unknown_pointer},
    {"double_free", "a second free is invalid_argument and leaves the ledger alone", double_free},
    {"copy_out_of_range",
     "copies and memsets past an allocation (or wrapping 2^64) are refused before writing",
     copy_out_of_range},
    {"copy_null_pointer",
     "copies and memsets with a null device or host pointer are invalid_argument",
     copy_null_pointer},
    {"copy_unknown_pointer",
     "copies from or to unknown or freed device pointers are invalid_argument, not a crash",
     copy_unknown_pointer},
    {"copies_async_and_d2d", "async copies keep stream order; d2d copies move the right bytes",
     copies_async_and_d2d},
    {"memset_ordered_on_stream", "memsets and copies on one stream run in submission order",
     memset_ordered_on_stream},
    {"memset_any_offset_and_length",
     "memset sets exactly the bytes asked at any offset and length, and none around them",
     memset_any_offset_and_length},
    {"sync_copy_orders_after_default_stream",
     "the default stream is ordered with every stream: synchronous copies and its launches see "
     "earlier work",
     sync_copy_orders_after_default_stream},
    {"sync_copies_complete_on_return",
     "copy_h2d and copy_d2h are complete on return: the source may be overwritten and the "
     "destination read at once",
     sync_copies_complete_on_return},
    {"managed_memory", "alloc_managed works and is counted as managed, or is unsupported",
     managed_memory},
};

}  // namespace

std::span<const Case> memory_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
