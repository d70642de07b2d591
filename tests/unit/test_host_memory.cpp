// SPDX-License-Identifier: Apache-2.0
// The host's MemAvailable (core/memory/host_memory.hpp), which an integrated GPU's free memory
// counts: read from /proc/meminfo text, refusing what does not parse.
#define BOOST_TEST_MODULE host_memory
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <optional>

#include "memory/host_memory.hpp"

using gpuplug::detail::host_memory_available;
using gpuplug::detail::mem_available_from;

BOOST_AUTO_TEST_CASE(mem_available_is_read_in_bytes) {
  const std::optional<std::uint64_t> v = mem_available_from(
      "MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:    2048 kB\n"
      "Buffers:          10 kB\n");
  BOOST_TEST_REQUIRE(v.has_value());
  BOOST_TEST(*v == 2048u * 1024u);
}

BOOST_AUTO_TEST_CASE(what_does_not_parse_is_not_a_figure) {
  BOOST_TEST(!mem_available_from("").has_value());
  BOOST_TEST(!mem_available_from("MemTotal: 100 kB\nMemFree: 50 kB\n").has_value());
  BOOST_TEST(!mem_available_from("MemAvailable: 12x kB\n").has_value());
  BOOST_TEST(!mem_available_from("MemAvailable: 12 MB\n").has_value());
  BOOST_TEST(!mem_available_from("MemAvailable: -5 kB\n").has_value());
  // Overflows of the number and of its bytes.
  BOOST_TEST(!mem_available_from("MemAvailable: 99999999999999999999999 kB\n").has_value());
  BOOST_TEST(!mem_available_from("MemAvailable: 18014398509481985 kB\n").has_value());
  // Only a line that starts with the key counts.
  BOOST_TEST(!mem_available_from("XMemAvailable: 10 kB\n").has_value());
}

BOOST_AUTO_TEST_CASE(this_machine_has_a_figure) {
  const std::optional<std::uint64_t> v = host_memory_available();
  BOOST_TEST_REQUIRE(v.has_value());
  BOOST_TEST(*v > 0u);
}
