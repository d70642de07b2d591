// SPDX-License-Identifier: Apache-2.0
// AllocationLedger on its own: accounting, peak, device_memory_limit, unknown and double frees,
// zero-byte entries, reports, sweep, and a many-thread hammer that must end with exact counts.
#define BOOST_TEST_MODULE ledger
#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ledger.hpp"
#include "plugin_sdk.hpp"

using gpuplug::sdk::AllocationLedger;
using gpuplug::sdk::Failure;
using gpuplug::sdk::LedgerEntry;

namespace {

/// A fake vendor: hands out increasing addresses, remembers what is live, counts frees.
struct FakeVendor {
  std::mutex mutex;
  std::uint64_t next = 0x10000;
  std::set<std::uint64_t> live;
  std::uint64_t frees = 0;

  std::uint64_t alloc(std::uint64_t bytes) {
    std::lock_guard lock(mutex);
    const std::uint64_t p = next;
    next += ((bytes == 0 ? 1 : bytes) + 255) / 256 * 256;
    live.insert(p);
    return p;
  }
  void free(std::uint64_t p) {
    std::lock_guard lock(mutex);
    BOOST_REQUIRE(live.erase(p) == 1);
    ++frees;
  }
};

std::uint64_t alloc(AllocationLedger& l, FakeVendor& v, std::uint64_t bytes,
                    gpuplug_alloc_kind_t kind = GPUPLUG_ALLOC_DEVICE, const char* site = "test") {
  return l.allocate(
      bytes, kind, site, [&] { return v.alloc(bytes); }, [&](std::uint64_t p) { v.free(p); });
}

void free(AllocationLedger& l, FakeVendor& v, std::uint64_t p) {
  const LedgerEntry e = l.release(p);
  v.free(e.ptr);
}

/// Runs f, which must throw Failure; returns it.
template <class F>
Failure expect_failure(F&& f) {
  try {
    f();
  } catch (const Failure& e) {
    return e;
  }
  BOOST_FAIL("expected sdk::Failure");
  return Failure(0, "");
}

}  // namespace

BOOST_AUTO_TEST_CASE(accounting_and_peak) {
  AllocationLedger l("test:0");
  FakeVendor v;
  const auto a = alloc(l, v, 1000);
  const auto b = alloc(l, v, 24, GPUPLUG_ALLOC_MANAGED);
  auto c = l.counters();
  BOOST_TEST(c.live_bytes == 1024u);
  BOOST_TEST(c.live_count == 2u);
  BOOST_TEST(c.live_managed_bytes == 24u);
  BOOST_TEST(c.peak_bytes == 1024u);
  BOOST_TEST(c.total_allocs == 2u);
  BOOST_TEST(c.total_frees == 0u);
  BOOST_TEST(l.live_device_bytes() == 1000u);

  free(l, v, a);
  const auto d = alloc(l, v, 10);
  c = l.counters();
  BOOST_TEST(c.live_bytes == 34u);
  BOOST_TEST(c.peak_bytes == 1024u);  // the peak stays
  BOOST_TEST(c.total_allocs == 3u);
  BOOST_TEST(c.total_frees == 1u);
  free(l, v, b);
  free(l, v, d);
  c = l.counters();
  BOOST_TEST(c.live_bytes == 0u);
  BOOST_TEST(c.live_count == 0u);
  BOOST_TEST(c.live_managed_bytes == 0u);
  BOOST_TEST(v.live.empty());
}

BOOST_AUTO_TEST_CASE(find_locates_interior_pointers) {
  AllocationLedger l("test:0");
  FakeVendor v;
  const auto a = alloc(l, v, 100);
  const auto z = alloc(l, v, 0);
  BOOST_TEST(l.find(a).has_value());
  BOOST_TEST(l.find(a + 99)->ptr == a);
  BOOST_TEST(l.find(a + 99)->bytes == 100u);
  BOOST_TEST(!l.find(a + 100).has_value());
  BOOST_TEST(!l.find(a - 1).has_value());
  BOOST_TEST(l.find(z)->bytes == 0u);  // a zero-byte allocation contains its own pointer only
  BOOST_TEST(!l.find(z + 1).has_value());
  free(l, v, a);
  free(l, v, z);
}

