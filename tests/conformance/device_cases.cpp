// SPDX-License-Identifier: Apache-2.0
// Conformance cases for a device as a whole: the device memory limit, create options and
// ordinals, the ledger (stats, report, sweep), names and device info, and streams.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

void device_memory_limit(Context& ctx) {
  constexpr std::uint64_t limit = 1024 * 1024;
  auto limited = ctx.make_backend({{"device_memory_limit", "1M"}});
  GpuBackend& gpu = *limited;
  DeviceBuffer managed;  // outlives `a`: managed memory is not bound by the limit
  {
    DeviceBuffer a(gpu, 512 * 1024);
    GPUPLUG_CHECK_THROWS(gpu.alloc(768 * 1024), Status::out_of_memory);
    GPUPLUG_CHECK_THROWS(gpu.alloc(2 * 1024 * 1024), Status::out_of_memory);
    GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_count, 1u);
    // The backend sees the limit as its memory.
    const MemoryInfo mi = gpu.memory_info();
    GPUPLUG_CHECK_MSG(mi.total_bytes <= limit && mi.free_bytes <= limit - 512 * 1024,
                      "memory_info says " << mi.free_bytes << " of " << mi.total_bytes
                                          << " bytes free under a 1 MiB limit with 512 KiB live");
    if (gpu.device_info().managed_memory) {
      managed = DeviceBuffer::managed(gpu, 2 * 1024 * 1024);
      GPUPLUG_CHECK(managed.ptr());
    }
  }
  // Freed memory counts again: the whole limit fits once `a` is gone, managed memory or not.
  DeviceBuffer whole(gpu, limit);
  GPUPLUG_CHECK(whole.ptr());
  // The limit belongs to the backend it was given to: the backend under test has none.
  DeviceBuffer unlimited(ctx.backend(), 2 * 1024 * 1024);
  GPUPLUG_CHECK(unlimited.ptr());
  // A limit that is not a byte size is refused, naming the option.
  const Error bad = GPUPLUG_CHECK_THROWS(ctx.make_backend({{"device_memory_limit", "12Q"}}),
                                         Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(bad.what(), "device_memory_limit"),
                    "the error does not name the option: " << bad.what());
}

void unknown_option_refused(Context& ctx) {
  const Error e =
      GPUPLUG_CHECK_THROWS(ctx.make_backend({{"no_such_option", "1"}}), Status::invalid_argument);
  GPUPLUG_CHECK_MSG(contains(e.what(), "no_such_option"),
                    "the error does not name the option: " << e.what());
}

void bad_ordinal_refused(Context& ctx) {
  const std::string selector = ctx.target().plugin + ":4096!";
  const Error e = GPUPLUG_CHECK_THROWS_ANY(ctx.target().registry->create(selector));
  GPUPLUG_CHECK_MSG(contains(e.what(), ctx.target().plugin),
                    "the error does not name the plugin: " << e.what());
}

void ledger_stats_and_report(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const LedgerStats before = gpu.ledger_stats();
  {
    DeviceBuffer a1(gpu, 3000, "conformance_site_alpha");
    DeviceBuffer a2(gpu, 5000, "conformance_site_alpha");
    DeviceBuffer b1(gpu, 1000, "conformance_site_beta");
    const LedgerStats s = gpu.ledger_stats();
    GPUPLUG_CHECK_EQ(s.live_count, before.live_count + 3);
    GPUPLUG_CHECK(s.live_bytes >= before.live_bytes + 9000);
    GPUPLUG_CHECK(s.peak_bytes >= s.live_bytes);
    const std::string report = gpu.alloc_report(10);
    GPUPLUG_CHECK_MSG(
        contains(report, "conformance_site_alpha") && contains(report, "conformance_site_beta"),
        "alloc_report does not name the call sites:\n"
            << report);
    // The largest site is listed first.
    GPUPLUG_CHECK_MSG(report.find("conformance_site_alpha") < report.find("conformance_site_beta"),
                      "alloc_report does not list the largest site first:\n"
                          << report);
    const std::string top1 = gpu.alloc_report(1);
    GPUPLUG_CHECK_MSG(!contains(top1, "conformance_site_beta"),
                      "alloc_report(1) lists more than one site:\n"
                          << top1);
  }
  const LedgerStats after = gpu.ledger_stats();
  GPUPLUG_CHECK_EQ(after.live_count, before.live_count);
  GPUPLUG_CHECK(after.peak_bytes >= before.live_bytes + 9000);
  GPUPLUG_CHECK_EQ(after.total_allocs, before.total_allocs + 3);
  GPUPLUG_CHECK_EQ(after.total_frees, before.total_frees + 3);
  GPUPLUG_CHECK_MSG(!contains(gpu.alloc_report(10), "conformance_site_alpha"),
                    "alloc_report still lists freed allocations");
}

