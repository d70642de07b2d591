// SPDX-License-Identifier: Apache-2.0
// The `faults` layer's spec: the parser and the trigger (fault_spec.hpp).
#include "layers/fault_spec.hpp"

#include <array>
#include <charconv>
#include <gpuplug/support/edit_distance.hpp>
#include <gpuplug/support/text.hpp>
#include <gpuplug/types.hpp>
#include <stdexcept>
#include <utility>

namespace gpuplug::detail::layers {

namespace {

constexpr std::array<std::string_view, fault_slot_count> slot_names{
#define GPUPLUG_SLOT_NAME_TEXT(slot) std::string_view(#slot),
    GPUPLUG_LAYERED_SLOTS(GPUPLUG_SLOT_NAME_TEXT)
#undef GPUPLUG_SLOT_NAME_TEXT
};

/// Slots that return no status: a rule cannot name them.
bool has_status(std::string_view slot) { return slot != "last_error" && slot != "ledger_report"; }

/// Slots that release what they are given: `after` could not undo them.
bool releases(std::string_view slot) {
  return slot == "free" || slot == "stream_destroy" || slot == "event_destroy" ||
         slot == "unload_module" || slot == "sweep_unreleased" || slot == "graph_destroy" ||
         slot == "stream_abort_capture" || slot == "free_arena" || slot == "free_host_mapped";
}

/// GpuBackend's names for the slots it names differently (Error::operation() shows these).
constexpr std::pair<std::string_view, std::string_view> aliases[] = {
    {"memset", "memset_d8"},
    {"kernel", "get_function"},
    {"device_symbol", "get_global"},
    {"create_stream", "stream_create_with_flags"},
    {"destroy_stream", "stream_destroy"},
    {"create_event", "event_create"},
    {"destroy_event", "event_destroy"},
    {"record", "event_record"},
    {"wait", "stream_wait_event"},
    {"query", "event_query"},
    {"elapsed_ms", "event_elapsed_ms"},
    {"begin_capture", "stream_begin_capture"},
    {"end_capture", "stream_end_capture"},
    {"launch_graph", "graph_launch"},
    {"destroy_graph", "graph_destroy"},
    {"abort_capture_if_active", "stream_abort_capture"},
};

constexpr Status statuses[] = {
    Status::invalid_argument, Status::out_of_memory, Status::not_found,
    Status::unsupported,      Status::unavailable,   Status::invalid_image,
    Status::launch_failed,    Status::device_error,  Status::internal,
    Status::capture_invalidated};

/// Throws the spec's error: "faults='<spec>': <why>".
[[noreturn]] void bad(std::string_view spec, const std::string& why) {
  throw std::invalid_argument("faults='" + std::string(spec) + "': " + why);
}

/// "; did you mean X?" for the candidate closest to `word` (edit distance at most 2), else "".
template <class Range>
std::string suggestion(std::string_view word, const Range& candidates) {
  std::string best;
  std::size_t best_distance = 3;
  for (std::string_view c : candidates) {
    const std::size_t d = support::edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best.empty() ? "" : "; did you mean " + best + "?";
}

std::size_t parse_operation(std::string_view spec, std::string_view op) {
  std::string_view name = op;
  for (const auto& [alias, slot] : aliases) {
    if (op == alias) name = slot;
  }
  std::vector<std::string_view> known;
  for (std::size_t i = 0; i < slot_names.size(); ++i) {
    if (!has_status(slot_names[i])) continue;
    if (slot_names[i] == name) return i;
    known.push_back(slot_names[i]);
  }
  for (const auto& a : aliases) known.push_back(a.first);
  const bool statusless = name == "last_error" || name == "ledger_report";
  bad(spec, "'" + std::string(op) + "' " +
                (statusless ? "returns no status, so it cannot fail"
                            : "is not an operation" + suggestion(op, known) +
                                  " (an abi.h slot such as alloc, copy_d2h, launch, load_module)"));
}

std::uint64_t parse_count(std::string_view spec, std::string_view text, const char* what) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value == 0) {
    bad(spec, "'" + std::string(text) + "' is not " + what + " (a whole number from 1)");
  }
  return value;
}

/// N, every:N or p:P[,seed:S].
FaultTrigger parse_when(std::string_view spec, std::string_view when) {
  FaultTrigger t;
  if (when.starts_with("every:")) {
    t.kind = FaultTrigger::Kind::every;
    t.n = parse_count(spec, when.substr(6), "a period");
    return t;
  }
  if (when.starts_with("p:")) {
    t.kind = FaultTrigger::Kind::probability;
    std::string_view p = when.substr(2);
    if (const auto comma = p.find(','); comma != std::string_view::npos) {
      const std::string_view seed = support::trim(p.substr(comma + 1));
      p = support::trim(p.substr(0, comma));
      const std::string_view digits =
          seed.starts_with("seed:") ? seed.substr(5) : std::string_view();
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), t.seed);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
        bad(spec, "'" + std::string(seed) + "' is not a seed (seed:S, S a whole number)");
      }
    }
    const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), t.probability);
    if (p.empty() || ec != std::errc() || end != p.data() + p.size() || !(t.probability >= 0) ||
        t.probability > 1) {
      bad(spec, "'" + std::string(p) + "' is not a probability (a number in [0, 1])");
    }
    return t;
  }
  t.n = parse_count(spec, when, "a call number");
  return t;
}

