// SPDX-License-Identifier: Apache-2.0
// The ledger part of a memory snapshot as JSON (schema 1): what the ledger_snapshot slot returns.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "gpuplug/support/escape.hpp"
#include "ledger.hpp"

namespace gpuplug::sdk {
namespace {

using support::json_string;

std::string number(std::uint64_t v) { return std::to_string(v); }

// Addresses are strings: JSON readers in other languages lose integers above 2^53.
std::string address(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "\"0x%" PRIx64 "\"", v);
  return buf;
}

const char* kind_name(gpuplug_alloc_kind_t kind) {
  if (kind == GPUPLUG_ALLOC_MANAGED) return "\"managed\"";
  if (kind == alloc_external) return "\"external\"";
  return "\"device\"";
}

}  // namespace

std::string to_json(const LedgerSnapshot& s) {
  const LedgerCounters& c = s.counters;
  std::string out = "{\"schema\": 1, \"owner\": " + json_string(s.owner) + ", \"complete\": true";
  out += ", \"device_memory_limit\": " +
         (s.device_memory_limit ? number(*s.device_memory_limit) : std::string("null"));
  out += ", \"totals\": {\"live_bytes\": " + number(c.live_bytes) +
         ", \"live_count\": " + number(c.live_count) + ", \"peak_bytes\": " + number(c.peak_bytes) +
         ", \"live_managed_bytes\": " + number(c.live_managed_bytes) +
         ", \"total_allocs\": " + number(c.total_allocs) +
         ", \"total_frees\": " + number(c.total_frees) + "}";
  out += ", \"sites\": [";
  for (std::size_t i = 0; i < s.sites.size(); ++i) {
    const SiteTotals& t = s.sites[i];
    out += (i ? ", " : "") + std::string("{\"site\": ") + json_string(t.site) +
           ", \"live_bytes\": " + number(t.live_bytes) +
           ", \"live_count\": " + number(t.live_count) +
           ", \"peak_bytes\": " + number(t.peak_bytes) + "}";
  }
  out += "], \"allocations\": [";
  for (std::size_t i = 0; i < s.allocations.size(); ++i) {
    const SnapshotAllocation& a = s.allocations[i];
    out += (i ? ", " : "") + std::string("{\"ptr\": ") + address(a.ptr) +
           ", \"bytes\": " + number(a.bytes) + ", \"kind\": " + kind_name(a.kind) +
           ", \"site\": " + json_string(a.site) + ", \"sequence\": " + number(a.sequence) +
           ", \"time_ns\": " + (a.time_ns != 0 ? number(a.time_ns) : std::string("null")) + "}";
  }
  out += "], \"history\": {\"capacity\": " + number(s.history_capacity) +
         ", \"dropped\": " + number(s.history_dropped) + ", \"events\": [";
  for (std::size_t i = 0; i < s.history.size(); ++i) {
    const HistoryEvent& e = s.history[i];
    out += (i ? ", " : "") + std::string("{\"sequence\": ") + number(e.sequence) +
           ", \"time_ns\": " + number(e.time_ns) +
           ", \"action\": " + (e.is_free ? "\"free\"" : "\"alloc\"") +
           ", \"ptr\": " + address(e.ptr) + ", \"bytes\": " + number(e.bytes) +
           ", \"kind\": " + kind_name(e.kind) + ", \"site\": " + json_string(e.site) + "}";
  }
  out += "]}}";
  return out;
}

}  // namespace gpuplug::sdk
