// SPDX-License-Identifier: Apache-2.0
// The one slot list (support/gpuplug/support/abi_slots.hpp) against what depends on it: the frozen
// tables of every released minor, the slot table of docs/plugin-authors.md, and the core's checks derived from it.
#define BOOST_TEST_MODULE abi_slot_list
#include <gpuplug/abi.h>

#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <fstream>
#include <gpuplug/support/abi_slots.hpp>
#include <sstream>
#include <string>

#include "table/plugin_table.hpp"
#include "frozen_layout.h"


namespace {

/// The slot table of docs/plugin-authors.md as the list gives it.
std::string slot_table_markdown() {
  std::string out = "| slot | since | side | group | rule | when absent |\n";
  out += "|---|---|---|---|---|---|\n";
  for (const gpuplug::abi::SlotInfo& s : gpuplug::abi::slots) {
    out += "| `" + std::string(s.name) + "` | 1." + std::to_string(s.minor) + " | " +
           std::string(gpuplug::abi::side_name(s.side)) + " | " + std::string(gpuplug::abi::group_name(s.group)) +
           " | " + std::string(gpuplug::abi::rule_name(s.rule)) + " | " +
           (s.when_absent.empty() ? std::string("(refused: abi_mismatch)")
                                  : std::string(s.when_absent)) +
           " |\n";
  }
  return out;
}

std::string read_text(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

// A released minor never changes: each frozen header's table (its slots as the list names them)
// is today's list up to that minor, slot for slot at the same offsets and sizes, and ends where
// the list says that minor ends.
BOOST_AUTO_TEST_CASE(every_frozen_table_is_the_prefix_the_list_calls_its_minor) {
  using Layout = const gpuplug_test_slot_layout* (*)(std::size_t*, std::size_t*);
  const Layout layouts[] = {gpuplug_test_v1_0_layout, gpuplug_test_v1_1_layout,
                            gpuplug_test_v1_2_layout, gpuplug_test_v1_3_layout};
  for (std::uint32_t minor = 0; minor < std::size(layouts); ++minor) {
    BOOST_TEST_CONTEXT("ABI 1." << minor) {
      std::size_t count = 0, table_size = 0;
      const gpuplug_test_slot_layout* frozen = layouts[minor](&count, &table_size);
      BOOST_TEST(table_size == gpuplug::abi::table_size_of_minor(minor));
      std::size_t listed = 0;
      for (const gpuplug::abi::SlotInfo& s : gpuplug::abi::slots) listed += s.minor <= minor;
      BOOST_TEST(count == listed);
      for (std::size_t i = 0; i < count && i < gpuplug::abi::slots.size(); ++i) {
        BOOST_TEST_CONTEXT("slot " << frozen[i].name) {
          BOOST_TEST(std::string(frozen[i].name) == std::string(gpuplug::abi::slots[i].name));
          BOOST_TEST(frozen[i].offset == gpuplug::abi::slots[i].offset);
          BOOST_TEST(frozen[i].size == sizeof(void*));
          BOOST_TEST(gpuplug::abi::slots[i].minor <= minor);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(the_frozen_1_0_table_ends_at_sweep_unreleased) {
  std::size_t count = 0, table_size = 0;
  (void)gpuplug_test_v1_0_layout(&count, &table_size);
  // The 1.0 table as it shipped ends at sweep_unreleased (the slots a plugin must have); every
  // later slot belongs to 1.1 on.
  BOOST_TEST(table_size == GPUPLUG_PLUGIN_V1_0_SIZE);
  BOOST_TEST(table_size == GPUPLUG_PLUGIN_V1_MIN_SIZE);
  const gpuplug::abi::SlotInfo* file = gpuplug::abi::find_slot("load_module_file");
  BOOST_TEST_REQUIRE(file != nullptr);
  BOOST_TEST(file->minor == 1u);
  BOOST_TEST(file->offset >= table_size);
}

BOOST_AUTO_TEST_CASE(per_minor_sizes_follow_the_list) {
  BOOST_TEST(gpuplug::abi::table_size_of_minor(1) == GPUPLUG_PLUGIN_V1_1_SIZE);
  BOOST_TEST(gpuplug::abi::table_size_of_minor(2) == GPUPLUG_PLUGIN_V1_2_SIZE);
  BOOST_TEST(gpuplug::abi::table_size_of_minor(99) == sizeof(gpuplug_plugin_v1));
}

#if GPUPLUG_ABI_VERSION_MINOR >= 3
BOOST_AUTO_TEST_CASE(the_pitched_copies_are_optional_slots_of_1_3_with_a_per_row_default) {
  for (const char* name : {"copy_h2d_2d_async", "copy_d2h_2d_async", "copy_d2d_2d_async"}) {
    BOOST_TEST_CONTEXT(name) {
      const gpuplug::abi::SlotInfo* s = gpuplug::abi::find_slot(name);
      BOOST_TEST_REQUIRE(s != nullptr);
      BOOST_TEST(s->minor == 3u);
      BOOST_TEST((s->group == gpuplug::abi::SlotGroup::pitched));
      BOOST_TEST((s->rule == gpuplug::abi::SlotRule::optional));
      BOOST_TEST(s->when_absent.find("per row") != std::string_view::npos, s->when_absent);
      BOOST_TEST(s->offset >= GPUPLUG_PLUGIN_V1_2_SIZE);
      BOOST_TEST(s->end() <= GPUPLUG_PLUGIN_V1_3_SIZE);
    }
  }
  BOOST_TEST(gpuplug::abi::table_size_of_minor(3) == GPUPLUG_PLUGIN_V1_3_SIZE);
  // A table without them (every optional slot null) resolves them to the core's per-row path.
  gpuplug_plugin_v1 t{};
  const gpuplug::detail::OptionalSlots slots = gpuplug::detail::resolve_optional_slots(t, GPUPLUG_ABI_VERSION);
  BOOST_TEST(slots.copy_h2d_2d_async == nullptr);
  BOOST_TEST(slots.copy_d2h_2d_async == nullptr);
  BOOST_TEST(slots.copy_d2d_2d_async == nullptr);
}
#endif

BOOST_AUTO_TEST_CASE(every_required_slot_is_checked_by_name) {
  // A table with every slot set, then each required slot of the list null in turn: refused,
  // naming that slot; an optional slot null: accepted.
  gpuplug_plugin_v1 full;
  std::memset(&full, 0x11, sizeof full);
  std::size_t required = 0;
  for (const gpuplug::abi::SlotInfo& s : gpuplug::abi::slots) {
    gpuplug_plugin_v1 t = full;
    std::memset(reinterpret_cast<unsigned char*>(&t) + s.offset, 0, sizeof(void*));
    const auto refusal = gpuplug::detail::check_required_slots(t);
    BOOST_TEST_CONTEXT("slot " << s.name) {
      if (s.rule == gpuplug::abi::SlotRule::required) {
        ++required;
        BOOST_TEST_REQUIRE(refusal.has_value());
        BOOST_TEST(refusal->message.find("'" + std::string(s.name) + "'") != std::string::npos);
      } else {
        BOOST_TEST(!refusal.has_value());
      }
    }
  }
  BOOST_TEST(required == 24u);
  BOOST_TEST(!gpuplug::detail::check_required_slots(full).has_value());
}

BOOST_AUTO_TEST_CASE(groups_that_resolve_together_are_named_in_the_list) {
  for (const char* name : {"event_create", "event_elapsed_ms", "ledger_scope_begin",
                           "ledger_scope_end", "host_alloc_pinned", "host_free_pinned"}) {
    BOOST_TEST_CONTEXT(name) {
      const gpuplug::abi::SlotInfo* s = gpuplug::abi::find_slot(name);
      BOOST_TEST_REQUIRE(s != nullptr);
      BOOST_TEST((s->rule == gpuplug::abi::SlotRule::together));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_plugin_authors_slot_table_is_the_list) {
  const std::string doc = read_text(GPUPLUG_PLUGIN_AUTHORS_MD);
  BOOST_TEST_REQUIRE(!doc.empty(), "cannot read " GPUPLUG_PLUGIN_AUTHORS_MD);
  const std::string begin = "<!-- slot-table:begin -->\n", end = "<!-- slot-table:end -->";
  const std::size_t b = doc.find(begin), e = doc.find(end);
  BOOST_TEST_REQUIRE((b != std::string::npos && e != std::string::npos && b < e),
                     "docs/plugin-authors.md has no slot-table markers");
  const std::string table = doc.substr(b + begin.size(), e - b - begin.size());
  const std::string expected = slot_table_markdown();
  BOOST_TEST(table == expected,
             "docs/plugin-authors.md's slot table disagrees with the slot list; the list gives:\n"
                 << expected);
}
