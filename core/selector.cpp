// SPDX-License-Identifier: Apache-2.0
// Selectors: parse_selector ("auto", "cuda", "cuda:1", "hip:0!", "cuda,hip,host" into
// SelectorItems) and the policy that turns one into a backend over the discovered plugins.
#include "selector.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <gpuplug/support/edit_distance.hpp>
#include <gpuplug/support/escape.hpp>
#include <gpuplug/support/plugin_name.hpp>
#include <gpuplug/support/text.hpp>
#include <limits>
#include <memory>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "environment.hpp"
#include "plugin_backend.hpp"

namespace gpuplug {

namespace {

using support::trim;

[[noreturn]] void bad(std::string_view selector, std::string_view element, std::string_view why) {
  std::string message = "invalid backend selector '";
  message.append(selector).append("': element '").append(element).append("' ").append(why);
  message.append(
      " (expected name[:ordinal|:uuid=UUID|:pci=ADDRESS][!] items separated by commas, e.g. "
      "\"cuda:1,host\" or \"hip:pci=0000:c1:00.0\")");
  throw Error(Status::invalid_argument, "", std::move(message));
}

/// Up to `max_digits` hex digits (either case) from the front of `s`, consumed; nullopt when
/// there are none or more.
std::optional<std::uint32_t> take_hex(std::string_view& s, std::size_t max_digits) {
  std::size_t n = 0;
  std::uint32_t value = 0;
  while (n < s.size() && std::isxdigit(static_cast<unsigned char>(s[n])) != 0) {
    if (++n > max_digits) return std::nullopt;
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(s[n - 1])));
    value = value * 16 + static_cast<std::uint32_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  if (n == 0) return std::nullopt;
  s.remove_prefix(n);
  return value;
}

/// "0000:c1:00.0", "00000000:C1:00.0" (nvidia-smi) or the short "c1:00.0" (domain 0).
std::optional<PciAddress> parse_pci(std::string_view text) {
  // Two colons: a domain comes first.
  const bool has_domain = std::count(text.begin(), text.end(), ':') == 2;
  PciAddress a;
  std::string_view s = text;
  if (has_domain) {
    const auto domain = take_hex(s, 8);
    if (!domain || s.empty() || s.front() != ':') return std::nullopt;
    s.remove_prefix(1);
    a.domain = *domain;
  }
  const auto bus = take_hex(s, 2);
  if (!bus || s.empty() || s.front() != ':') return std::nullopt;
  s.remove_prefix(1);
  const auto device = take_hex(s, 2);
  if (!device || *device > 0x1f || s.empty() || s.front() != '.') return std::nullopt;
  s.remove_prefix(1);
  const auto function = take_hex(s, 1);
  if (!function || *function > 7 || !s.empty()) return std::nullopt;
  a.bus = *bus;
  a.device = *device;
  a.function = *function;
  return a;
}

/// Parses the "uuid=..." or "pci=..." after the colon into `item`; false when `spec` is neither.
bool parse_device_spec(std::string_view selector, std::string_view element, std::string_view spec,
                       SelectorItem& item) {
  constexpr std::string_view uuid_key = "uuid=";
  constexpr std::string_view pci_key = "pci=";
  if (spec.starts_with(uuid_key)) {
    const std::string_view value = spec.substr(uuid_key.size());
    if (value.empty()) bad(selector, element, "has an empty uuid");
    if (value.size() > 63) bad(selector, element, "has a uuid longer than 63 characters");
    const bool plain = std::all_of(value.begin(), value.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-';
    });
    if (!plain) {
      bad(selector, element,
          "has a uuid with a character other than a letter, a digit or '-' (e.g. "
          "uuid=GPU-8932f937-d72c-4106-c12f-20bd9faed9f6)");
    }
    item.uuid = std::string(value);
    return true;
  }
  if (spec.starts_with(pci_key)) {
    const std::string_view value = spec.substr(pci_key.size());
    if (value.empty()) bad(selector, element, "has an empty PCI address");
    item.pci = parse_pci(value);
    if (!item.pci) {
      bad(selector, element,
          "has a PCI address that is not domain:bus:device.function in hex (e.g. "
          "pci=0000:c1:00.0, or c1:00.0 in domain 0; device at most 1f, function at most 7)");
    }
    return true;
  }
  return false;
}