void sweep_unreleased(Context& ctx) {
  auto owned = ctx.make_backend();
  GpuBackend& gpu = *owned;
  const DevicePtr a = gpu.alloc(1000, "conformance_sweep");
  gpu.alloc(2000, "conformance_sweep");
  gpu.alloc(0, "conformance_sweep");
  LedgerStats swept;
  {
    ScopedLogLevel quiet(LogLevel::error);  // the sweep warns by design
    swept = gpu.sweep_unreleased();
  }
  GPUPLUG_CHECK_EQ(swept.live_count, 3u);
  GPUPLUG_CHECK(swept.live_bytes >= 3000);
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_count, 0u);
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_bytes, 0u);
  GPUPLUG_CHECK_THROWS(gpu.free(a), Status::invalid_argument);
  const LedgerStats again = gpu.sweep_unreleased();
  GPUPLUG_CHECK_EQ(again.live_count, 0u);
  // The backend keeps working after a sweep.
  DeviceBuffer b(gpu, 64);
  GPUPLUG_CHECK(b.ptr());
}

void memory_and_device_info(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  GPUPLUG_CHECK_EQ(std::string(gpu.name()), ctx.target().backend_name());
  GPUPLUG_CHECK_EQ(std::string(gpu.plugin_name()), ctx.target().plugin);
  GPUPLUG_CHECK_EQ(gpu.ordinal(), ctx.target().ordinal);
  const MemoryInfo mi = gpu.memory_info();
  GPUPLUG_CHECK(mi.total_bytes > 0);
  GPUPLUG_CHECK(mi.free_bytes <= mi.total_bytes);
  const DeviceInfo di = gpu.device_info();
  GPUPLUG_CHECK_EQ(di.ordinal, ctx.target().ordinal);
  GPUPLUG_CHECK_MSG(!di.name.empty(), "device_info has no name");
  GPUPLUG_CHECK(di.total_memory > 0);
  GPUPLUG_CHECK(di.compute_units > 0);
}

void streams(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const Stream a = gpu.create_stream();
  const Stream b = gpu.create_stream();
  GPUPLUG_CHECK(a.value != 0 && b.value != 0 && a != b);
  DeviceBuffer buf(gpu, 4096);
  gpu.memset(buf.ptr(), 1, 2048, a);
  gpu.memset(buf.ptr() + 2048, 2, 2048, b);
  // synchronize() alone waits for the work of every stream.
  std::vector<std::uint8_t> seen_a(2048, 0), seen_b(2048, 0);
  gpu.copy_d2h_async(seen_a.data(), buf.ptr(), 2048, a);
  gpu.copy_d2h_async(seen_b.data(), buf.ptr() + 2048, 2048, b);
  gpu.synchronize();
  GPUPLUG_CHECK_MSG(std::all_of(seen_a.begin(), seen_a.end(), [](auto v) { return v == 1; }) &&
                        std::all_of(seen_b.begin(), seen_b.end(), [](auto v) { return v == 2; }),
                    "synchronize() returned before the streams' copies had landed");
  gpu.synchronize(a);
  gpu.synchronize(b);
  gpu.destroy_stream(a);
  GPUPLUG_CHECK_THROWS(gpu.destroy_stream(a), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS_ANY(gpu.destroy_stream(Stream{}));
  // A destroyed or unknown stream is refused, not used.
  GPUPLUG_CHECK_THROWS(gpu.memset(buf.ptr(), 0, 16, a), Status::invalid_argument);
  GPUPLUG_CHECK_THROWS(gpu.synchronize(Stream{4242}), Status::invalid_argument);
  gpu.destroy_stream(b);
  const auto out = buf.download<std::uint8_t>(4096);
  GPUPLUG_CHECK(std::all_of(out.begin(), out.begin() + 2048, [](auto v) { return v == 1; }));
  GPUPLUG_CHECK(std::all_of(out.begin() + 2048, out.end(), [](auto v) { return v == 2; }));
}

const Case cases[] = {
    {"device_memory_limit",
     "device_memory_limit fails device allocations past it, not managed ones", device_memory_limit},
    {"unknown_option_refused", "an unknown create option is invalid_argument naming it",
     unknown_option_refused},
    {"bad_ordinal_refused", "a device ordinal past the last device is an error naming the plugin",
     bad_ordinal_refused},
    {"ledger_stats_and_report", "ledger counters and the per-call-site report follow allocations",
     ledger_stats_and_report},
    {"sweep_unreleased", "sweep_unreleased frees what is live, once, and says what it swept",
     sweep_unreleased},
    {"memory_and_device_info", "names, ordinal, memory and device info are consistent",
     memory_and_device_info},
    {"streams",
     "streams are distinct, synchronize (synchronize() waits for all), destroy once; the default "
     "stream cannot be destroyed; destroyed and unknown streams are refused",
     streams},
};

}  // namespace

std::span<const Case> device_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
