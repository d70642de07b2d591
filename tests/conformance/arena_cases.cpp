// SPDX-License-Identifier: Apache-2.0
// Conformance cases for arenas and stream flags (ABI 1.3): an arena is device memory on the
// ledger as kind arena, outside live_bytes and the peaks but inside device_memory_limit, freed by
// free_arena only and named when swept; created streams take StreamFlags.
#include <cstdint>
#include <vector>

#include "gpuplug/support/text.hpp"
#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

/// An arena of `bytes`, or Skip on a backend that reports arenas unsupported.
DevicePtr arena_or_skip(GpuBackend& gpu, std::size_t bytes, const char* site) {
  try {
    return gpu.alloc_arena(bytes, site);
  } catch (const Error& e) {
    if (e.status() != Status::unsupported) throw;
    skip("arenas are not supported by this backend: " + std::string(e.what()));
  }
}

void arena_on_the_ledger_apart(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const LedgerStats before = gpu.ledger_stats();
  const DevicePtr a = arena_or_skip(gpu, 8192, "conformance_weights");
  GPUPLUG_CHECK(a);
  const LedgerStats during = gpu.ledger_stats();
  GPUPLUG_CHECK_EQ(during.live_count, before.live_count + 1);
  GPUPLUG_CHECK_EQ(during.arena_bytes, before.arena_bytes + 8192);
  GPUPLUG_CHECK_EQ(during.live_bytes, before.live_bytes);  // not the transient budget
  GPUPLUG_CHECK_EQ(during.peak_bytes, before.peak_bytes);
  // Device memory like any other: copies and memsets reach it.
  std::vector<std::uint8_t> in(8192), out(8192, 0);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(i * 13);
  gpu.copy_h2d(a, in.data(), in.size());
  gpu.memset(a + 16, 0x7E, 16);
  gpu.synchronize();
  gpu.copy_d2h(out.data(), a, out.size());
  for (std::size_t i = 16; i < 32; ++i) in[i] = 0x7E;
  GPUPLUG_CHECK(out == in);
  // The snapshot lists it as an arena, with its site.
  bool listed = false;
  for (const LiveAllocation& l : gpu.memory_snapshot().allocations)
    if (l.ptr == a) listed = l.kind == AllocKind::arena && l.site == "conformance_weights";
  GPUPLUG_CHECK_MSG(listed, "the snapshot does not list the arena as kind arena with its site");
  // free refuses an arena, free_arena anything else; both name the pointer.
  const Error by_free = GPUPLUG_CHECK_THROWS(gpu.free(a), Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(by_free.what(), "free_arena") &&
                        contains(by_free.what(), support::hex(a.value)),
                    "free of an arena does not say to use free_arena: " << by_free.what());
  DeviceBuffer plain(gpu, 64);
  const Error by_arena = GPUPLUG_CHECK_THROWS(gpu.free_arena(plain.ptr()), Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(by_arena.what(), support::hex(plain.ptr().value)),
                    "free_arena of an allocation does not name it: " << by_arena.what());
  gpu.free_arena(a);
  gpu.free_arena(DevicePtr{});  // null is a no-op
  const LedgerStats after = gpu.ledger_stats();
  GPUPLUG_CHECK_EQ(after.arena_bytes, before.arena_bytes);
  GPUPLUG_CHECK_EQ(after.live_count, before.live_count + 1);  // `plain` is still live
  GPUPLUG_CHECK_THROWS(gpu.free_arena(a), Status::invalid_argument);  // twice
}

void arena_inside_device_memory_limit(Context& ctx) {
  auto limited = ctx.make_backend({{"device_memory_limit", "1M"}});
  GpuBackend& gpu = *limited;
  const DevicePtr a = arena_or_skip(gpu, 768 * 1024, "conformance_weights");
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_bytes, 0u);
  // What is left of the limit is what an allocation may take: the arena is device memory.
  const Error e = GPUPLUG_CHECK_THROWS(gpu.alloc(512 * 1024, "conformance_kv"), Status::out_of_memory);
  GPUPLUG_CHECK_MSG(contains(e.what(), "arenas") && contains(e.what(), "conformance_weights"),
                    "the out-of-memory report does not name the arena: " << e.what());
  DeviceBuffer fits(gpu, 128 * 1024);
  GPUPLUG_CHECK(fits.ptr());
  gpu.free_arena(a);
}

void arena_swept_and_counted(Context& ctx) {
  auto gpu = ctx.make_backend();
  const DevicePtr a = arena_or_skip(*gpu, 4096, "conformance_arena_leak");
  GPUPLUG_CHECK(a);
  const LedgerStats swept = gpu->sweep_unreleased();
  GPUPLUG_CHECK_EQ(swept.live_count, 1u);
  GPUPLUG_CHECK_EQ(swept.arena_bytes, 4096u);
  GPUPLUG_CHECK_EQ(gpu->ledger_stats().arena_bytes, 0u);
  GPUPLUG_CHECK_THROWS(gpu->free_arena(a), Status::invalid_argument);  // swept means freed
}

void streams_take_flags(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  constexpr std::size_t kBytes = 4096;
  DeviceBuffer dst(gpu, 2 * kBytes);
  for (const StreamFlags flags : {StreamFlags::blocking, StreamFlags::non_blocking}) {
    const Stream s = gpu.create_stream(flags);
    GPUPLUG_CHECK(s.value != 0);
    const std::uint8_t value = flags == StreamFlags::blocking ? 0x11 : 0x22;
    gpu.memset(dst.ptr(), value, kBytes, s);
    gpu.copy_d2d_async(dst.ptr() + kBytes, dst.ptr(), kBytes, s);
    gpu.synchronize(s);
    std::vector<std::uint8_t> seen(kBytes);
    gpu.copy_d2h(seen.data(), dst.ptr() + kBytes, kBytes);
    for (const std::uint8_t b : seen) GPUPLUG_CHECK_EQ(b, value);
    gpu.destroy_stream(s);
  }
  const Error bad = GPUPLUG_CHECK_THROWS(gpu.create_stream(static_cast<StreamFlags>(7)),
                                         Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(bad.what(), "7"), "the error does not name the flags: " << bad.what());
}

const Case cases[] = {
    {"arena_on_ledger",
     "alloc_arena is device memory on the ledger as kind arena with its site, in live_count and "
     "arena_bytes but not live_bytes nor peak_bytes; free and free_arena refuse each other's",
     arena_on_the_ledger_apart},
    {"arena_inside_limit",
     "an arena counts against device_memory_limit, and the out-of-memory report names it",
     arena_inside_device_memory_limit},
    {"arena_swept", "sweep_unreleased frees an arena left live and counts it in arena_bytes",
     arena_swept_and_counted},
    {"stream_flags",
     "create_stream takes StreamFlags (blocking, non_blocking); an unknown value is "
     "invalid_argument naming it",
     streams_take_flags},
};

}  // namespace

std::span<const Case> arena_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