// The interval index against a std::map model: allocations of every size class from 0 bytes
// to 4 MiB packed edge to edge (so neighbours touch), random frees and address reuse, and
// lookups at bases, interiors, last bytes, one-past-the-end and gaps. The first rounds run
// before any interior lookup (the lazy path), later ones with the ledger noting new pointers,
// long enough for the notes to be compacted.
BOOST_AUTO_TEST_CASE(find_matches_a_model_under_churn) {
  AllocationLedger l("test:0");
  std::map<std::uint64_t, std::uint64_t> model;  // base -> bytes
  std::vector<std::uint64_t> freed;              // addresses to hand out again
  std::mt19937_64 rng(42);
  std::uint64_t next = 0x7f0000000000;
  const auto expected = [&](std::uint64_t a) -> std::optional<std::uint64_t> {
    auto it = model.upper_bound(a);
    if (it == model.begin()) return std::nullopt;
    --it;
    if (a - it->first < std::max<std::uint64_t>(it->second, 1)) return it->first;
    return std::nullopt;
  };
  const auto check = [&](std::uint64_t a) {
    const auto want = expected(a);
    const auto got = l.find(a);
    BOOST_REQUIRE_EQUAL(got.has_value(), want.has_value());
    if (got) {
      BOOST_REQUIRE_EQUAL(got->ptr, *want);
      BOOST_REQUIRE_EQUAL(got->bytes, model.at(*want));
    }
  };
  for (int step = 0; step < 40000; ++step) {
    const bool interior_lookups = step >= 2000;
    const bool quiet = step >= 30000 && step < 34000;  // no lookups: the notes pile up
    const unsigned op = quiet ? rng() % 5 : rng() % 8;
    if (op < 3 || model.empty()) {
      // Sizes spread over every level: 0, 1, and 2^k +- a little up to 4 MiB.
      const unsigned shift = rng() % 23;
      std::uint64_t bytes = rng() % 3 == 0 ? (rng() % 2) : (std::uint64_t{1} << shift) + rng() % 7;
      std::uint64_t p = 0;
      if (!freed.empty() && rng() % 2 == 0) {  // reuse a freed base, as a vendor would
        p = freed.back();
        freed.pop_back();
        if (expected(p)) continue;  // now covered by a larger allocation
        auto after = model.upper_bound(p);
        if (after != model.end()) bytes = std::min(bytes, after->first - p);
      } else {
        p = next;
        next += std::max<std::uint64_t>(bytes, 1);  // edge to edge
      }
      auto r = l.reserve(bytes, GPUPLUG_ALLOC_DEVICE);
      l.commit(std::move(r), p, "churn");
      model.emplace(p, bytes);
    } else if (op < 5) {
      auto it = std::next(model.begin(), static_cast<long>(rng() % model.size()));
      l.release(it->first);
      freed.push_back(it->first);
      model.erase(it);
    } else {
      auto it = std::next(model.begin(), static_cast<long>(rng() % model.size()));
      const std::uint64_t base = it->first, extent = std::max<std::uint64_t>(it->second, 1);
      check(base);
      check(base + extent);  // one past the end: the neighbour, a gap or nothing
      check(base - 1);
      if (interior_lookups) {
        check(base + extent - 1);
        check(base + rng() % extent);
      }
    }
  }
  const auto c = l.counters();
  BOOST_TEST(c.live_count == model.size());
  for (const auto& [base, bytes] : model) l.release(base);
  BOOST_TEST(l.counters().live_bytes == 0u);
}

