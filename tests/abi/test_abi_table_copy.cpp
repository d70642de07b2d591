// SPDX-License-Identifier: Apache-2.0
// The core's side of ABI-3 (docs/architecture.md): how much of a published table it reads.
#define BOOST_TEST_MODULE abi_table_copy
#include <gpuplug/abi.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstring>

#include "table/plugin_table.hpp"

using gpuplug::detail::copy_table;
using gpuplug::detail::known_table_size;

namespace {

/// A table whose every byte is 0xAB (so that what the copy takes is visible), then the header.
struct Filled {
  gpuplug_plugin_v1 table;
  unsigned char beyond[64];
  Filled(std::uint32_t version, std::uint32_t size) {
    std::memset(static_cast<void*>(this), 0xAB, sizeof *this);
    table.abi_version = version;
    table.struct_size = size;
  }
};

bool all_zero_from(const gpuplug_plugin_v1& t, std::size_t from) {
  const auto* p = reinterpret_cast<const unsigned char*>(&t);
  for (std::size_t i = from; i < sizeof t; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

bool all_copied_until(const gpuplug_plugin_v1& t, std::size_t until) {
  const auto* p = reinterpret_cast<const unsigned char*>(&t);
  for (std::size_t i = offsetof(gpuplug_plugin_v1, name); i < until; ++i) {
    if (p[i] != 0xAB) return false;
  }
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_table_of_this_minor_is_read_to_its_struct_size) {
  for (std::size_t size = GPUPLUG_PLUGIN_V1_MIN_SIZE; size <= sizeof(gpuplug_plugin_v1);
       size += sizeof(void*)) {
    const Filled f(GPUPLUG_ABI_VERSION, static_cast<std::uint32_t>(size));
    BOOST_TEST(known_table_size(f.table) == size);
    const gpuplug_plugin_v1 t = copy_table(f.table);
    BOOST_TEST(all_copied_until(t, size));
    BOOST_TEST(all_zero_from(t, size));
  }
}

BOOST_AUTO_TEST_CASE(a_1_1_table_is_read_no_further_than_the_1_1_slots) {
  // ABI-3: whatever its struct_size claims, no memory slot of 1.2 is read from a 1.1 table.
  for (std::size_t size = GPUPLUG_PLUGIN_V1_MIN_SIZE; size <= sizeof(gpuplug_plugin_v1);
       size += sizeof(void*)) {
    const Filled f(GPUPLUG_MAKE_VERSION(1, 1), static_cast<std::uint32_t>(size));
    const std::size_t read = std::min<std::size_t>(size, GPUPLUG_PLUGIN_V1_1_SIZE);
    BOOST_TEST(known_table_size(f.table) == read);
    const gpuplug_plugin_v1 t = copy_table(f.table);
    BOOST_TEST(all_copied_until(t, read));
    BOOST_TEST(all_zero_from(t, read));
  }
}

BOOST_AUTO_TEST_CASE(a_1_2_table_is_read_no_further_than_the_1_2_slots) {
  // ABI-3: whatever its struct_size claims, no slot of 1.3 is read from a 1.2 table.
  for (std::size_t size = GPUPLUG_PLUGIN_V1_MIN_SIZE; size <= sizeof(gpuplug_plugin_v1);
       size += sizeof(void*)) {
    const Filled f(GPUPLUG_MAKE_VERSION(1, 2), static_cast<std::uint32_t>(size));
    const std::size_t read = std::min<std::size_t>(size, GPUPLUG_PLUGIN_V1_2_SIZE);
    BOOST_TEST(known_table_size(f.table) == read);
    const gpuplug_plugin_v1 t = copy_table(f.table);
    BOOST_TEST(all_copied_until(t, read));
    BOOST_TEST(all_zero_from(t, read));
  }
}

BOOST_AUTO_TEST_CASE(a_later_minor_is_read_to_the_known_prefix) {
  const Filled f(GPUPLUG_MAKE_VERSION(1, GPUPLUG_ABI_VERSION_MINOR + 1), sizeof(Filled));
  BOOST_TEST(known_table_size(f.table) == sizeof(gpuplug_plugin_v1));
  BOOST_TEST(all_copied_until(copy_table(f.table), sizeof(gpuplug_plugin_v1)));
}

BOOST_AUTO_TEST_CASE(a_1_0_table_is_never_read_past_the_1_0_slots) {
  // Whatever its struct_size says (a wrong size), a table that declares 1.0 is the table that
  // shipped at 1.0: it ends at sweep_unreleased, so load_module_file, the events and
  // inspect_module read as null and get their defaults.
  for (const std::uint32_t size :
       {std::uint32_t{GPUPLUG_PLUGIN_V1_0_SIZE}, std::uint32_t{GPUPLUG_PLUGIN_V1_0_SIZE + 8},
        std::uint32_t{GPUPLUG_PLUGIN_V1_1_SIZE}, std::uint32_t{sizeof(Filled)}}) {
    const Filled f(GPUPLUG_MAKE_VERSION(1, 0), size);
    BOOST_TEST(known_table_size(f.table) == GPUPLUG_PLUGIN_V1_0_SIZE);
    const gpuplug_plugin_v1 t = copy_table(f.table);
    BOOST_TEST(t.sweep_unreleased != nullptr);
    BOOST_TEST(t.load_module_file == nullptr);
    BOOST_TEST(t.event_create == nullptr);
    BOOST_TEST(t.inspect_module == nullptr);
    BOOST_TEST(all_zero_from(t, GPUPLUG_PLUGIN_V1_0_SIZE));
  }
}
