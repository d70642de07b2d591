// SPDX-License-Identifier: Apache-2.0
// The selection policy: what a parsed selector (selector_parse.cpp) picks from the discovered
// plugins, auto's ranked tries (selector_rank.hpp), and the errors and fallbacks that say why.
#include "discovery/selector.hpp"

#include <algorithm>
#include <cctype>
#include <gpuplug/support/edit_distance.hpp>
#include <gpuplug/support/escape.hpp>
#include <gpuplug/support/text.hpp>
#include <memory>
#include <utility>
#include <variant>
#include <vector>

#include "logging/environment.hpp"
#include "table/plugin_backend.hpp"
#include "discovery/selector_rank.hpp"

namespace gpuplug {

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

/// One device that auto may choose, with where it ranks.
struct Candidate {
  const PluginEntry* entry;
  const DeviceInfo* device;
  Rank rank;
};

/// What trying one or more candidates gave, in the order they were tried.
struct Attempt {
  std::shared_ptr<GpuBackend> backend;  // set when a candidate worked
  std::string chosen;                   // "cuda:0" when a candidate worked (or would, dry run)
  std::vector<std::string> refused;     // "cuda: driver missing: ..."
  Status status = Status::unavailable;  // why the last refusing candidate refused
  std::size_t refusing = 0;             // absorbed attempts that refused something
  bool mixed = false;                   // those attempts refused with different statuses
  bool gpu_failed = false;  // an available non-host plugin failed to create its backend
  std::vector<RankedDevice> ranking;  // auto's candidates, best first (Selection::ranking)

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
        for (const RankedDevice& r : tried_.ranking)
          out.selection.ranking.push_back(to_string(r));
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
                          complete_unknown_option(err.message(), layers_));
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
    // then every device of the usable ones is tried, best ranked first (ranks_before).
    Attempt all;
    std::vector<Candidate> ranked;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      const PluginEntry& e = entries_[i];
      if (e.info.reason == PluginReason::duplicate_name) continue;  // its namesake speaks for it
      if (e.info.state != PluginState::available || e.info.devices.empty()) {
        all.absorb(try_entry(e, std::nullopt));
        continue;
      }
      for (const DeviceInfo& d : e.info.devices) {
        ranked.push_back({&e, &d, rank_of(e, d, i)});
        ranked.back().rank.native_route = native_route_of(e, d, entries_);
      }
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const Candidate& a, const Candidate& b) {
      return ranks_before(a.rank, b.rank);
    });
    std::string winner;
    for (std::size_t r = 0; r < ranked.size(); ++r) {
      const Candidate& c = ranked[r];
      RankedDevice line{r + 1, c.entry->info.name + ":" + std::to_string(c.device->ordinal),
                        c.rank};
      if (!winner.empty()) {
        line.fate = RankedDevice::Fate::ranked_below;
        line.detail = winner;
        all.ranking.push_back(std::move(line));
        continue;
      }
      Attempt one = try_entry(*c.entry, c.device->ordinal);
      if (!one.chosen.empty()) {
        winner = one.chosen;
        line.fate = dry_run_ ? RankedDevice::Fate::would_be_chosen : RankedDevice::Fate::chosen;
      } else {
        line.fate = RankedDevice::Fate::refused;
        if (!one.refused.empty()) line.detail = one.refused.back();
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
      throw Error(Status::invalid_argument, "", "select", "GPUPLUG_BACKEND: " + err.message());
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
    throw Error(tried_.status, "", "select", std::move(message));
  }

  [[noreturn]] void throw_nothing() {
    std::string message = "no backend for selector '" + selector_ + "'" + env_origin() + ": ";
    message += tried_.refused.empty() ? "nothing to try" : support::join(tried_.refused, "; ");
    // One kind of failure keeps its status ("nosuch,nosuch2": not_found); a mix is unavailable.
    const Status status = tried_.mixed ? Status::unavailable : tried_.status;
    throw Error(status, "", "select", std::move(message));
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
