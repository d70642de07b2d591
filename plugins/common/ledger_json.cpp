// SPDX-License-Identifier: Apache-2.0
// The ledger part of a memory snapshot as JSON (schema 1): what the ledger_snapshot slot returns.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "gpuplug/support/json.hpp"
#include "ledger.hpp"

namespace gpuplug::sdk {
namespace {

namespace json = support::json;

// Addresses are strings: JSON readers in other languages lose integers above 2^53.
std::string address(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

const char* kind_name(gpuplug_alloc_kind_t kind) {
  if (kind == GPUPLUG_ALLOC_MANAGED) return "managed";
  if (kind == alloc_external) return "external";
  if (kind == alloc_kind_pinned) return "pinned";
  if (kind == alloc_kind_arena) return "arena";
  return "device";
}

}  // namespace

std::string to_json(const LedgerSnapshot& s) {
  const LedgerCounters& c = s.counters;
  json::value doc = {{"schema", 1}, {"owner", s.owner}, {"complete", true}};
  doc["device_memory_limit"] =
      s.device_memory_limit ? json::value(*s.device_memory_limit) : json::value(nullptr);
  doc["totals"] = {{"live_bytes", c.live_bytes},         {"live_count", c.live_count},
                   {"peak_bytes", c.peak_bytes},         {"live_managed_bytes", c.live_managed_bytes},
                   {"total_allocs", c.total_allocs},     {"total_frees", c.total_frees},
                   {"live_pinned_bytes", c.live_pinned_bytes}, {"arena_bytes", c.arena_bytes}};
  json::value& sites = doc["sites"] = json::value::array();
  for (const SiteTotals& t : s.sites) {
    sites.push_back({{"site", t.site},
                     {"live_bytes", t.live_bytes},
                     {"live_count", t.live_count},
                     {"peak_bytes", t.peak_bytes}});
  }
  json::value& allocations = doc["allocations"] = json::value::array();
  for (const SnapshotAllocation& a : s.allocations) {
    allocations.push_back({{"ptr", address(a.ptr)},
                           {"bytes", a.bytes},
                           {"kind", kind_name(a.kind)},
                           {"site", a.site},
                           {"sequence", a.sequence},
                           {"time_ns", a.time_ns != 0 ? json::value(a.time_ns) : json::value()}});
  }
  json::value events = json::value::array();
  for (const HistoryEvent& e : s.history) {
    events.push_back({{"sequence", e.sequence},
                      {"time_ns", e.time_ns},
                      {"action", e.is_free ? "free" : "alloc"},
                      {"ptr", address(e.ptr)},
                      {"bytes", e.bytes},
                      {"kind", kind_name(e.kind)},
                      {"site", e.site}});
  }
  doc["history"] = {{"capacity", s.history_capacity},
                    {"dropped", s.history_dropped},
                    {"events", std::move(events)}};
  return json::dump(doc, json::layout::one_line);
}

}  // namespace gpuplug::sdk
