// SPDX-License-Identifier: Apache-2.0
// The Vulkan plugin's stream rules without a driver: which streams' work is ordered without an
// event (timeline.hpp), and the staging ring (staging.hpp), whose regions are reused only once
// their work has completed and, for a d2h copy, its bytes were read out.

#define BOOST_TEST_MODULE test_vulkan_timeline
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <set>

#include "staging.hpp"
#include "timeline.hpp"

namespace {

namespace vk = gpuplug::vulkan;

constexpr std::uint64_t kDefault = 0, kA = 7, kB = 9;

BOOST_AUTO_TEST_CASE(a_stream_is_ordered_with_itself) {
  BOOST_TEST(vk::ordered(kA, false, kA, false));
  BOOST_TEST(vk::ordered(kA, true, kA, true));
  BOOST_TEST(vk::ordered(kDefault, true, kDefault, true));
}

BOOST_AUTO_TEST_CASE(the_default_stream_and_a_blocking_stream_are_ordered_both_ways) {
  BOOST_TEST(vk::ordered(kDefault, true, kA, true));
  BOOST_TEST(vk::ordered(kA, true, kDefault, true));
}

BOOST_AUTO_TEST_CASE(two_other_streams_are_ordered_only_through_the_default_stream) {
  BOOST_TEST(!vk::ordered(kA, true, kB, true));
  BOOST_TEST(!vk::ordered(kA, false, kB, false));
}

BOOST_AUTO_TEST_CASE(a_non_blocking_stream_is_ordered_with_nothing_but_itself) {
  BOOST_TEST(!vk::ordered(kA, false, kDefault, true));
  BOOST_TEST(!vk::ordered(kDefault, true, kA, false));
  BOOST_TEST(!vk::ordered(kA, false, kB, true));
}

// A fence is a number; the ones in `done` have passed.
struct Fences {
  std::set<int> done;
  bool operator()(int f) const { return done.contains(f); }
};

BOOST_AUTO_TEST_CASE(regions_are_aligned_and_never_overlap_work_in_flight) {
  vk::StagingRing<int> ring(1024);
  Fences f;
  const auto a = ring.take(100, 1, false, f);
  const auto b = ring.take(10, 2, false, f);
  BOOST_TEST_REQUIRE(a.has_value());
  BOOST_TEST_REQUIRE(b.has_value());
  BOOST_TEST(*a == 0u);
  BOOST_TEST(*b == 112u);  // 100 rounded up to 16
  BOOST_TEST(!ring.take(1024, 3, false, f).has_value());  // in use: no room for the whole ring
  f.done = {1, 2};
  const auto c = ring.take(1024, 3, false, f);
  BOOST_TEST_REQUIRE(c.has_value());
  BOOST_TEST(*c == 0u);
  BOOST_TEST(ring.regions() == 1u);
  BOOST_TEST(!ring.take(1025, 4, false, f).has_value());  // larger than the ring, ever
}

BOOST_AUTO_TEST_CASE(the_ring_wraps_only_into_space_whose_work_has_completed) {
  vk::StagingRing<int> ring(1024);
  Fences f;
  BOOST_TEST(*ring.take(512, 1, false, f) == 0u);
  BOOST_TEST(*ring.take(256, 2, false, f) == 512u);
  BOOST_TEST(!ring.take(512, 3, false, f).has_value());  // 256 left at the end, 0 at the front
  f.done = {1};
  BOOST_TEST(*ring.take(512, 3, false, f) == 0u);  // wraps into region 1's space
  // Now [0, 512) and [512, 768) are in use, the newest before the oldest: the 256 bytes at the
  // end are not free to a wrapped ring, whose next region must end before the oldest begins.
  BOOST_TEST(!ring.take(16, 4, false, f).has_value());
  f.done = {1, 2};
  BOOST_TEST(*ring.take(16, 4, false, f) == 512u);
  BOOST_TEST(*ring.oldest_fence() == 3);
}

BOOST_AUTO_TEST_CASE(a_held_region_outlives_its_fence_until_released) {
  vk::StagingRing<int> ring(256);
  Fences f;
  BOOST_TEST(*ring.take(256, 1, true, f) == 0u);
  f.done = {1};
  bool held = false;
  BOOST_TEST(!ring.take(16, 2, false, f).has_value());  // the d2h copy has not read it yet
  BOOST_TEST(*ring.oldest_fence(&held) == 1);
  BOOST_TEST(held);
  ring.release(0);
  BOOST_TEST(*ring.take(16, 2, false, f) == 0u);
}

}  // namespace
