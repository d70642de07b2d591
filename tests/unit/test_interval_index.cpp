// SPDX-License-Identifier: Apache-2.0
// IntervalIndex (the ledger's interior-pointer lookup) on its own: levels and granules at their
// edges, random disjoint intervals against a std::map model, and the lazy filing an owner drives
// (first scan, notes, compaction, entries that die before they are filed).
#define BOOST_TEST_MODULE interval_index
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "interval_index.hpp"

using gpuplug::sdk::detail::Interval;
using gpuplug::sdk::detail::IntervalIndex;

namespace {

// The model: interval start -> bytes; a zero-byte interval contains its own start only.
std::optional<std::uint64_t> model_find(const std::map<std::uint64_t, std::uint64_t>& model,
                                        std::uint64_t address) {
  auto it = model.upper_bound(address);
  if (it == model.begin()) return std::nullopt;
  --it;
  const std::uint64_t extent = it->second == 0 ? 1 : it->second;
  if (address - it->first < extent) return it->first;
  return std::nullopt;
}

void insert(IntervalIndex& index, std::uint64_t ptr, std::uint64_t bytes) {
  index.reserve(index.size() + 1);
  index.insert(Interval{ptr, bytes, GPUPLUG_ALLOC_DEVICE});
}

// An owner of entries, the way the ledger is one: each entry knows whether it is filed.
struct Entry {
  std::uint64_t ptr;
  std::uint64_t bytes;
  gpuplug_alloc_kind_t kind;
  std::uint32_t filed;
};
struct Owner {
  std::map<std::uint64_t, Entry> live;
  IntervalIndex index;