BOOST_AUTO_TEST_CASE(find_at_the_ends_of_the_address_space) {
  AllocationLedger l("test:0");
  const std::uint64_t top = ~std::uint64_t{0} - 0xfff;      // the last 4 KiB
  const std::uint64_t huge = (std::uint64_t{1} << 63) + 5;  // level 63, spans granules 0 and 1
  auto r1 = l.reserve(0x1000, GPUPLUG_ALLOC_DEVICE);
  l.commit(std::move(r1), top, "top");
  auto r2 = l.reserve(huge, GPUPLUG_ALLOC_MANAGED);
  l.commit(std::move(r2), 0x1000, "huge");
  BOOST_TEST(l.find(~std::uint64_t{0})->ptr == top);  // the very last byte
  BOOST_TEST(l.find(0x1000 + huge - 1)->ptr == 0x1000u);
  BOOST_TEST(l.find(0x1000 + (std::uint64_t{1} << 63))->bytes == huge);
  BOOST_TEST(!l.find(0x1000 + huge).has_value());
  BOOST_TEST(!l.find(0xfff).has_value());
  BOOST_TEST(!l.find(0).has_value());
  l.release(top);
  l.release(0x1000);
  BOOST_TEST(!l.find(~std::uint64_t{0}).has_value());
}

BOOST_AUTO_TEST_CASE(a_null_vendor_pointer_is_refused_and_gives_back_its_reservation) {
  AllocationLedger l("test:0", 4096);
  auto r = l.reserve(4096, GPUPLUG_ALLOC_DEVICE);
  const Failure f = expect_failure([&] { l.commit(std::move(r), 0, "null"); });
  BOOST_TEST(f.status() == GPUPLUG_STATUS_INTERNAL);
  BOOST_TEST(std::string(f.what()).find("null pointer") != std::string::npos);
  BOOST_TEST(l.counters().live_count == 0u);
  auto again = l.reserve(4096, GPUPLUG_ALLOC_DEVICE);  // the whole limit is free again
  l.commit(std::move(again), 0x4000, "after");
  l.release(0x4000);
}

BOOST_AUTO_TEST_CASE(device_memory_limit_applies_to_device_allocations_only) {
  AllocationLedger l("test:0", 1024);
  FakeVendor v;
  const auto a = alloc(l, v, 1000);
  const Failure f = expect_failure([&] { alloc(l, v, 100); });
  BOOST_TEST(f.status() == GPUPLUG_STATUS_OUT_OF_MEMORY);
  const std::string msg = f.what();
  BOOST_TEST_INFO(msg);
  BOOST_TEST(msg.find("device_memory_limit of 1024 bytes") != std::string::npos);
  BOOST_TEST(msg.find("1000 bytes live") != std::string::npos);
  BOOST_TEST(msg.find("100 bytes requested") != std::string::npos);
  BOOST_TEST(v.live.size() == 1u);  // the vendor was never asked

  // Managed memory is not limited.
  const auto m = alloc(l, v, 1 << 20, GPUPLUG_ALLOC_MANAGED);
  BOOST_TEST(l.counters().live_bytes == 1000u + (1u << 20));
  // Exactly up to the limit is fine.
  const auto b = alloc(l, v, 24);
  BOOST_TEST(l.live_device_bytes() == 1024u);
  BOOST_CHECK_THROW(alloc(l, v, 1), Failure);
  free(l, v, a);
  const auto c = alloc(l, v, 1000);  // freed bytes are available again
  free(l, v, b);
  free(l, v, c);
  free(l, v, m);
  // A request larger than the whole limit.
  BOOST_TEST(expect_failure([&] { alloc(l, v, 4096); }).status() == GPUPLUG_STATUS_OUT_OF_MEMORY);
}

BOOST_AUTO_TEST_CASE(failed_vendor_allocation_returns_its_reservation) {
  AllocationLedger l("test:0", 100);
  BOOST_CHECK_THROW(
      l.allocate(
          100, GPUPLUG_ALLOC_DEVICE, "x",
          []() -> std::uint64_t { throw Failure(GPUPLUG_STATUS_OUT_OF_MEMORY, "vendor says no"); },
          [](std::uint64_t) {}),
      Failure);
  FakeVendor v;
  const auto a = alloc(l, v, 100);  // the whole limit is available again
  BOOST_TEST(l.counters().total_allocs == 1u);
  free(l, v, a);
}