SelectorItem parse_item(std::string_view selector, std::string_view element) {
  SelectorItem item;
  {
    // "name:uuid=..." and "name:pci=..." name a device; any other '=' is an option.
    std::string_view rest = element;
    if (!rest.empty() && rest.back() == '!') rest.remove_suffix(1);
    const auto colon = rest.find(':');
    if (colon != std::string_view::npos && rest.find('=') != std::string_view::npos &&
        rest.find('=') > colon) {
      const std::string_view name = rest.substr(0, colon);
      if (parse_device_spec(selector, element, rest.substr(colon + 1), item)) {
        if (name.empty()) bad(selector, element, "has no backend name");
        if (!support::valid_plugin_name(name)) {
          bad(selector, element,
              "has a bad character in the name (names use lower-case letters, digits and '_')");
        }
        if (name == "auto") bad(selector, element, "names a device for 'auto'");
        item.name = std::string(name);
        item.required = rest.size() != element.size();
        return item;
      }
    }
  }
  if (const auto eq = element.find('='); eq != std::string_view::npos) {
    // "host!opt=bad": a selector names backends only; say where options go instead of
    // complaining about a bad character.
    const auto start = element.find_last_of("!:", eq);
    const std::string_view option =
        element.substr(start == std::string_view::npos ? 0 : start + 1);
    bad(selector, element,
        "holds an option ('" + std::string(option) +
            "'); options are not part of a selector: pass them as gpuplug::Options to "
            "select() or create()");
  }
  std::string_view rest = element;
  if (!rest.empty() && rest.back() == '!') {
    item.required = true;
    rest.remove_suffix(1);
  }
  const auto colon = rest.find(':');
  const std::string_view name = rest.substr(0, colon);
  if (name.empty()) bad(selector, element, "has no backend name");
  if (!support::valid_plugin_name(name)) {
    bad(selector, element,
        "has a bad character in the name (names use lower-case letters, digits and '_')");
  }
  item.name = std::string(name);
  if (colon != std::string_view::npos) {
    const std::string_view digits = rest.substr(colon + 1);
    if (item.name == "auto") bad(selector, element, "gives an ordinal to 'auto'");
    if (digits.empty()) bad(selector, element, "has an empty ordinal");
    std::uint64_t value = 0;
    const auto* end = digits.data() + digits.size();
    const auto [ptr, ec] = std::from_chars(digits.data(), end, value);
    const bool all_digits = digits.find_first_not_of("0123456789") == std::string_view::npos;
    if (!all_digits || ptr != end)
      bad(selector, element, "has an ordinal that is not a decimal number");
    if (ec != std::errc() || value > std::numeric_limits<std::uint32_t>::max()) {
      bad(selector, element, "has an ordinal that is too large");
    }
    item.ordinal = static_cast<std::uint32_t>(value);
  }
  return item;
}

}  // namespace

