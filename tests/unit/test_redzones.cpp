// SPDX-License-Identifier: Apache-2.0
// The validate layer's guard bands (docs/layers.md, "Guard bands") on the host plugin: a kernel
// that writes past the end or before the start of its allocation is caught at synchronize, at
// free and by GpuBackend::scan_redzones(), once; the ledger figures stay the user's.
#define BOOST_TEST_MODULE redzones
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <gpuplug/gpuplug.hpp>
#include <gpuplug/support/text.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "contains.hpp"
#include "error_of.hpp"
#include "log_records.hpp"
#include "memory_cases.hpp"
#include "test_print.hpp"

using namespace gpuplug;
using gpuplug::support::hex;
using gpuplug::test::contains;
using gpuplug::test::error_of;
namespace cases = gpuplug::test::memory_cases;

namespace {

/// A registry of this build tree's plugins and a host backend with the validate layer on, the
/// test_redzones module loaded.
struct Guarded {
  PluginRegistry registry;
  std::shared_ptr<GpuBackend> gpu;
  explicit Guarded(Options options = {}) {
    registry.discover();
    options.emplace("layers", "validate");
    gpu = registry.create("host!", options);
    gpu->load_module_file("test_redzones", GPUPLUG_TEST_HOST_KERNEL_DIR "/test_redzones.so");
  }
  void fill_one_past(DevicePtr out, std::uint32_t n, Stream s = {}) {
    gpu->launch_args(gpu->kernel("test_redzones", "fill_one_past"), Dim3{}, Dim3{}, 0, s, out,
                     n, 1.5f);
  }
  void fill(DevicePtr out, std::uint32_t n, Stream s = {}) {
    gpu->launch_args(gpu->kernel("test_redzones", "fill"), Dim3{}, Dim3{}, 0, s, out, n, 2.5f);
  }
  void poke(DevicePtr p, std::int64_t offset, Stream s = {}) {
    gpu->launch_args(gpu->kernel("test_redzones", "poke"), Dim3{}, Dim3{}, 0, s, p, offset,
                     std::uint32_t{0x55});
  }
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// How many error records say "guard band broken".
std::size_t broken_lines(test::LogRecords& log) {
  std::size_t n = 0;
  for (const auto& r : log.take())
    if (r.level == LogLevel::error && contains(r.message, "guard band broken")) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_kernel_writing_one_element_past_its_output_is_caught_once) {
  Guarded g;
  test::LogRecords log;
  constexpr std::uint32_t n = 16;
  const DevicePtr out = g.gpu->alloc(n * sizeof(float), "redzone_output");
  BOOST_TEST(g.gpu->scan_redzones() == 0u);
  g.fill_one_past(out, n);
  BOOST_TEST(g.gpu->scan_redzones() == 1u);  // a query: it reports nothing
  const Error e = error_of([&] { g.gpu->synchronize(); }, Status::launch_failed);
  const std::string what = e.what();
  BOOST_TEST(contains(what, "guard band broken: " + hex(out.value) +
                                " (allocated by redzone_output, 64 bytes): first bad byte at "
                                "+64 (1 byte past the end)"),
             what);
  BOOST_TEST(broken_lines(log) == 1u);
  // Reported once: later synchronizes and the free pass; the band is still broken.
  g.gpu->synchronize();
  BOOST_TEST(g.gpu->scan_redzones() == 1u);
  g.gpu->free(out);
  BOOST_TEST(broken_lines(log) == 0u);
  BOOST_TEST(g.gpu->scan_redzones() == 0u);
}

BOOST_AUTO_TEST_CASE(a_stream_synchronize_reports_the_band_too) {
  Guarded g;
  const Stream s = g.gpu->create_stream();
  const DevicePtr out = g.gpu->alloc(40 * sizeof(float), "on_a_stream");
  g.fill_one_past(out, 40, s);
  const Error e = error_of([&] { g.gpu->synchronize(s); }, Status::launch_failed);
  BOOST_TEST(contains(e.what(), "first bad byte at +160 (1 byte past the end)"), e.what());
  g.gpu->synchronize(s);
  g.gpu->synchronize();  // the device's synchronize does not report it again
  g.gpu->destroy_stream(s);
  g.gpu->free(out);
}

BOOST_AUTO_TEST_CASE(an_underrun_names_the_offset_before_the_start) {
  Guarded g;
  const DevicePtr p = g.gpu->alloc(100, "underrun");
  g.poke(p, -8);
  BOOST_TEST(g.gpu->scan_redzones() == 1u);
  const Error e = error_of([&] { g.gpu->synchronize(); }, Status::launch_failed);
  BOOST_TEST(contains(e.what(), "guard band broken: " + hex(p.value) +
                                    " (allocated by underrun, 100 bytes): first bad byte at -8 "
                                    "(8 bytes before the start)"),
             e.what());
  g.gpu->free(p);
}

BOOST_AUTO_TEST_CASE(both_bands_of_one_allocation_count_and_are_reported_together) {
  Guarded g;
  const DevicePtr p = g.gpu->alloc(32, "both");
  g.poke(p, -1);
  g.poke(p, 32 + 10);  // the 11th byte past the end
  BOOST_TEST(g.gpu->scan_redzones() == 2u);
  const Error e = error_of([&] { g.gpu->synchronize(); }, Status::launch_failed);
  BOOST_TEST(contains(e.what(), "first bad byte at -1 (1 byte before the start)"), e.what());
  BOOST_TEST(contains(e.what(), "and 1 more guard band broken"), e.what());
  g.gpu->free(p);
}

BOOST_AUTO_TEST_CASE(correct_kernels_break_no_band) {
  Guarded g;
  std::vector<DevicePtr> ptrs;
  for (std::uint32_t i = 0; i < 64; ++i) {
    const std::uint32_t n = i * 7;
    ptrs.push_back(g.gpu->alloc(n * sizeof(float), "many"));
    g.fill(ptrs.back(), n);
    // Copies and memsets up to the last byte stay inside the user's range.
    if (n != 0) g.gpu->memset(ptrs.back(), 0xAB, n * sizeof(float));
  }
  g.gpu->synchronize();
  BOOST_TEST(g.gpu->scan_redzones() == 0u);
  for (const DevicePtr p : ptrs) g.gpu->free(p);
  BOOST_TEST(g.gpu->ledger_stats().live_bytes == 0u);
}

BOOST_AUTO_TEST_CASE(free_of_a_broken_allocation_frees_it_and_reports) {
  Guarded g;
  test::LogRecords log;
  const DevicePtr p = g.gpu->alloc(48, "freed_broken");
  g.poke(p, 48);
  const Error e = error_of([&] { g.gpu->free(p); }, Status::launch_failed);
  const std::string what = e.what();
  BOOST_TEST(contains(what, "guard band broken: " + hex(p.value) +
                                " (allocated by freed_broken, 48 bytes): first bad byte at +48 "
                                "(1 byte past the end)"),
             what);
  BOOST_TEST(ends_with(what, "(the allocation was freed)"), what);
  BOOST_TEST(broken_lines(log) == 1u);
  const LedgerStats st = g.gpu->ledger_stats();
  BOOST_TEST(st.live_bytes == 0u);
  BOOST_TEST(st.live_count == 0u);
  // Freed indeed: a second free is a double free.
  const Error again = error_of([&] { g.gpu->free(p); }, Status::invalid_argument);
  BOOST_TEST(contains(again.what(), "double free"), again.what());
}

BOOST_AUTO_TEST_CASE(without_validate_there_are_no_bands) {
  PluginRegistry registry;
  registry.discover();
  const auto gpu = registry.create("host!", {{"layers", ""}});
  const DevicePtr p = gpu->alloc(64, "plain");
  BOOST_TEST(gpu->scan_redzones() == 0u);
  BOOST_TEST(gpu->ledger_stats().live_bytes == 64u);
  gpu->free(p);
}

BOOST_AUTO_TEST_CASE(the_ledger_shows_the_users_sizes_and_pointers) {
  Guarded g(Options{{"memory_history", "16"}});
  const DevicePtr d = g.gpu->alloc(1000, "sizes_device");
  const DevicePtr m = g.gpu->alloc_managed(200, "sizes_managed");
  LedgerStats st = g.gpu->ledger_stats();
  BOOST_TEST(st.live_bytes == 1200u);
  BOOST_TEST(st.live_managed_bytes == 200u);
  BOOST_TEST(st.peak_bytes == 1200u);
  BOOST_TEST(st.live_count == 2u);
  const MemorySnapshot s = g.gpu->memory_snapshot();
  BOOST_TEST(s.totals.live_bytes == 1200u);
  BOOST_TEST(s.totals.peak_bytes == 1200u);
  bool saw_d = false, saw_m = false;
  for (const LiveAllocation& a : s.allocations) {
    if (a.ptr == d) saw_d = a.bytes == 1000u;
    if (a.ptr == m) saw_m = a.bytes == 200u;
  }
  BOOST_TEST(saw_d);
  BOOST_TEST(saw_m);
  const SiteMemory* site = cases::site_named(s, "sizes_device");
  BOOST_TEST_REQUIRE(site != nullptr);
  BOOST_TEST(site->live_bytes == 1000u);
  BOOST_TEST(s.sites.front().site == "sizes_device");  // still largest first
  bool saw_event = false;
  for (const MemoryEvent& e : s.history)
    if (!e.is_free && e.ptr == d) saw_event = e.bytes == 1000u;
  BOOST_TEST(saw_event);
  // The peak follows the user's bytes through a free and reset_peak.
  g.gpu->free(d);
  BOOST_TEST(g.gpu->ledger_stats().peak_bytes == 1200u);
  g.gpu->reset_peak();
  BOOST_TEST(g.gpu->ledger_stats().peak_bytes == 200u);
  const LedgerStats swept = g.gpu->sweep_unreleased();
  BOOST_TEST(swept.live_bytes == 200u);
  BOOST_TEST(swept.live_managed_bytes == 200u);
  BOOST_TEST(g.gpu->ledger_stats().live_bytes == 0u);
  BOOST_TEST(g.gpu->scan_redzones() == 0u);
}

BOOST_AUTO_TEST_CASE(without_room_for_the_bands_the_allocation_is_made_without_them) {
  Guarded g(Options{{"device_memory_limit", "1M"}});
  const DevicePtr all = g.gpu->alloc(1 << 20, "the_whole_budget");
  BOOST_TEST(g.gpu->ledger_stats().live_bytes == std::uint64_t{1} << 20);
  BOOST_TEST(g.gpu->scan_redzones() == 0u);  // no bands to check
  error_of([&] { g.gpu->alloc(1, "one_more"); }, Status::out_of_memory);
  g.gpu->free(all);
  // With room again, the bands are back: a write past the end is caught.
  const DevicePtr p = g.gpu->alloc(1000, "room_again");
  g.poke(p, 1000);
  BOOST_TEST(g.gpu->scan_redzones() == 1u);
  error_of([&] { g.gpu->free(p); }, Status::launch_failed);
}

BOOST_AUTO_TEST_CASE(managed_allocations_are_padded_too) {
  Guarded g;
  const DevicePtr m = g.gpu->alloc_managed(16 * sizeof(float), "managed_output");
  g.fill_one_past(m, 16);
  BOOST_TEST(g.gpu->scan_redzones() == 1u);
  const Error e = error_of([&] { g.gpu->synchronize(); }, Status::launch_failed);
  BOOST_TEST(contains(e.what(), "(managed, allocated by managed_output, 64 bytes): first bad "
                                "byte at +64 (1 byte past the end)"),
             e.what());
  g.gpu->free(m);
}

BOOST_AUTO_TEST_CASE(free_arena_of_a_guarded_allocation_is_refused) {
  Guarded g;
  const DevicePtr p = g.gpu->alloc(64, "not_an_arena");
  const Error e = error_of([&] { g.gpu->free_arena(p); }, Status::invalid_argument);
  BOOST_TEST(contains(e.what(), "free_arena: " + hex(p.value) + " is no arena but an allocation "
                                "from alloc (allocated by not_an_arena, 64 bytes)"),
             e.what());
  g.gpu->free(p);  // still live
  const DevicePtr a = g.gpu->alloc_arena(64, "an_arena");  // arenas have no bands
  g.gpu->free_arena(a);
}

BOOST_AUTO_TEST_CASE(threads_allocate_synchronize_and_free_concurrently) {
  Guarded g;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        const Stream s = g.gpu->create_stream();
        for (std::uint32_t i = 0; i < 40; ++i) {
          const std::uint32_t n = 1 + (i * 13 + static_cast<std::uint32_t>(t)) % 97;
          const DevicePtr p = g.gpu->alloc(n * sizeof(float), "threads");
          g.fill(p, n, s);
          g.gpu->synchronize(s);
          if (i % 8 == 0) g.gpu->scan_redzones();
          g.gpu->free(p);
        }
        g.gpu->destroy_stream(s);
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const std::string& f : failures) BOOST_TEST(f.empty(), f);
  BOOST_TEST(g.gpu->scan_redzones() == 0u);
  const DevicePtr broken = g.gpu->alloc(8, "broken_after");
  g.poke(broken, 8);
  BOOST_TEST(g.gpu->scan_redzones() == 1u);
  error_of([&] { g.gpu->free(broken); }, Status::launch_failed);
  BOOST_TEST(g.gpu->ledger_stats().live_bytes == 0u);
}

BOOST_AUTO_TEST_CASE(a_failed_read_back_fails_the_synchronize_and_names_it) {
  // The faults layer below validate fails the layer's first read-back copy.
  Guarded g(Options{{"layers", "validate,faults"}, {"faults", "copy_d2h_async@1=device_error"}});
  const DevicePtr p = g.gpu->alloc(64, "read_back");
  const Error e = error_of([&] { g.gpu->synchronize(); }, Status::device_error);
  BOOST_TEST(contains(e.what(), "validate: reading the guard bands back failed (device_error"),
             e.what());
  g.gpu->synchronize();  // the next read-back works
  BOOST_TEST(g.gpu->scan_redzones() == 0u);
  g.gpu->free(p);
}

BOOST_AUTO_TEST_CASE(a_free_whose_bands_cannot_be_read_frees_and_leaves_no_stale_message) {
  Guarded g(Options{{"layers", "validate,faults"}, {"faults", "copy_d2h_async@1=device_error"}});
  test::LogRecords log;
  const DevicePtr p = g.gpu->alloc(64, "unread");
  g.gpu->free(p);  // not checked, freed
  BOOST_TEST(g.gpu->ledger_stats().live_bytes == 0u);
  bool warned = false;
  for (const auto& r : log.take())
    warned = warned || (r.level == LogLevel::warning &&
                        contains(r.message, "guard bands of " + hex(p.value) +
                                                " could not be read back before free"));
  BOOST_TEST(warned);
  // The next failure on this thread is reported with its own message.
  const Error e = error_of([&] { g.gpu->kernel("no_such_module", "f"); });
  BOOST_TEST(!contains(e.what(), "guard bands"), e.what());
}

// The memory-you-can-see cases with validate on: the user's sizes everywhere they look.
namespace {
cases::MakeBackend guarded_host() {
  auto registry = std::make_shared<PluginRegistry>();
  registry->discover();
  return [registry](const Options& options) {
    Options with = options;
    with.emplace("layers", "validate");
    return registry->create("host!", with);
  };
}
}  // namespace

BOOST_AUTO_TEST_CASE(snapshots_under_validate) { cases::check_snapshot(guarded_host()); }
BOOST_AUTO_TEST_CASE(out_of_memory_report_under_validate) {
  cases::check_out_of_memory_report(guarded_host());
}
BOOST_AUTO_TEST_CASE(out_of_memory_kinds_under_validate) {
  cases::check_out_of_memory_kinds(guarded_host());
}
BOOST_AUTO_TEST_CASE(scopes_under_validate) { cases::check_scopes(guarded_host()); }
BOOST_AUTO_TEST_CASE(history_under_validate) { cases::check_history(guarded_host()); }
BOOST_AUTO_TEST_CASE(hammer_under_validate) { cases::check_hammer(guarded_host()); }
BOOST_AUTO_TEST_CASE(out_of_memory_observer_under_validate) {
  cases::check_out_of_memory_observer(guarded_host());
}
BOOST_AUTO_TEST_CASE(managed_out_of_memory_under_validate) {
  cases::check_managed_out_of_memory(guarded_host());
}
BOOST_AUTO_TEST_CASE(model_cache_scratch_under_validate) {
  cases::check_model_cache_scratch(guarded_host());
}