BOOST_AUTO_TEST_CASE(unknown_and_double_free_are_invalid_argument) {
  AllocationLedger l("host:3");
  FakeVendor v;
  const auto a = alloc(l, v, 64);
  const Failure unknown = expect_failure([&] { l.release(0xdead0); });
  BOOST_TEST(unknown.status() == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(std::string(unknown.what()) ==
             "free of 0xdead0: not allocated by host:3 (or already freed)");
  BOOST_TEST(expect_failure([&] { l.release(a + 8); }).status() ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);  // interior
  free(l, v, a);
  const Failure twice = expect_failure([&] { l.release(a); });
  BOOST_TEST(twice.status() == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(std::string(twice.what()).find("(or already freed)") != std::string::npos);
  const auto c = l.counters();
  BOOST_TEST(c.total_frees == 1u);  // failed frees change nothing
  BOOST_TEST(c.live_count == 0u);
}

BOOST_AUTO_TEST_CASE(a_reused_address_is_a_new_allocation) {
  // The vendor reuses an address once it was freed; the ledger removed the entry first, so the
  // new allocation is recorded afresh.
  AllocationLedger l("test:0");
  auto r1 = l.reserve(10, GPUPLUG_ALLOC_DEVICE);
  l.commit(std::move(r1), 0x5000, "first");
  BOOST_TEST(l.release(0x5000).site == "first");
  auto r2 = l.reserve(20, GPUPLUG_ALLOC_DEVICE);
  l.commit(std::move(r2), 0x5000, "second");
  BOOST_TEST(l.find(0x5000)->bytes == 20u);
  // Committing an address that is still live is the vendor's bug, reported as INTERNAL.
  auto r3 = l.reserve(5, GPUPLUG_ALLOC_DEVICE);
  BOOST_TEST(expect_failure([&] { l.commit(std::move(r3), 0x5000, "third"); }).status() ==
             GPUPLUG_STATUS_INTERNAL);
  BOOST_TEST(l.counters().live_count == 1u);
  l.release(0x5000);
}

BOOST_AUTO_TEST_CASE(zero_byte_allocations_are_distinct_and_count_zero_bytes) {
  AllocationLedger l("test:0", 0);  // even a zero limit admits zero-byte allocations
  FakeVendor v;
  const auto a = alloc(l, v, 0);
  const auto b = alloc(l, v, 0);
  BOOST_TEST(a != b);
  const auto c = l.counters();
  BOOST_TEST(c.live_count == 2u);
  BOOST_TEST(c.live_bytes == 0u);
  free(l, v, a);
  free(l, v, b);
  BOOST_CHECK_THROW(l.release(a), Failure);
}

BOOST_AUTO_TEST_CASE(report_groups_sites_largest_first) {
  AllocationLedger l("host:0", 1 << 30);
  FakeVendor v;
  alloc(l, v, 100, GPUPLUG_ALLOC_DEVICE, "small");
  alloc(l, v, 5000, GPUPLUG_ALLOC_DEVICE, "big");
  alloc(l, v, 3000, GPUPLUG_ALLOC_MANAGED, "medium");
  alloc(l, v, 3000, GPUPLUG_ALLOC_DEVICE, "medium");
  alloc(l, v, 50, GPUPLUG_ALLOC_DEVICE, nullptr);

  const auto sites = l.top_sites(0);
  BOOST_REQUIRE(sites.size() == 4u);
  BOOST_TEST(sites[0].site == "medium");
  BOOST_TEST(sites[0].bytes == 6000u);
  BOOST_TEST(sites[0].count == 2u);
  BOOST_TEST(sites[1].site == "big");
  BOOST_TEST(sites[2].site == "small");
  BOOST_TEST(sites[3].site == "");
  BOOST_TEST(l.top_sites(2).size() == 2u);

  const std::string report = l.report(3);
  BOOST_TEST_INFO(report);
  BOOST_TEST(report.find("host:0: 5 live allocations, 11150 bytes") == 0u);
  BOOST_TEST(report.find("3000 bytes (2.9 KiB) managed") != std::string::npos);
  const auto medium = report.find("6000 bytes in 2 allocations: medium");
  const auto big = report.find("5000 bytes in 1 allocation: big");
  const auto small = report.find("100 bytes in 1 allocation: small");
  BOOST_TEST(medium != std::string::npos);
  BOOST_TEST(big != std::string::npos);
  BOOST_TEST(small != std::string::npos);
  BOOST_TEST((medium < big && big < small));
  BOOST_TEST(report.find("<no site>") == std::string::npos);  // cut by top_n = 3
  BOOST_TEST(l.report(0).find("50 bytes in 1 allocation: <no site>") != std::string::npos);

  l.sweep([&](std::uint64_t p, gpuplug_alloc_kind_t) { v.free(p); });
  BOOST_TEST(l.report(5).find("host:0: no live allocations") == 0u);
}

// Site tags are copied (callers pass temporaries; one buffer rewritten in place is the worst
// case for a cache of the last site) and pruned once they pile up, never while an entry uses
// them: 5000 distinct tags pass the pruning threshold several times.
BOOST_AUTO_TEST_CASE(site_tags_are_copied_and_pruned_without_losing_live_ones) {
  AllocationLedger l("test:0");
  FakeVendor v;
  std::map<std::uint64_t, std::string> kept;
  char tag[32];
  for (int i = 0; i < 5000; ++i) {
    std::snprintf(tag, sizeof tag, "layer %d", i);  // same address, new text every time
    const std::uint64_t p = alloc(l, v, 64, GPUPLUG_ALLOC_DEVICE, tag);
    if (i % 1000 == 0)
      kept.emplace(p, tag);
    else
      free(l, v, p);
  }
  std::strcpy(tag, "overwritten");
  const auto sites = l.top_sites(0);
  BOOST_TEST(sites.size() == kept.size());
  for (const auto& u : sites) BOOST_TEST(u.site.rfind("layer ", 0) == 0);
  for (const auto& [p, name] : kept) {
    const LedgerEntry e = l.release(p);
    BOOST_TEST(e.site == name);
    v.free(p);
  }
}

BOOST_AUTO_TEST_CASE(sweep_frees_everything_and_warns_once) {
  std::vector<std::pair<gpuplug_log_level_t, std::string>> logged;
  AllocationLedger l("host:0", 4096, [&](gpuplug_log_level_t level, std::string_view m) {
    logged.emplace_back(level, m);
  });
  FakeVendor v;
  alloc(l, v, 1000, GPUPLUG_ALLOC_DEVICE, "weights");
  alloc(l, v, 1000, GPUPLUG_ALLOC_DEVICE, "weights");
  alloc(l, v, 500, GPUPLUG_ALLOC_MANAGED, "kv_cache");
  const auto kept = alloc(l, v, 7, GPUPLUG_ALLOC_DEVICE, "scratch");
  free(l, v, kept);

  std::vector<std::uint64_t> freed;
  const auto r = l.sweep([&](std::uint64_t p, gpuplug_alloc_kind_t) {
    freed.push_back(p);
    v.free(p);
  });
  BOOST_TEST(r.count == 3u);
  BOOST_TEST(r.bytes == 2500u);
  BOOST_TEST(r.managed_bytes == 500u);
  BOOST_TEST(r.failed == 0u);
  BOOST_REQUIRE(r.top_sites.size() == 2u);
  BOOST_TEST(r.top_sites[0].site == "weights");
  BOOST_TEST(freed.size() == 3u);
  BOOST_TEST(v.live.empty());
  const auto c = l.counters();
  BOOST_TEST(c.live_count == 0u);
  BOOST_TEST(c.live_bytes == 0u);
  BOOST_TEST(c.total_frees == 4u);
  BOOST_TEST(l.live_device_bytes() == 0u);
  BOOST_REQUIRE(logged.size() == 1u);
  BOOST_TEST(logged[0].first == GPUPLUG_LOG_WARNING);
  BOOST_TEST_INFO(logged[0].second);
  BOOST_TEST(logged[0].second.find("swept 3 unreleased allocations, 2500 bytes") !=
             std::string::npos);
  BOOST_TEST(logged[0].second.find("weights (2000 bytes in 2 allocations)") != std::string::npos);
  BOOST_TEST(logged[0].second.find("kv_cache (500 bytes in 1 allocation)") != std::string::npos);

  // The limit is free again; an empty sweep says nothing.
  alloc(l, v, 4096);
  l.sweep([&](std::uint64_t p, gpuplug_alloc_kind_t) { v.free(p); });
  logged.clear();
  BOOST_TEST(l.sweep([&](std::uint64_t, gpuplug_alloc_kind_t) {
                BOOST_FAIL("nothing to free");
              }).count == 0u);
  BOOST_TEST(logged.empty());
}

BOOST_AUTO_TEST_CASE(sweep_goes_on_past_a_failing_free) {
  std::vector<std::string> logged;
  AllocationLedger l("host:0", {},
                     [&](gpuplug_log_level_t, std::string_view m) { logged.emplace_back(m); });
  FakeVendor v;
  const auto a = alloc(l, v, 10);
  alloc(l, v, 20);
  const auto r = l.sweep([&](std::uint64_t p, gpuplug_alloc_kind_t) {
    if (p == a) throw Failure(GPUPLUG_STATUS_DEVICE_ERROR, "vendor free failed");
    v.free(p);
  });
  BOOST_TEST(r.count == 2u);
  BOOST_TEST(r.failed == 1u);
  BOOST_TEST(l.counters().live_count == 0u);
  BOOST_TEST(logged.size() == 2u);  // the error, then the warning
}

BOOST_AUTO_TEST_CASE(many_threads_end_with_exact_counts) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 5000;
  constexpr std::uint64_t kLimit = kThreads * 3 * 4096;  // room for every thread's live set
  AllocationLedger l("test:0", kLimit);
  std::atomic<std::uint64_t> over_limit{0}, double_frees_tried{0}, double_frees_refused{0};
  std::atomic<std::uint64_t> interior_misses{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread owns a disjoint address range, so pointers never collide.
      std::uint64_t next = 0x100000000ull * (t + 1);  // 4 GiB apart: 5000 * 8 KiB fits
      std::vector<std::uint64_t> mine;
      for (int i = 0; i < kRounds; ++i) {
        const std::uint64_t bytes = 1 + (i * 37 + t) % 4096;
        const auto kind = i % 5 == 0 ? GPUPLUG_ALLOC_MANAGED : GPUPLUG_ALLOC_DEVICE;
        auto r = l.reserve(bytes, kind);
        l.commit(std::move(r), next, t % 2 ? "odd" : "even");
        mine.push_back(next);
        next += 8192;
        if (l.live_device_bytes() > kLimit) ++over_limit;
        if (mine.size() == 3) {  // free oldest, and sometimes try a double free
          const std::uint64_t p = mine.front();
          mine.erase(mine.begin());
          l.release(p);
          if (i % 7 == 0) {  // Boost.Test assertions are not thread-safe: count instead
            try {
              l.release(p);
            } catch (const Failure& e) {
              if (e.status() == GPUPLUG_STATUS_INVALID_ARGUMENT) ++double_frees_refused;
            }
            ++double_frees_tried;
          }
        }
        // An interior pointer of the newest allocation, while other threads commit and free:
        // the lookup files pending entries under the same lock and must find it.
        const auto found = l.find(next - 8192 + bytes / 2);
        if (!found || found->ptr != next - 8192 || found->bytes != bytes) ++interior_misses;
      }
      for (std::uint64_t p : mine) l.release(p);
    });
  }
  for (auto& th : threads) th.join();
  const auto c = l.counters();
  BOOST_TEST(c.total_allocs == std::uint64_t{kThreads} * kRounds);
  BOOST_TEST(c.total_frees == std::uint64_t{kThreads} * kRounds);
  BOOST_TEST(c.live_count == 0u);
  BOOST_TEST(c.live_bytes == 0u);
  BOOST_TEST(c.live_managed_bytes == 0u);
  BOOST_TEST(l.live_device_bytes() == 0u);
  BOOST_TEST(c.peak_bytes > 0u);
  BOOST_TEST(c.peak_bytes <= std::uint64_t{kThreads} * 3 * 4096);
  BOOST_TEST(over_limit.load() == 0u);
  BOOST_TEST(interior_misses.load() == 0u);
  BOOST_TEST(double_frees_tried.load() > 0u);
  BOOST_TEST(double_frees_refused.load() == double_frees_tried.load());
}

