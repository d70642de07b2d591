// SPDX-License-Identifier: Apache-2.0
// A memory snapshot as JSON (schema 1, share/gpuplug/memory.schema.json) and read back: the
// plugin's ledger part, a snapshot file for `gpuplug mem`.
#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <gpuplug/memory.hpp>
#include <gpuplug/support/escape.hpp>
#include <sstream>

namespace gpuplug {

namespace {

using boost::property_tree::ptree;
using support::json_string;

std::string number(std::uint64_t v) { return std::to_string(v); }

// Addresses are strings: JSON readers in other languages lose integers above 2^53.
std::string address(DevicePtr p) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "\"0x%" PRIx64 "\"", p.value);
  return buf;
}

const char* kind_name(AllocKind kind) {
  switch (kind) {
    case AllocKind::managed:
      return "\"managed\"";
    case AllocKind::external:
      return "\"external\"";
    case AllocKind::device:
      break;
  }
  return "\"device\"";
}

[[noreturn]] void bad(const std::string& source, const std::string& why) {
  throw BadSnapshot(source + ": " + why);
}

const ptree& child(const ptree& t, const char* key, const std::string& source,
                   const std::string& where) {
  const auto c = t.get_child_optional(key);
  if (!c) bad(source, where + "has no \"" + key + "\"");
  return *c;
}

std::uint64_t unsigned_field(const ptree& t, const char* key, const std::string& source,
                             const std::string& where) {
  const std::string text = child(t, key, source, where).data();
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    bad(source, where + "\"" + key + "\" is not an unsigned integer: '" + text + "'");
  return v;
}

/// An unsigned integer or null (nullopt).
std::optional<std::uint64_t> optional_unsigned(const ptree& t, const char* key,
                                               const std::string& source,
                                               const std::string& where) {
  const auto c = t.get_child_optional(key);
  if (!c || c->data() == "null") return std::nullopt;
  return unsigned_field(t, key, source, where);
}

std::string string_field(const ptree& t, const char* key, const std::string& source,
                         const std::string& where) {
  return child(t, key, source, where).data();
}

DevicePtr address_field(const ptree& t, const char* key, const std::string& source,
                        const std::string& where) {
  const std::string text = string_field(t, key, source, where);
  std::uint64_t v = 0;
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const auto [end, ec] = hex ? std::from_chars(text.data() + 2, text.data() + text.size(), v, 16)
                             : std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec != std::errc() || end != text.data() + text.size())
    bad(source, where + "\"" + key + "\" is not an address: '" + text + "'");
  return DevicePtr{v};
}

AllocKind kind_field(const ptree& t, const std::string& source, const std::string& where) {
  const std::string k = string_field(t, "kind", source, where);
  if (k == "device") return AllocKind::device;
  if (k == "managed") return AllocKind::managed;
  if (k == "external") return AllocKind::external;
  bad(source, where + "\"kind\" is '" + k + "', not device, managed or external");
}

/// The elements of array `key` ("where" for each: "sites[3]: ").
template <class F>
void each(const ptree& t, const char* key, F&& f) {
  const auto c = t.get_child_optional(key);
  if (!c) return;  // an absent list is an empty one (a partial snapshot has none)
  std::size_t i = 0;
  for (const auto& [name, element] : *c) {
    f(element, std::string(key) + "[" + std::to_string(i++) + "]: ");
  }
}

}  // namespace

std::string to_json(const MemorySnapshot& s) {
  const LedgerStats& c = s.totals;
  std::string out = "{\n  \"schema\": " + std::to_string(s.schema) +
                    ",\n  \"backend\": " + json_string(s.backend) +
                    ",\n  \"complete\": " + (s.complete ? "true" : "false");
  if (!s.complete) out += ",\n  \"partial_reason\": " + json_string(s.partial_reason);
  out += ",\n  \"device_memory_limit\": " +
         (s.device_memory_limit ? number(*s.device_memory_limit) : std::string("null"));
  out += ",\n  \"device\": " +
         (s.device ? "{\"free_bytes\": " + number(s.device->free_bytes) +
                         ", \"total_bytes\": " + number(s.device->total_bytes) + "}"
                   : std::string("null"));
  out += ",\n  \"totals\": {\"live_bytes\": " + number(c.live_bytes) +
         ", \"live_count\": " + number(c.live_count) + ", \"peak_bytes\": " + number(c.peak_bytes) +
         ", \"live_managed_bytes\": " + number(c.live_managed_bytes) +
         ", \"total_allocs\": " + number(c.total_allocs) +
         ", \"total_frees\": " + number(c.total_frees) + "}";
  out += ",\n  \"sites\": [";
  for (std::size_t i = 0; i < s.sites.size(); ++i) {
    const SiteMemory& t = s.sites[i];
    out += (i ? ",\n    " : "\n    ") + std::string("{\"site\": ") + json_string(t.site) +
           ", \"live_bytes\": " + number(t.live_bytes) +
           ", \"live_count\": " + number(t.live_count) +
           ", \"peak_bytes\": " + number(t.peak_bytes) + "}";
  }
  out += "],\n  \"allocations\": [";
  for (std::size_t i = 0; i < s.allocations.size(); ++i) {
    const LiveAllocation& a = s.allocations[i];
    out += (i ? ",\n    " : "\n    ") + std::string("{\"ptr\": ") + address(a.ptr) +
           ", \"bytes\": " + number(a.bytes) + ", \"kind\": " + kind_name(a.kind) +
           ", \"site\": " + json_string(a.site) + ", \"sequence\": " + number(a.sequence) +
           ", \"time_ns\": " + (a.time_ns ? number(*a.time_ns) : std::string("null")) + "}";
  }
  out += "],\n  \"history\": {\"capacity\": " + number(s.history_capacity) +
         ", \"dropped\": " + number(s.history_dropped) + ", \"events\": [";
  for (std::size_t i = 0; i < s.history.size(); ++i) {
    const MemoryEvent& e = s.history[i];
    out += (i ? ",\n    " : "\n    ") + std::string("{\"sequence\": ") + number(e.sequence) +
           ", \"time_ns\": " + number(e.time_ns) +
           ", \"action\": " + (e.is_free ? "\"free\"" : "\"alloc\"") +
           ", \"ptr\": " + address(e.ptr) + ", \"bytes\": " + number(e.bytes) +
           ", \"kind\": " + kind_name(e.kind) + ", \"site\": " + json_string(e.site) + "}";
  }
  out += "]},\n  \"op_scratch\": [";
  for (std::size_t i = 0; i < s.op_scratch.size(); ++i) {
    const ScratchMemory& m = s.op_scratch[i];
    out += (i ? ",\n    " : "\n    ") + std::string("{\"cache\": ") + json_string(m.cache) +
           ", \"tag\": " + json_string(m.tag) + ", \"live_bytes\": " + number(m.live_bytes) +
           ", \"retired_bytes\": " + number(m.retired_bytes) +
           ", \"retired_count\": " + number(m.retired_count) + "}";
  }
  out += "]\n}\n";
  return out;
}