  Entry* lookup(std::uint64_t ptr) {
    auto it = live.find(ptr);
    return it == live.end() ? nullptr : &it->second;
  }
  void add(std::uint64_t ptr, std::uint64_t bytes) {
    index.reserve_note([this](std::uint64_t p) { return lookup(p); });
    live[ptr] = Entry{ptr, bytes, GPUPLUG_ALLOC_MANAGED, 0};
    index.note(ptr);
  }
  void remove(std::uint64_t ptr) {
    const Entry e = live.at(ptr);
    if (e.filed != 0) index.erase(e.ptr, e.bytes);
    live.erase(ptr);
  }
  std::optional<Interval> find(std::uint64_t address) {
    if (index.size() != live.size()) {
      index.file_pending(
          live.size(),
          [this](auto&& file) {
            for (auto& [_, e] : live) file(e);
          },
          [this](std::uint64_t p) { return lookup(p); });
    }
    return index.find(address);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(levels_and_granules_at_their_edges) {
  IntervalIndex index;
  BOOST_TEST(!index.find(0x1000).has_value());
  insert(index, 0x1000, 0);       // zero bytes: contains its own pointer only
  insert(index, 0x2000, 1);       // level 0
  insert(index, 0x3001, 0x1000);  // exactly 2^12, not granule-aligned: spans two granules
  insert(index, 0x5000, 0x1001);  // just above 2^12: level 13
  insert(index, 1, 7);            // starts in granule 0 of its level
  BOOST_TEST(index.size() == 5u);
  BOOST_TEST(index.find(0x1000)->ptr == 0x1000u);
  BOOST_TEST(!index.find(0x1001).has_value());
  BOOST_TEST(index.find(0x2000)->ptr == 0x2000u);
  BOOST_TEST(!index.find(0x2001).has_value());
  BOOST_TEST(!index.find(0x3000).has_value());
  BOOST_TEST(index.find(0x3001)->ptr == 0x3001u);
  BOOST_TEST(index.find(0x4000)->ptr == 0x3001u);
  BOOST_TEST(!index.find(0x4001).has_value());
  BOOST_TEST(index.find(0x6000)->ptr == 0x5000u);
  BOOST_TEST(!index.find(0x6001).has_value());
  BOOST_TEST(index.find(7)->ptr == 1u);
  BOOST_TEST(!index.find(0).has_value());
  const std::optional<Interval> hit = index.find(0x5800);
  BOOST_TEST(hit->bytes == 0x1001u);
  BOOST_TEST(hit->kind == GPUPLUG_ALLOC_DEVICE);

  index.erase(0x3001, 0x1000);
  BOOST_TEST(!index.find(0x3001).has_value());
  index.erase(0x3001, 0x1000);  // not filed any more: nothing happens
  BOOST_TEST(index.size() == 4u);
  // The top level takes extents above 2^63 as well.
  insert(index, 0x8000'0000'0000'0000ull, 0x7fff'ffff'ffff'0000ull);
  BOOST_TEST(index.find(0xffff'ffff'fffe'0000ull)->ptr == 0x8000'0000'0000'0000ull);
  index.clear();
  BOOST_TEST(index.size() == 0u);
  BOOST_TEST(!index.find(0x1000).has_value());
}

BOOST_AUTO_TEST_CASE(random_disjoint_intervals_match_the_model) {
  std::mt19937_64 rng(14);
  IntervalIndex index;
  std::map<std::uint64_t, std::uint64_t> model;
  for (int step = 0; step < 20000; ++step) {
    // Sizes over many levels; starts on a coarse grid so that overlaps are easy to refuse.
    const std::uint64_t bytes = rng() % 4 == 0 ? 0 : (std::uint64_t{1} << (rng() % 20)) + rng() % 7;
    const std::uint64_t ptr = (1 + rng() % 4096) << 20 | (rng() % 64) << 8;
    if (rng() % 3 != 0) {
      const std::uint64_t end = ptr + (bytes == 0 ? 1 : bytes);
      auto next = model.lower_bound(ptr);
      const bool clear_after = next == model.end() || next->first >= end;
      const bool clear_before = next == model.begin() || [&] {
        auto prev = std::prev(next);
        return prev->first + (prev->second == 0 ? 1 : prev->second) <= ptr;
      }();
      if (clear_after && clear_before) {
        insert(index, ptr, bytes);
        model.emplace(ptr, bytes);
      }
    } else if (!model.empty()) {
      auto victim = model.lower_bound(ptr);
      if (victim == model.end()) victim = model.begin();
      index.erase(victim->first, victim->second);
      model.erase(victim);
    }
    for (int probe = 0; probe < 4; ++probe) {
      std::uint64_t address = (1 + rng() % 4096) << 20 | rng() % (1 << 20);
      if (!model.empty() && probe == 0) {  // often right at or near an interval's edges
        auto it = std::next(model.begin(), static_cast<long>(rng() % model.size()));
        address = it->first + (it->second == 0 ? 0 : it->second - 1) + rng() % 3 - 1;
      }
      const std::optional<std::uint64_t> want = model_find(model, address);
      const std::optional<Interval> got = index.find(address);
      BOOST_TEST_REQUIRE(got.has_value() == want.has_value(), "address " << address);
      if (want) BOOST_TEST_REQUIRE(got->ptr == *want);
    }
  }
  BOOST_TEST(index.size() == model.size());
}

BOOST_AUTO_TEST_CASE(lazy_filing_files_only_what_is_alive_when_asked) {
  Owner owner;
  owner.add(0x10000, 64);
  owner.add(0x20000, 64);
  BOOST_TEST(!owner.index.noting());  // nothing looked up yet: no notes are kept
  owner.remove(0x20000);              // died unfiled: never reaches the index
  BOOST_TEST(owner.index.size() == 0u);
  BOOST_TEST(owner.find(0x10010)->ptr == 0x10000u);  // the first filing scans every entry
  BOOST_TEST(owner.index.noting());
  BOOST_TEST(owner.index.size() == 1u);
  BOOST_TEST(!owner.find(0x20010).has_value());

  // From now on new entries are noted, and filed by the next lookup that needs them.
  owner.add(0x30000, 4096);
  owner.add(0x40000, 16);
  owner.remove(0x40000);
  BOOST_TEST(owner.index.size() == 1u);
  BOOST_TEST(owner.find(0x30fff)->ptr == 0x30000u);
  BOOST_TEST(owner.index.size() == 2u);
  BOOST_TEST(owner.live.at(0x30000).filed == 1u);
  owner.remove(0x30000);
  BOOST_TEST(!owner.find(0x30fff).has_value());

  // Entries that come and go between lookups: the notes are compacted and stay bounded, and
  // the survivors are all filed by the next lookup.
  for (std::uint64_t i = 0; i < 10000; ++i) {
    const std::uint64_t p = 0x100000 + i * 0x100;
    owner.add(p, 0x80);
    if (i % 100 != 0) owner.remove(p);
  }
  BOOST_TEST(owner.live.size() == 101u);
  BOOST_TEST(owner.find(0x100000 + 500 * 0x100 + 0x7f)->ptr == 0x100000u + 500 * 0x100);
  BOOST_TEST(owner.index.size() == owner.live.size());
  BOOST_TEST(!owner.find(0x100000 + 501 * 0x100).has_value());
  for (const auto& [ptr, e] : owner.live) BOOST_TEST(e.filed == 1u);

  owner.index.clear();  // as the ledger's sweep does: everything forgotten, noting again later
  for (auto& [ptr, e] : owner.live) e.filed = 0;
  BOOST_TEST(!owner.index.noting());
  BOOST_TEST(owner.find(0x10000)->ptr == 0x10000u);
  BOOST_TEST(owner.index.size() == owner.live.size());
}