gpuplug_status_t parse_status(std::string_view spec, std::string_view text) {
  std::vector<std::string> names;
  for (const Status s : statuses) {
    if (to_string(s) == text) return static_cast<gpuplug_status_t>(s);
    names.push_back(to_string(s));
  }
  bad(spec, "'" + std::string(text) + "' is not a status" + suggestion(text, names) + " (one of " +
                support::join(names) + ")");
}

FaultRule parse_rule(std::string_view spec, std::string_view rule) {
  FaultRule r;
  r.text = rule;
  const auto at = rule.find('@');
  const auto eq = rule.find('=');
  if (at == std::string_view::npos || eq == std::string_view::npos || eq < at) {
    bad(spec, "'" + r.text + "' is not op@when=status (e.g. alloc@3=out_of_memory)");
  }
  r.slot = parse_operation(spec, support::trim(rule.substr(0, at)));
  r.trigger = parse_when(spec, support::trim(rule.substr(at + 1, eq - at - 1)));
  std::string_view status = rule.substr(eq + 1);
  if (const auto colon = status.find(':'); colon != std::string_view::npos) {
    const std::string_view mode = support::trim(status.substr(colon + 1));
    status = status.substr(0, colon);
    if (mode == "after") {
      r.after = true;
    } else if (mode != "before") {
      bad(spec, "'" + std::string(mode) + "' is not a mode (before or after)");
    }
  }
  r.status = parse_status(spec, support::trim(status));
  if (r.after && releases(slot_names[r.slot])) {
    bad(spec, "'" + r.text + "': " + std::string(slot_names[r.slot]) +
                  " cannot fail after the call: what it released cannot be undone (use before)");
  }
  return r;
}

/// splitmix64: a fixed, well-mixed hash, so draws do not depend on the standard library.
std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

bool FaultTrigger::fires(std::size_t slot, std::uint64_t call) const noexcept {
  switch (kind) {
    case Kind::nth:
      return call == n;
    case Kind::every:
      return call % n == 0;
    case Kind::probability: {
      const std::uint64_t draw = mix(mix(seed ^ mix(slot)) ^ call);
      return static_cast<double>(draw >> 11) * 0x1.0p-53 < probability;  // uniform in [0, 1)
    }
  }
  return false;
}

std::span<const std::string_view> fault_slot_names() noexcept { return slot_names; }

std::vector<FaultRule> parse_fault_spec(std::string_view spec) {
  std::vector<FaultRule> rules;
  for (const std::string_view part : support::split(spec, ';')) {
    const std::string_view rule = support::trim(part);
    if (!rule.empty()) rules.push_back(parse_rule(spec, rule));
  }
  return rules;
}

}  // namespace gpuplug::detail::layers
