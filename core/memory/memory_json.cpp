// SPDX-License-Identifier: Apache-2.0
// A memory snapshot as JSON (schema 1, share/gpuplug/memory.schema.json) and read back: the
// plugin's ledger part, a snapshot file for `gpuplug mem`.
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <gpuplug/memory.hpp>
#include <gpuplug/support/json.hpp>

namespace gpuplug {

namespace {

namespace json = support::json;

// Addresses are strings: JSON readers in other languages lose integers above 2^53.
std::string address(DevicePtr p) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, p.value);
  return buf;
}

const char* kind_name(AllocKind kind) {
  switch (kind) {
    case AllocKind::managed:
      return "managed";
    case AllocKind::external:
      return "external";
    case AllocKind::pinned:
      return "pinned";
    case AllocKind::arena:
      return "arena";
    case AllocKind::device:
      break;
  }
  return "device";
}

json::value optional_number(const std::optional<std::uint64_t>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

[[noreturn]] void bad(const std::string& source, const std::string& why) {
  throw BadSnapshot(source + ": " + why);
}

const json::value& child(const json::value& t, const char* key, const std::string& source,
                         const std::string& where) {
  const json::value* c = json::member(t, key);
  if (!c) bad(source, where + "has no \"" + key + "\"");
  return *c;
}

std::uint64_t unsigned_field(const json::value& t, const char* key, const std::string& source,
                             const std::string& where) {
  const json::value& v = child(t, key, source, where);
  if (!v.is_number_unsigned())
    bad(source, where + "\"" + key + "\" is not an unsigned integer: '" + json::shown(v) + "'");
  return v.get<std::uint64_t>();
}

/// An unsigned integer or null (nullopt).
std::optional<std::uint64_t> optional_unsigned(const json::value& t, const char* key,
                                               const std::string& source,
                                               const std::string& where) {
  const json::value* c = json::member(t, key);
  if (!c || c->is_null()) return std::nullopt;
  return unsigned_field(t, key, source, where);
}

std::string string_field(const json::value& t, const char* key, const std::string& source,
                         const std::string& where) {
  const json::value& v = child(t, key, source, where);
  if (!v.is_string()) bad(source, where + "\"" + key + "\" is not a string: '" + json::shown(v) + "'");
  return v.get<std::string>();
}

/// A string member, or `otherwise` when it is absent or not a string.
std::string string_or(const json::value& t, const char* key, const std::string& otherwise) {
  const json::value* c = json::member(t, key);
  return c && c->is_string() ? c->get<std::string>() : otherwise;
}

DevicePtr address_field(const json::value& t, const char* key, const std::string& source,
                        const std::string& where) {
  const std::string text = string_field(t, key, source, where);
  std::uint64_t v = 0;
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const auto [end, ec] = hex ? std::from_chars(text.data() + 2, text.data() + text.size(), v, 16)
                             : std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec != std::errc() || end != text.data() + text.size())
    bad(source, where + "\"" + key + "\" is not an address: '" + support::escape_text(text) + "'");
  return DevicePtr{v};
}

AllocKind kind_field(const json::value& t, const std::string& source, const std::string& where) {
  const std::string k = string_field(t, "kind", source, where);
  if (k == "device") return AllocKind::device;
  if (k == "managed") return AllocKind::managed;
  if (k == "external") return AllocKind::external;
  if (k == "pinned") return AllocKind::pinned;
  if (k == "arena") return AllocKind::arena;
  bad(source, where + "\"kind\" is '" + support::escape_text(k) +
                  "', not device, managed, external, pinned or arena");
}

/// The elements of array `key` ("where" for each: "sites[3]: ").
template <class F>
void each(const json::value& t, const char* key, const std::string& source, F&& f) {
  const json::value* c = json::member(t, key);
  if (!c || c->is_null()) return;  // an absent list is an empty one (a partial snapshot has none)
  if (!c->is_array()) bad(source, "\"" + std::string(key) + "\" is not an array");
  std::size_t i = 0;
  for (const json::value& element : *c) {
    const std::string where = std::string(key) + "[" + std::to_string(i++) + "]: ";
    if (!element.is_object()) bad(source, where + "is not an object");
    f(element, where);
  }
}

}  // namespace

