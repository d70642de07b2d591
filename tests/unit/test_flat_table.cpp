// SPDX-License-Identifier: Apache-2.0
// FlatTable (the ledger's hash table) against a std::multimap model: random inserts, erases and
// lookups with good and with deliberately terrible hashes (every key in one run, runs that wrap
// past the end of the slot array), so backward-shift deletion is checked where it is hardest.
#define BOOST_TEST_MODULE flat_table
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "flat_table.hpp"

using gpuplug::sdk::detail::FlatTable;
using gpuplug::sdk::detail::mix;

namespace {

struct Slot {
  std::uint64_t key;  // 0 = empty
  std::uint64_t value;
};

// `Bits` of the key reach the hash: 0 puts every key on one home slot, 64 is the real mix.
template <unsigned Bits>
struct Traits {
  static bool empty(const Slot& s) noexcept { return s.key == 0; }
  static void clear(Slot& s) noexcept { s.key = 0; }
  static std::uint64_t hash_of(std::uint64_t key) noexcept {
    if constexpr (Bits == 0) {
      return ~std::uint64_t{0};  // the last slot: every run wraps around the end
    } else if constexpr (Bits == 64) {
      return mix(key);
    } else {
      return mix(key & ((std::uint64_t{1} << Bits) - 1));
    }
  }
  static std::uint64_t hash(const Slot& s) noexcept { return hash_of(s.key); }
};

template <unsigned Bits>
void check_against_model(std::uint64_t seed, int steps, std::uint64_t key_space) {
  using Table = FlatTable<Slot, Traits<Bits>>;
  Table table;
  std::multimap<std::uint64_t, std::uint64_t> model;
  std::mt19937_64 rng(seed);
  std::uint64_t next_value = 1;
  for (int step = 0; step < steps; ++step) {
    const std::uint64_t key = 1 + rng() % key_space;
    const auto same_key = [&](const Slot& s) { return s.key == key; };
    const auto hash = Traits<Bits>::hash_of(key);
    switch (rng() % 4) {
      case 0:
      case 1: {  // insert, duplicates allowed
        table.reserve_one();
        table.insert(Slot{key, next_value});
        model.emplace(key, next_value++);
        break;
      }
      case 2: {  // erase the slot with one particular value of this key, if any
        auto range = model.equal_range(key);
        if (range.first == range.second) {
          Slot out{};
          BOOST_REQUIRE(!table.erase(hash, same_key, out));
          break;
        }
        const std::uint64_t value =
            std::next(range.first, rng() % std::distance(range.first, range.second))->second;
        Slot out{};
        BOOST_REQUIRE(table.erase(
            hash, [&](const Slot& s) { return s.key == key && s.value == value; }, out));
        BOOST_REQUIRE(out.key == key && out.value == value);
        for (auto it = range.first; it != range.second; ++it)
          if (it->second == value) {
            model.erase(it);
            break;
          }
        break;
      }
      default: {  // every value of the key is found, and nothing else
        auto range = model.equal_range(key);
        for (auto it = range.first; it != range.second; ++it) {
          const std::uint64_t value = it->second;
          BOOST_REQUIRE(table.find(hash, [&](const Slot& s) {
            return s.key == key && s.value == value;
          }) != nullptr);
        }
        if (range.first == range.second) BOOST_REQUIRE(table.find(hash, same_key) == nullptr);
      }
    }
    BOOST_REQUIRE_EQUAL(table.size(), model.size());
  }
  // Everything left is visited exactly once (values are unique, so sets compare the contents).
  std::set<std::pair<std::uint64_t, std::uint64_t>> seen, expected(model.begin(), model.end());
  table.for_each([&](const Slot& s) { BOOST_REQUIRE(seen.emplace(s.key, s.value).second); });
  BOOST_TEST((seen == expected));
}

}  // namespace

BOOST_AUTO_TEST_CASE(matches_a_model_with_a_good_hash) { check_against_model<64>(1, 200000, 5000); }

BOOST_AUTO_TEST_CASE(matches_a_model_when_few_key_bits_reach_the_hash) {
  check_against_model<3>(2, 50000, 400);  // 8 distinct homes: long, interleaved runs
}

BOOST_AUTO_TEST_CASE(matches_a_model_when_every_run_wraps_around) {
  check_against_model<0>(3, 20000, 100);  // one home, the last slot
}

BOOST_AUTO_TEST_CASE(capacity_follows_the_peak_and_erase_on_empty_is_a_miss) {
  FlatTable<Slot, Traits<64>> table;
  Slot out{};
  BOOST_TEST(!table.erase(
      mix(7), [](const Slot&) { return true; }, out));
  BOOST_TEST(table.find(mix(7), [](const Slot&) { return true; }) == nullptr);
  table.reserve(1000);
  for (std::uint64_t k = 1; k <= 1000; ++k) table.insert(Slot{k, k});  // no growth needed
  BOOST_TEST(table.size() == 1000u);
  for (std::uint64_t k = 1; k <= 1000; ++k)
    BOOST_REQUIRE(table.erase(
        mix(k), [&](const Slot& s) { return s.key == k; }, out));
  BOOST_TEST(table.empty());
  table.clear();
  BOOST_TEST(table.find(mix(1), [](const Slot&) { return true; }) == nullptr);
}