BOOST_AUTO_TEST_CASE(concurrent_allocations_never_overshoot_the_limit) {
  // 8 threads race for a limit that admits only 10 allocations at a time; reservations under
  // the lock mean at most 10 succeed while none are freed.
  AllocationLedger l("test:0", 10 * 1000);
  std::atomic<int> ok{0}, refused{0};
  std::vector<std::thread> threads;
  std::mutex m;
  std::vector<std::uint64_t> got;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        try {
          auto r = l.reserve(1000, GPUPLUG_ALLOC_DEVICE);
          const std::uint64_t p = 0x100000ull * (t + 1) + i * 0x1000;
          l.commit(std::move(r), p, "race");
          ++ok;
          std::lock_guard lock(m);
          got.push_back(p);
        } catch (const Failure& e) {
          if (e.status() == GPUPLUG_STATUS_OUT_OF_MEMORY) ++refused;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  BOOST_TEST(ok.load() == 10);
  BOOST_TEST(refused.load() == 70);
  BOOST_TEST(l.live_device_bytes() == 10000u);
  for (std::uint64_t p : got) l.release(p);
}

BOOST_AUTO_TEST_CASE(byte_sizes_parse_with_binary_suffixes) {
  using gpuplug::sdk::parse_byte_size;
  BOOST_TEST(parse_byte_size("k", "0") == 0u);
  BOOST_TEST(parse_byte_size("k", "123") == 123u);
  BOOST_TEST(parse_byte_size("k", "64K") == 65536u);
  BOOST_TEST(parse_byte_size("k", "64k") == 65536u);
  BOOST_TEST(parse_byte_size("k", "64M") == 64u << 20);
  BOOST_TEST(parse_byte_size("k", "64MB") == 64u << 20);
  BOOST_TEST(parse_byte_size("k", "64MiB") == 64u << 20);
  BOOST_TEST(parse_byte_size("k", "2G") == 2ull << 30);
  BOOST_TEST(parse_byte_size("k", "1T") == 1ull << 40);
  BOOST_TEST(parse_byte_size("k", "10B") == 10u);
  for (const char* bad : {"", "M", "-1", "12X", "1.5G", " 1", "1 M", "64Mi", "64BiB",
                          "99999999999999999999", "20000000T"}) {
    BOOST_TEST_CONTEXT(bad) {
      const Failure f = expect_failure([&] { parse_byte_size("device_memory_limit", bad); });
      BOOST_TEST(f.status() == GPUPLUG_STATUS_INVALID_ARGUMENT);
      BOOST_TEST(std::string(f.what()).find("device_memory_limit") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(pinned_entries_count_apart_from_the_device_budget) {
  // Mapped host memory (ABI 1.3): in live_count and live_pinned_bytes, never in live_bytes, the
  // peak, a site's bytes or device_memory_limit; freed only through release_pinned.
  AllocationLedger l("test:0", std::uint64_t{1000});
  FakeVendor v;
  const auto d = alloc(l, v, 600);
  const auto p = alloc(l, v, 4096, gpuplug::sdk::alloc_kind_pinned, "mapped");  // past the limit
  auto c = l.counters();
  BOOST_TEST(c.live_count == 2u);
  BOOST_TEST(c.live_bytes == 600u);
  BOOST_TEST(c.peak_bytes == 600u);
  BOOST_TEST(c.live_pinned_bytes == 4096u);
  BOOST_TEST(l.live_device_bytes() == 600u);
  const auto found = l.find(p + 100);
  BOOST_TEST_REQUIRE(found.has_value());  // range checks see it
  BOOST_TEST(found->kind == gpuplug::sdk::alloc_kind_pinned);
  const auto snap = l.snapshot();
  const auto site = std::find_if(snap.sites.begin(), snap.sites.end(),
                                 [](const auto& s) { return s.site == "mapped"; });
  BOOST_TEST_REQUIRE((site != snap.sites.end()));
  BOOST_TEST(site->live_count == 1u);
  BOOST_TEST(site->live_bytes == 0u);
  BOOST_TEST(gpuplug::sdk::to_json(snap).find("\"pinned\"") != std::string::npos);
  // free of its device address is refused, naming it and the free to use; it stays live.
  const Failure f = expect_failure([&] { (void)l.release_kind(p); });
  BOOST_TEST(f.status() == GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(std::string(f.what()).find("free_host_pinned") != std::string::npos, f.what());
  BOOST_TEST(l.counters().live_pinned_bytes == 4096u);
  // release_pinned does not take device memory either.
  BOOST_TEST(expect_failure([&] { (void)l.release_pinned(d); }).status() ==
             GPUPLUG_STATUS_INVALID_ARGUMENT);
  BOOST_TEST(l.release_pinned(p) == 4096u);
  v.free(p);
  c = l.counters();
  BOOST_TEST(c.live_count == 1u);
  BOOST_TEST(c.live_pinned_bytes == 0u);
  BOOST_TEST(c.total_frees == 1u);
  // The sweep reports pinned bytes apart.
  (void)alloc(l, v, 64, gpuplug::sdk::alloc_kind_pinned, "mapped");
  const auto swept = l.sweep([&](std::uint64_t ptr, gpuplug_alloc_kind_t) { v.free(ptr); });
  BOOST_TEST(swept.count == 2u);
  BOOST_TEST(swept.bytes == 600u);
  BOOST_TEST(swept.pinned_bytes == 64u);
  BOOST_TEST(l.counters().live_pinned_bytes == 0u);
  BOOST_TEST(v.live.empty());
}

BOOST_AUTO_TEST_CASE(arenas_count_apart_from_live_bytes_and_are_named_when_swept) {
  // Arenas (ABI 1.3): in live_count and arena_bytes, never in live_bytes, the peak or a site's
  // bytes, but against device_memory_limit; freed only through release_arena; a sweep names each.
  std::vector<std::string> logged;
  AllocationLedger l("test:0", std::uint64_t{1000},
                     [&](gpuplug_log_level_t, std::string_view m) { logged.emplace_back(m); });
  FakeVendor v;
  const auto a = alloc(l, v, 700, gpuplug::sdk::alloc_kind_arena, "weights");
  auto c = l.counters();
  BOOST_TEST(c.live_count == 1u);
  BOOST_TEST(c.live_bytes == 0u);
  BOOST_TEST(c.peak_bytes == 0u);
  BOOST_TEST(c.arena_bytes == 700u);
  BOOST_TEST(l.live_device_bytes() == 700u);
  // The limit counts it: 400 more device bytes do not fit, 300 do.
  BOOST_TEST(expect_failure([&] { (void)alloc(l, v, 400); }).status() ==
             GPUPLUG_STATUS_OUT_OF_MEMORY);
  const auto d = alloc(l, v, 300);
  BOOST_TEST(l.report(5).find("in arenas") != std::string::npos, l.report(5));
  // Each free refuses the other's memory, naming the one to use; nothing changes.
  const Failure by_free = expect_failure([&] { (void)l.release_kind(a); });
  BOOST_TEST(std::string(by_free.what()).find("free_arena") != std::string::npos, by_free.what());
  const Failure by_arena = expect_failure([&] { l.release_arena(d); });
  BOOST_TEST(std::string(by_arena.what()).find("not alloc_arena") != std::string::npos,
             by_arena.what());
  BOOST_TEST(l.counters().arena_bytes == 700u);
  l.release_arena(a);
  v.free(a);
  BOOST_TEST(l.counters().arena_bytes == 0u);
  BOOST_TEST(l.live_device_bytes() == 300u);
  // A leaked arena is named by its site in the sweep's warning.
  (void)alloc(l, v, 200, gpuplug::sdk::alloc_kind_arena, "embeddings");
  const auto swept = l.sweep([&](std::uint64_t ptr, gpuplug_alloc_kind_t) { v.free(ptr); });
  BOOST_TEST(swept.count == 2u);
  BOOST_TEST(swept.bytes == 300u);
  BOOST_TEST(swept.arena_bytes == 200u);
  BOOST_TEST_REQUIRE(swept.arenas.size() == 1u);
  BOOST_TEST(swept.arenas[0].site == "embeddings");
  BOOST_TEST_REQUIRE(logged.size() == 1u);
  BOOST_TEST(logged[0].find("arenas never freed with free_arena: embeddings") != std::string::npos,
             logged[0]);
  BOOST_TEST(l.counters().arena_bytes == 0u);
  BOOST_TEST(v.live.empty());
}