std::string to_json(const MemorySnapshot& s) {
  const LedgerStats& c = s.totals;
  json::value doc = {{"schema", s.schema}, {"backend", s.backend}, {"complete", s.complete}};
  if (!s.complete) doc["partial_reason"] = s.partial_reason;
  doc["device_memory_limit"] = optional_number(s.device_memory_limit);
  doc["device"] = s.device ? json::value{{"free_bytes", s.device->free_bytes},
                                         {"total_bytes", s.device->total_bytes}}
                           : json::value(nullptr);
  doc["totals"] = {{"live_bytes", c.live_bytes},     {"live_count", c.live_count},
                   {"peak_bytes", c.peak_bytes},     {"live_managed_bytes", c.live_managed_bytes},
                   {"total_allocs", c.total_allocs}, {"total_frees", c.total_frees},
                   {"live_pinned_bytes", c.live_pinned_bytes}, {"arena_bytes", c.arena_bytes}};
  json::value& sites = doc["sites"] = json::value::array();
  for (const SiteMemory& t : s.sites) {
    sites.push_back(json::value{{"site", t.site},
                                {"live_bytes", t.live_bytes},
                                {"live_count", t.live_count},
                                {"peak_bytes", t.peak_bytes}});
  }
  json::value& allocations = doc["allocations"] = json::value::array();
  for (const LiveAllocation& a : s.allocations) {
    allocations.push_back(json::value{{"ptr", address(a.ptr)},
                                      {"bytes", a.bytes},
                                      {"kind", kind_name(a.kind)},
                                      {"site", a.site},
                                      {"sequence", a.sequence},
                                      {"time_ns", optional_number(a.time_ns)}});
  }
  json::value events = json::value::array();
  for (const MemoryEvent& e : s.history) {
    events.push_back(json::value{{"sequence", e.sequence},
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
  json::value& scratch = doc["op_scratch"] = json::value::array();
  for (const ScratchMemory& m : s.op_scratch) {
    scratch.push_back(json::value{{"cache", m.cache},
                                  {"tag", m.tag},
                                  {"live_bytes", m.live_bytes},
                                  {"retired_bytes", m.retired_bytes},
                                  {"retired_count", m.retired_count}});
  }
  return json::dump(doc, json::layout::document) + "\n";
}

MemorySnapshot parse_memory_snapshot(std::string_view text, const std::string& source) {
  std::string error;
  const std::optional<json::value> parsed = json::parse(text, error);
  if (!parsed) bad(source, error);
  const json::value& root = *parsed;
  if (!root.is_object()) bad(source, "the document is not a JSON object");
  MemorySnapshot s;
  const std::uint64_t schema = unsigned_field(root, "schema", source, "");
  if (schema != static_cast<std::uint64_t>(memory_snapshot_schema))
    bad(source, "schema " + std::to_string(schema) + ", this gpuplug reads " +
                    std::to_string(memory_snapshot_schema));
  // "backend" is the core's; a plugin's ledger part names its "owner".
  s.backend = string_or(root, "backend", string_or(root, "owner", ""));
  const json::value* complete = json::member(root, "complete");
  s.complete = !(complete && complete->is_boolean() && !complete->get<bool>());
  s.partial_reason = string_or(root, "partial_reason", "");
  s.device_memory_limit = optional_unsigned(root, "device_memory_limit", source, "");
  if (const json::value* d = json::member(root, "device"); d && !d->is_null()) {
    s.device = MemoryInfo{unsigned_field(*d, "free_bytes", source, "device: "),
                          unsigned_field(*d, "total_bytes", source, "device: ")};
  }
  const json::value& totals = child(root, "totals", source, "");
  const std::string tw = "totals: ";
  s.totals.live_bytes = unsigned_field(totals, "live_bytes", source, tw);
  s.totals.live_count = unsigned_field(totals, "live_count", source, tw);
  s.totals.peak_bytes = unsigned_field(totals, "peak_bytes", source, tw);
  s.totals.live_managed_bytes = unsigned_field(totals, "live_managed_bytes", source, tw);
  s.totals.total_allocs = unsigned_field(totals, "total_allocs", source, tw);
  s.totals.total_frees = unsigned_field(totals, "total_frees", source, tw);
  // Added within schema 1 (mapped host memory, arenas): absent from older snapshots, which had
  // none.
  s.totals.live_pinned_bytes =
      optional_unsigned(totals, "live_pinned_bytes", source, tw).value_or(0);
  s.totals.arena_bytes = optional_unsigned(totals, "arena_bytes", source, tw).value_or(0);
  each(root, "sites", source, [&](const json::value& e, const std::string& w) {
    s.sites.push_back(
        {string_field(e, "site", source, w), unsigned_field(e, "live_bytes", source, w),
         unsigned_field(e, "live_count", source, w), unsigned_field(e, "peak_bytes", source, w)});
  });
  each(root, "allocations", source, [&](const json::value& e, const std::string& w) {
    s.allocations.push_back(
        {address_field(e, "ptr", source, w), unsigned_field(e, "bytes", source, w),
         kind_field(e, source, w), string_field(e, "site", source, w),
         unsigned_field(e, "sequence", source, w), optional_unsigned(e, "time_ns", source, w)});
  });
  if (const json::value* h = json::member(root, "history"); h && !h->is_null()) {
    s.history_capacity = unsigned_field(*h, "capacity", source, "history: ");
    s.history_dropped = unsigned_field(*h, "dropped", source, "history: ");
    each(*h, "events", source, [&](const json::value& e, const std::string& w) {
      const std::string action = string_field(e, "action", source, w);
      if (action != "alloc" && action != "free")
        bad(source, "history." + w + "\"action\" is '" + support::escape_text(action) + "', not alloc or free");
      s.history.push_back({unsigned_field(e, "sequence", source, w),
                           unsigned_field(e, "time_ns", source, w), action == "free",
                           address_field(e, "ptr", source, w),
                           unsigned_field(e, "bytes", source, w), kind_field(e, source, w),
                           string_field(e, "site", source, w)});
    });
  }
  each(root, "op_scratch", source, [&](const json::value& e, const std::string& w) {
    s.op_scratch.push_back({string_field(e, "cache", source, w), string_field(e, "tag", source, w),
                            unsigned_field(e, "live_bytes", source, w),
                            unsigned_field(e, "retired_bytes", source, w),
                            unsigned_field(e, "retired_count", source, w)});
  });
  return s;
}

}  // namespace gpuplug
