// SPDX-License-Identifier: Apache-2.0
// The Vulkan plugin's in-flight rule (plugins/vulkan/in_flight.hpp): a copy or memset that runs
// on the host waits for the work in flight it is ordered with (its own stream; the default
// stream and blocking streams among themselves) and not for a non-blocking stream's. No Vulkan
// driver needed.

#define BOOST_TEST_MODULE test_vulkan_in_flight
#include <boost/test/unit_test.hpp>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "in_flight.hpp"

namespace {

namespace vk = gpuplug::vulkan;
using namespace std::chrono_literals;

constexpr std::uint64_t kDefault = 0, kA = 7, kB = 9;

// Whether wait_ordered(stream, blocking) returned within `patience` while work of `running` was
// in flight; the work ends afterwards, so a waiter that waits returns then.
bool returns_while_busy(std::uint64_t running, bool running_blocking, std::uint64_t stream,
                        bool blocking, std::chrono::milliseconds patience) {
  vk::InFlight f;
  std::atomic<bool> returned{false};
  std::optional<vk::InFlight::Scope> busy;
  busy.emplace(f, running, running_blocking);
  std::thread waiter([&] {
    f.wait_ordered(stream, blocking);
    returned = true;
  });
  const auto end = std::chrono::steady_clock::now() + patience;
  while (!returned && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(1ms);
  const bool result = returned;
  BOOST_TEST(f.busy_unordered(stream, blocking) == result);
  busy.reset();
  waiter.join();
  BOOST_TEST(returned);
  return result;
}

// Ordered work holds the waiter for all of 50 ms; unordered work lets it go at once (10 s is
// only the bound for a slow machine).
bool waits_for(std::uint64_t running, bool running_blocking, std::uint64_t stream, bool blocking) {
  return !returns_while_busy(running, running_blocking, stream, blocking, 50ms);
}
bool goes_past(std::uint64_t running, bool running_blocking, std::uint64_t stream, bool blocking) {
  return returns_while_busy(running, running_blocking, stream, blocking, 10s);
}

BOOST_AUTO_TEST_CASE(nothing_in_flight_waits_for_nothing) {
  vk::InFlight f;
  f.wait_ordered(kDefault, true);
  f.wait_ordered(kA, false);
  BOOST_TEST(!f.busy_unordered(kDefault, true));
}

BOOST_AUTO_TEST_CASE(a_stream_waits_for_its_own_work) {
  BOOST_TEST(waits_for(kA, false, kA, false));
  BOOST_TEST(waits_for(kA, true, kA, true));
  BOOST_TEST(waits_for(kDefault, true, kDefault, true));
}

BOOST_AUTO_TEST_CASE(the_default_stream_and_blocking_streams_wait_for_each_other) {
  BOOST_TEST(waits_for(kA, true, kDefault, true));
  BOOST_TEST(waits_for(kDefault, true, kA, true));
  BOOST_TEST(waits_for(kA, true, kB, true));
}

BOOST_AUTO_TEST_CASE(a_non_blocking_stream_is_waited_for_only_by_itself) {
  BOOST_TEST(goes_past(kA, false, kDefault, true));
  BOOST_TEST(goes_past(kA, false, kB, true));
  BOOST_TEST(goes_past(kDefault, true, kA, false));
  BOOST_TEST(goes_past(kA, false, kB, false));
}

}  // namespace