std::vector<SelectorItem> parse_selector(std::string_view selector) {
  std::vector<SelectorItem> items;
  std::size_t start = 0;
  while (true) {
    const auto comma = selector.find(',', start);
    const std::string_view raw = selector.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const std::string_view element = trim(raw);
    if (element.empty()) {
      throw Error(Status::invalid_argument, "",
                  "invalid backend selector '" + std::string(selector) + "': element " +
                      std::to_string(items.size() + 1) + " is empty");
    }
    items.push_back(parse_item(selector, element));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

std::string Selection::explain() const {
  std::string text = "chose " + chosen;
  // auto ranked: where the choice stood (a refused better candidate puts it below 1).
  for (std::size_t i = 0; i < ranking.size(); ++i) {
    if (ranking[i].starts_with(std::to_string(i + 1) + ". " + chosen + " ")) {
      text += ", ranked " + std::to_string(i + 1) + " of " + std::to_string(ranking.size());
      break;
    }
  }
  if (!passed_over.empty()) text += " (" + support::join(passed_over, "; ") + ")";
  return text;
}

namespace detail {

namespace {

constexpr std::string_view channel = "registry";

bool is_host(std::string_view name) { return name == "host"; }

/// auto's order of device classes: 0 is tried first. `unknown` (a plugin older than ABI 1.1)
/// ranks as an accelerator, below any plugin that declares a GPU; the plugin named "host" is the
/// CPU whatever it declares, as auto has always tried it after the GPU plugins.
int class_rank(const PluginEntry& e, const DeviceInfo& d) {
  switch (d.device_class) {
    case DeviceClass::discrete_gpu: return 0;
    case DeviceClass::integrated_gpu: return 1;
    case DeviceClass::accelerator: return 2;
    case DeviceClass::cpu: return 3;
    case DeviceClass::emulator: return 4;
    case DeviceClass::unknown: break;
  }
  // Any other value (unknown, or a class from a later ABI this core does not know) is unknown.
  return is_host(e.info.name) ? 3 : 2;
}

/// The class auto ranks `d` as (its declared class, or what unknown counts as).
std::string_view ranked_class(const PluginEntry& e, const DeviceInfo& d) {
  static constexpr std::string_view names[] = {"discrete_gpu", "integrated_gpu", "accelerator",
                                               "cpu", "emulator"};
  return names[class_rank(e, d)];
}

/// One device that auto may choose; `discovery` is its plugin's place in discovery order.
struct Candidate {
  const PluginEntry* entry;
  const DeviceInfo* device;
  std::size_t discovery;
};

/// The score within a class, compared field by field, larger first: peak_gflops (0 when the
/// plugin does not know it), then total_memory, then compute_units. Plain numbers the plugin
/// declared; no weighting, so that the order is easy to predict and to explain.
std::tuple<std::uint64_t, std::uint64_t, std::uint32_t> score(const DeviceInfo& d) {
  return {d.peak_gflops, d.total_memory, d.compute_units};
}

/// Sorts best first: class (class_rank), then score, then discovery order, then ordinal.
void rank_candidates(std::vector<Candidate>& c) {
  std::stable_sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
    const int ca = class_rank(*a.entry, *a.device);
    const int cb = class_rank(*b.entry, *b.device);
    if (ca != cb) return ca < cb;
    if (score(*a.device) != score(*b.device)) return score(*a.device) > score(*b.device);
    if (a.discovery != b.discovery) return a.discovery < b.discovery;
    return a.device->ordinal < b.device->ordinal;
  });
}

/// "discrete_gpu (declared discrete_gpu), score: 1000 GFLOP/s, 8192 MiB, 16 CUs".
std::string describe_rank(const PluginEntry& e, const DeviceInfo& d) {
  std::string text(ranked_class(e, d));
  if (to_string(d.device_class) != text) text += " (declared " + to_string(d.device_class) + ")";
  text += ", score: " + (d.peak_gflops != 0 ? std::to_string(d.peak_gflops) + " GFLOP/s"
                                           : std::string("peak unknown")) +
          ", " + std::to_string(d.total_memory >> 20) + " MiB, " +
          std::to_string(d.compute_units) + " CUs";
  return text;
}

/// What trying one or more candidates gave, in the order they were tried.
struct Attempt {
  std::shared_ptr<GpuBackend> backend;  // set when a candidate worked
  std::string chosen;                   // "cuda:0" when a candidate worked (or would, dry run)
  std::vector<std::string> refused;     // "cuda: driver missing: ..."
  Status status = Status::unavailable;  // why the last refusing candidate refused
  std::size_t refusing = 0;             // absorbed attempts that refused something
  bool mixed = false;                   // those attempts refused with different statuses
  bool gpu_failed = false;  // an available non-host plugin failed to create its backend
  std::vector<std::string> ranking;  // auto's candidates, best first (Selection::ranking)

  /// The one way attempts combine: `later` was tried after everything here, so its refusals
  /// follow ours, its status (when it refused something) becomes ours, and its backend, if it
  /// made one, is the result.
  void absorb(Attempt&& later) {
    for (auto& r : later.refused) refused.push_back(std::move(r));
    if (!later.refused.empty()) {
      mixed = mixed || later.mixed || (refusing != 0 && later.status != status);
      status = later.status;
      ++refusing;
    }
    gpu_failed = gpu_failed || later.gpu_failed;
    if (later.backend) backend = std::move(later.backend);
    if (!later.chosen.empty()) chosen = std::move(later.chosen);
    for (auto& r : later.ranking) ranking.push_back(std::move(r));
  }
};

/// The selection algorithm over a snapshot of the entries (run without the registry's lock).
/// `tried_` absorbs every selector item in turn.
class Selector {
 public:
  Selector(std::string_view selector, std::span<const PluginEntry> entries, const Options& options,
           const LayerCatalog& layers, bool dry_run)
      : selector_(selector), entries_(entries), options_(options), layers_(layers),
        dry_run_(dry_run) {}

  SelectionOutcome run() {
    for (const SelectorItem& item : parse_selector(selector_)) {
      tried_.absorb(item.name == "auto" ? try_auto(/*allow_env=*/true) : try_named(item));
      if (!tried_.chosen.empty()) {
        // An expansion ("auto", GPUPLUG_BACKEND) that succeeded still passed over candidates.
        SelectionOutcome out;
        out.selection.backend = std::move(tried_.backend);
        out.selection.chosen = out.selection.backend
                                   ? std::string(out.selection.backend->name())
                                   : std::move(tried_.chosen);
        out.selection.passed_over = std::move(tried_.refused);
        out.selection.ranking = std::move(tried_.ranking);
        out.fallback = fallback(out.selection);
        return out;
      }
      if (item.required) throw_required(item);
    }
    throw_nothing();
  }

 private:
  std::string item_text(const SelectorItem& item) const {
    std::string s = item.name;
    if (item.ordinal) s += ":" + std::to_string(*item.ordinal);
    if (item.uuid) s += ":uuid=" + *item.uuid;
    if (item.pci) s += ":pci=" + to_string(*item.pci);
    return s;
  }

  /// Whether device `d` is the one `item` names by uuid or PCI address.
  static bool names_device(const SelectorItem& item, const DeviceInfo& d) {
    if (item.pci) return d.pci && *d.pci == *item.pci;
    if (!item.uuid || d.uuid.empty()) return false;
    // Case-insensitive, and "GPU-" optional on either side (CUDA_VISIBLE_DEVICES takes both).
    auto bare = [](std::string_view u) {
      std::string out(u.substr(u.size() >= 4 && (u.substr(0, 4) == "GPU-" || u.substr(0, 4) == "gpu-")
                                   ? 4
                                   : 0));
      for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return out;
    };
    return bare(*item.uuid) == bare(d.uuid);
  }

  /// "0 (uuid GPU-..., pci 0000:c1:00.0); 1 (...)": the devices a plugin has, by what a selector
  /// can name them by. Plugin text is escaped: it reaches logs and terminals.
  static std::string device_list(const PluginEntry& e) {
    std::vector<std::string> items;
    for (const DeviceInfo& d : e.info.devices) {
      items.push_back(std::to_string(d.ordinal) + " (uuid " +
                      (d.uuid.empty() ? std::string("none") : support::escape_text(d.uuid)) +
                      ", pci " + (d.pci ? to_string(*d.pci) : std::string("none")) + ")");
    }
    return items.empty() ? "none" : support::join(items, "; ");
  }

  /// The device of `e` that `item` names by uuid or PCI address; else a not_found Attempt that
  /// lists the devices there are.
  std::variant<std::uint32_t, Attempt> device_named(const PluginEntry& e,
                                                    const SelectorItem& item) const {
    for (const DeviceInfo& d : e.info.devices) {
      if (names_device(item, d)) return d.ordinal;
    }
    Attempt a;
    a.status = Status::not_found;
    a.refused.push_back(item_text(item) + ": no such device (" + e.info.name + " has " +
                        device_list(e) + ")");
    return a;
  }

  std::string known_names() const {
    std::vector<std::string_view> names;
    for (const PluginEntry& e : entries_) {
      if (e.info.state != PluginState::failed) names.push_back(e.info.name);
    }
    return names.empty() ? "none" : support::join(names);
  }

  /// The known name closest to `name` (edit distance at most 2), failed plugins included, so that
  /// "cdua" suggests "cuda" even where the cuda plugin failed to load; "" when none is close.
  std::string suggestion(std::string_view name) const {
    std::string best;
    std::size_t best_distance = 3;
    for (const PluginEntry& e : entries_) {
      const std::size_t d = support::edit_distance(name, e.info.name);
      if (d < best_distance) {
        best_distance = d;
        best = e.info.name;
      }
    }
    return best;
  }

  /// The usable entry named `name`, else the first failed one so named, else null.
  const PluginEntry* find(std::string_view name) const {
    const PluginEntry* failed = nullptr;
    for (const PluginEntry& e : entries_) {
      if (e.info.name != name) continue;
      if (e.info.state != PluginState::failed) return &e;
      if (failed == nullptr) failed = &e;
    }
    return failed;
  }

  Attempt try_named(const SelectorItem& item) {
    const PluginEntry* e = find(item.name);
    if (e != nullptr && (item.uuid || item.pci) && e->info.state == PluginState::available) {
      auto named = device_named(*e, item);
      if (auto* refused = std::get_if<Attempt>(&named)) return std::move(*refused);
      return try_entry(*e, std::get<std::uint32_t>(named));
    }
    if (e != nullptr) return try_entry(*e, item.ordinal);
    Attempt a;
    a.status = Status::not_found;
    std::string why = item.name + ": unknown backend (known: " + known_names() + ")";
    if (const std::string near = suggestion(item.name); !near.empty()) {
      why += "; did you mean " + near + "?";
    }
    a.refused.push_back(std::move(why));
    return a;
  }

  /// "; also named 'host': '/p/libgpuplug-x.so' (duplicate_name: ...)": every other candidate
  /// of the name, so that an error about a name shows what each file became.
  std::string other_candidates(const PluginEntry& chosen) const {
    std::string text;
    for (const PluginEntry& e : entries_) {
      if (&e == &chosen || e.info.name != chosen.info.name) continue;
      text += "; also named '" + e.info.name + "': '" + e.info.path.string() + "' (" +
              std::string(to_string(e.info.reason)) + ": " + e.info.message + ")";
    }
    return text;
  }

  Attempt try_entry(const PluginEntry& e, std::optional<std::uint32_t> ordinal) {
    Attempt a;
    const std::string& name = e.info.name;
    if (e.info.state != PluginState::available) {
      // A driver that works but has no device is an absent device (not_found), like an ordinal
      // out of range; anything else about the plugin or its driver is unavailable.
      a.status = e.info.reason == PluginReason::no_device ? Status::not_found : Status::unavailable;
      a.refused.push_back(name + ": " + e.info.message + other_candidates(e));
      return a;
    }
    const auto count = static_cast<std::uint32_t>(e.info.devices.size());
    if (ordinal && *ordinal >= count) {
      a.status = Status::not_found;
      a.refused.push_back(name + ":" + std::to_string(*ordinal) + ": no such device (" + name +
                          " has " + std::to_string(count) + (count == 1 ? " device" : " devices") +
                          ", ordinals 0.." + std::to_string(count - 1) + ")");
      return a;
    }
    const std::uint32_t first = ordinal.value_or(0);
    const std::uint32_t last = ordinal ? *ordinal + 1 : count;
    for (std::uint32_t i = first; i < last; ++i) {
      if (dry_run_) {  // discovery found the device usable: that is all a dry run asks
        a.chosen = name + ":" + std::to_string(i);
        return a;
      }
      try {
        // Loaded into this process only now (isolated discovery probed it in a child).
        const auto [library, table] = acquire_library(e);
        a.backend = std::make_shared<PluginBackend>(library, table, i, options_, layers_);
        a.chosen = std::string(a.backend->name());
        return a;
      } catch (const Error& err) {
        // The plugin refused the caller's options: that is the caller's to fix, whatever else
        // the selector could still try, so it is reported as such rather than as a fallback.
        if (err.status() == Status::invalid_argument && err.operation() == "create") {
          throw Error(Status::invalid_argument, err.backend(), "create",
                      "bad option for selector '" + selector_ + "'" + env_origin() + ": " +
                          err.message());
        }
        a.status = err.status();
        a.refused.push_back(err.what());
      }
    }
    a.gpu_failed = !is_host(name);
    return a;
  }

  Attempt try_auto(bool allow_env) {
    if (allow_env) {
      const std::optional<std::string> env = read_environment("GPUPLUG_BACKEND");
      if (env && env->find_first_not_of(" \t") != std::string::npos && *env != "auto") {
        return try_env(env->c_str());
      }
    }
    // Plugins that cannot be used are passed over first, in discovery order (they rank nowhere);
    // then every device of the usable ones is tried, best ranked first (rank_candidates).
    Attempt all;
    std::vector<Candidate> ranked;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      const PluginEntry& e = entries_[i];
      if (e.info.reason == PluginReason::duplicate_name) continue;  // its namesake speaks for it
      if (e.info.state != PluginState::available || e.info.devices.empty()) {
        all.absorb(try_entry(e, std::nullopt));
        continue;
      }
      for (const DeviceInfo& d : e.info.devices) ranked.push_back({&e, &d, i});
    }
    rank_candidates(ranked);
    std::string winner;
    for (std::size_t r = 0; r < ranked.size(); ++r) {
      const Candidate& c = ranked[r];
      std::string line = std::to_string(r + 1) + ". " + c.entry->info.name + ":" +
                         std::to_string(c.device->ordinal) + " " + describe_rank(*c.entry, *c.device) + ": ";
      if (!winner.empty()) {
        all.ranking.push_back(line + "ranked below " + winner);
        continue;
      }
      Attempt one = try_entry(*c.entry, c.device->ordinal);
      if (!one.chosen.empty()) {
        winner = one.chosen;
        line += dry_run_ ? "would be chosen" : "chosen";
      } else {
        line += "refused (" + (one.refused.empty() ? std::string("no reason") : one.refused.back()) +
                ")";
      }
      all.ranking.push_back(std::move(line));
      all.absorb(std::move(one));
    }
    if (!all.chosen.empty()) return all;
    if (entries_.empty()) {
      std::vector<std::string> searched;
      for (const auto& p : PluginRegistry::search_path()) searched.push_back(p.string());
      all.refused.push_back("auto: no plugins found (searched: " + support::join(searched) + ")");
    }
    all.status = Status::unavailable;  // auto speaks for many plugins, whatever each one said
    return all;
  }

  Attempt try_env(const char* env) {
    std::vector<SelectorItem> items;
    try {
      items = parse_selector(env);
    } catch (const Error& err) {
      throw Error(Status::invalid_argument, "", "GPUPLUG_BACKEND: " + err.message());
    }
    log(LogLevel::debug, channel, std::string("GPUPLUG_BACKEND='") + env + "' replaces 'auto'");
    env_ = env;
    Attempt all;
    for (const SelectorItem& item : items) {
      all.absorb(item.name == "auto" ? try_auto(/*allow_env=*/false) : try_named(item));
      if (all.backend) return all;
      if (item.required) {
        tried_.absorb(std::move(all));
        throw_required(item);
      }
    }
    return all;
  }

  /// " (from GPUPLUG_BACKEND='cdua')" once the variable replaced an "auto", else "": an error
  /// the environment caused names the variable, or the reader looks for it in the code.
  std::string env_origin() const {
    return env_ ? " (from GPUPLUG_BACKEND='" + *env_ + "')" : std::string();
  }

  [[noreturn]] void throw_required(const SelectorItem& item) {
    std::string message = "backend selector '" + selector_ + "'" + env_origin() +
                          ": required backend '" + item_text(item) + "' is not usable: ";
    message += tried_.refused.empty() ? "no candidate" : tried_.refused.back();
    throw Error(tried_.status, "", std::move(message));
  }

  [[noreturn]] void throw_nothing() {
    std::string message = "no backend for selector '" + selector_ + "'" + env_origin() + ": ";
    message += tried_.refused.empty() ? "nothing to try" : support::join(tried_.refused, "; ");
    // One kind of failure keeps its status ("nosuch,nosuch2": not_found); a mix is unavailable.
    const Status status = tried_.mixed ? Status::unavailable : tried_.status;
    throw Error(status, "", std::move(message));
  }

  /// The line to log when `s` passed over a candidate. Passing over a plugin whose driver or
  /// device is missing is the expected case on most machines (a CPU-only host falls back to host
  /// on every start): info, with the reasons in the Selection. A warning only when a GPU that
  /// discovery found usable then failed to create its backend, which is not expected.
  std::optional<std::pair<LogLevel, std::string>> fallback(const Selection& s) const {
    const std::string text = "selector '" + selector_ + "': " + s.explain();
    if (s.passed_over.empty()) {
      log(LogLevel::debug, channel, text);
      return std::nullopt;
    }
    return std::make_pair(tried_.gpu_failed ? LogLevel::warning : LogLevel::info, text);
  }

  std::string selector_;
  std::span<const PluginEntry> entries_;
  const Options& options_;
  const LayerCatalog& layers_;
  bool dry_run_ = false;  // dry_run(): say what would be chosen, create nothing
  Attempt tried_;  // every selector item tried so far
  std::optional<std::string> env_;  // GPUPLUG_BACKEND, once it replaced an "auto"
};

}  // namespace

SelectionOutcome select_backend(std::string_view selector, std::span<const PluginEntry> entries,
                                const Options& options, const LayerCatalog& layers,
                                bool dry_run) {
  return Selector(selector, entries, options, layers, dry_run).run();
}

}  // namespace detail

}  // namespace gpuplug