MemorySnapshot parse_memory_snapshot(std::string_view text, const std::string& source) {
  ptree root;
  try {
    std::istringstream in{std::string(text)};
    boost::property_tree::read_json(in, root);
  } catch (const boost::property_tree::json_parser_error& e) {
    bad(source, "line " + std::to_string(e.line()) + ": " + e.message());
  }
  MemorySnapshot s;
  const std::uint64_t schema = unsigned_field(root, "schema", source, "");
  if (schema != static_cast<std::uint64_t>(memory_snapshot_schema))
    bad(source, "schema " + std::to_string(schema) + ", this gpuplug reads " +
                    std::to_string(memory_snapshot_schema));
  // "backend" is the core's; a plugin's ledger part names its "owner".
  s.backend = root.get<std::string>("backend", root.get<std::string>("owner", ""));
  s.complete = root.get<std::string>("complete", "true") != "false";
  s.partial_reason = root.get<std::string>("partial_reason", "");
  s.device_memory_limit = optional_unsigned(root, "device_memory_limit", source, "");
  if (const auto d = root.get_child_optional("device"); d && d->data() != "null") {
    s.device = MemoryInfo{unsigned_field(*d, "free_bytes", source, "device: "),
                          unsigned_field(*d, "total_bytes", source, "device: ")};
  }
  const ptree& totals = child(root, "totals", source, "");
  const std::string tw = "totals: ";
  s.totals.live_bytes = unsigned_field(totals, "live_bytes", source, tw);
  s.totals.live_count = unsigned_field(totals, "live_count", source, tw);
  s.totals.peak_bytes = unsigned_field(totals, "peak_bytes", source, tw);
  s.totals.live_managed_bytes = unsigned_field(totals, "live_managed_bytes", source, tw);
  s.totals.total_allocs = unsigned_field(totals, "total_allocs", source, tw);
  s.totals.total_frees = unsigned_field(totals, "total_frees", source, tw);
  each(root, "sites", [&](const ptree& e, const std::string& w) {
    s.sites.push_back(
        {string_field(e, "site", source, w), unsigned_field(e, "live_bytes", source, w),
         unsigned_field(e, "live_count", source, w), unsigned_field(e, "peak_bytes", source, w)});
  });
  each(root, "allocations", [&](const ptree& e, const std::string& w) {
    s.allocations.push_back(
        {address_field(e, "ptr", source, w), unsigned_field(e, "bytes", source, w),
         kind_field(e, source, w), string_field(e, "site", source, w),
         unsigned_field(e, "sequence", source, w), optional_unsigned(e, "time_ns", source, w)});
  });
  if (const auto h = root.get_child_optional("history")) {
    s.history_capacity = unsigned_field(*h, "capacity", source, "history: ");
    s.history_dropped = unsigned_field(*h, "dropped", source, "history: ");
    each(*h, "events", [&](const ptree& e, const std::string& w) {
      const std::string action = string_field(e, "action", source, w);
      if (action != "alloc" && action != "free")
        bad(source, "history." + w + "\"action\" is '" + action + "', not alloc or free");
      s.history.push_back({unsigned_field(e, "sequence", source, w),
                           unsigned_field(e, "time_ns", source, w), action == "free",
                           address_field(e, "ptr", source, w),
                           unsigned_field(e, "bytes", source, w), kind_field(e, source, w),
                           string_field(e, "site", source, w)});
    });
  }
  each(root, "op_scratch", [&](const ptree& e, const std::string& w) {
    s.op_scratch.push_back({string_field(e, "cache", source, w), string_field(e, "tag", source, w),
                            unsigned_field(e, "live_bytes", source, w),
                            unsigned_field(e, "retired_bytes", source, w),
                            unsigned_field(e, "retired_count", source, w)});
  });
  return s;
}

}  // namespace gpuplug
