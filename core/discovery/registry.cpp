// SPDX-License-Identifier: Apache-2.0
// PluginRegistry: the plugins found (discover), and backends made from them (select). Loading
// one file is core/plugin_loader.cpp's; the selection policy is core/selector.cpp's.
#include <dlfcn.h>
#include <unistd.h>

#include <boost/dll/shared_library.hpp>
#include <charconv>
#include <cmath>
#include <gpuplug/log.hpp>
#include <gpuplug/registry.hpp>
#include <set>
#include <type_traits>
#include <utility>

#include "logging/environment.hpp"
#include "discovery/isolated_probe.hpp"
#include "discovery/module_inspection.hpp"
#include "discovery/plugin_loader.hpp"
#include "discovery/selector.hpp"

#ifndef GPUPLUG_BUILD_PLUGIN_DIR
#define GPUPLUG_BUILD_PLUGIN_DIR ""
#endif

namespace gpuplug {

namespace fs = std::filesystem;
using detail::PluginEntry;

std::string_view to_string(PluginState s) noexcept {
  switch (s) {
    case PluginState::available:
      return "available";
    case PluginState::unavailable:
      return "unavailable";
    case PluginState::failed:
      return "failed";
  }
  return "unknown";
}

std::string_view to_string(PluginReason r) noexcept {
  switch (r) {
    case PluginReason::none:
      return "none";
    case PluginReason::not_a_shared_object:
      return "not_a_shared_object";
    case PluginReason::missing_dependency:
      return "missing_dependency";
    case PluginReason::missing_entry_symbol:
      return "missing_entry_symbol";
    case PluginReason::entry_returned_null:
      return "entry_returned_null";
    case PluginReason::abi_mismatch:
      return "abi_mismatch";
    case PluginReason::table_too_small:
      return "table_too_small";
    case PluginReason::duplicate_name:
      return "duplicate_name";
    case PluginReason::driver_missing:
      return "driver_missing";
    case PluginReason::driver_too_old:
      return "driver_too_old";
    case PluginReason::no_device:
      return "no_device";
    case PluginReason::probe_failed:
      return "probe_failed";
    case PluginReason::crashed:
      return "crashed";
    case PluginReason::exited:
      return "exited";
    case PluginReason::timed_out:
      return "timed_out";
    case PluginReason::untrusted_path:
      return "untrusted_path";
    case PluginReason::not_a_regular_file:
      return "not_a_regular_file";
    case PluginReason::load_failed:
      return "load_failed";
  }
  return "unknown";
}

std::string_view to_string(ProbeMode m) noexcept {
  switch (m) {
    case ProbeMode::isolated:
      return "isolated";
    case ProbeMode::in_process:
      return "inprocess";
  }
  return "unknown";
}

namespace {

constexpr std::string_view channel = "registry";

/// The folder libgpuplug.so was loaded from: the same code finds `<libdir>/gpuplug/plugins`
/// in the build tree and in an install tree.
std::optional<fs::path> core_library_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&core_library_dir), &info) == 0 ||
      info.dli_fname == nullptr) {
    return std::nullopt;
  }
  std::error_code ec;
  fs::path lib = fs::weakly_canonical(fs::path(info.dli_fname), ec);
  if (ec) lib = fs::path(info.dli_fname);
  return lib.parent_path();
}

fs::path canonical_or_self(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p : c;
}

/// GPUPLUG_PLUGIN_PATH split at ':' (empty elements skipped). Relative elements are refused:
/// they would resolve against whatever the current directory happens to be; `warn` logs that.
std::vector<fs::path> env_plugin_path(bool warn) {
  std::vector<fs::path> path;
  const std::optional<std::string> env = detail::read_environment("GPUPLUG_PLUGIN_PATH");
  if (!env) return path;
  std::string_view rest(*env);
  while (!rest.empty()) {
    const auto colon = rest.find(':');
    const std::string_view part = rest.substr(0, colon);
    if (!part.empty() && part.front() != '/') {
      if (warn) {
        log(LogLevel::warning, channel,
            "ignoring relative GPUPLUG_PLUGIN_PATH element '" + std::string(part) +
                "' (plugin folders must be absolute paths)");
      }
    } else if (!part.empty()) {
      path.emplace_back(std::string(part));
    }
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return path;
}

/// The search path (see search_path) and how many of its elements came from the environment.
std::pair<std::vector<fs::path>, std::size_t> plugin_search_path(bool warn) {
  std::vector<fs::path> path = env_plugin_path(warn);
  const std::size_t from_env = path.size();
  // The installed folder is found next to libgpuplug.so, which in the build tree *is* the build
  // tree's plugin folder. The compiled-in build folder is therefore only a fallback for when the
  // core cannot locate itself: searching it from an install would list a second "host" whenever
  // the build tree still exists.
  auto add_default = [&path](const fs::path& dir) {
    const fs::path canonical = canonical_or_self(dir);
    for (const fs::path& p : path) {
      if (canonical_or_self(p) == canonical) return;
    }
    path.push_back(dir);
  };
  if (auto dir = core_library_dir()) {
    add_default(*dir / "gpuplug" / "plugins");
  } else if (std::string_view(GPUPLUG_BUILD_PLUGIN_DIR).size() != 0) {
    add_default(GPUPLUG_BUILD_PLUGIN_DIR);
  }
  return {std::move(path), from_env};
}

/// How this discovery probes: the options, else GPUPLUG_PROBE / GPUPLUG_PROBE_TIMEOUT, else
/// isolated with 10 s. A bad variable is reported and ignored.
struct ProbeSettings {
  ProbeMode mode = ProbeMode::isolated;
  std::chrono::milliseconds timeout{10'000};
};

ProbeSettings probe_settings(const DiscoveryOptions& options) {
  ProbeSettings s;
  if (options.probe_mode) {
    s.mode = *options.probe_mode;
  } else if (auto env = detail::read_environment("GPUPLUG_PROBE")) {
    if (*env == "inprocess" || *env == "in_process") {
      s.mode = ProbeMode::in_process;
    } else if (*env != "isolated") {
      log(LogLevel::warning, channel,
          "ignoring GPUPLUG_PROBE='" + *env + "' (expected isolated or inprocess)");
    }
  }
  if (options.probe_timeout) {
    s.timeout = std::max(*options.probe_timeout, std::chrono::milliseconds(1));
  } else if (auto env = detail::read_environment("GPUPLUG_PROBE_TIMEOUT")) {
    double seconds = 0;
    const auto [ptr, ec] = std::from_chars(env->data(), env->data() + env->size(), seconds);
    if (ec == std::errc() && ptr == env->data() + env->size() && std::isfinite(seconds) &&
        seconds > 0 && seconds <= 86400) {
      s.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(seconds * 1000)));
    } else {
      log(LogLevel::warning, channel,
          "ignoring GPUPLUG_PROBE_TIMEOUT='" + *env + "' (expected seconds, e.g. 10 or 0.5)");
    }
  }
  return s;
}

/// The gpuplug-probe helper beside libgpuplug.so (<libdir>/gpuplug/gpuplug-probe), when it is
/// there and executable. Missing, it is reported (once per process) and probing runs in-process.
std::optional<fs::path> probe_helper() {
  const auto dir = core_library_dir();
  const fs::path helper = dir ? *dir / "gpuplug" / "gpuplug-probe" : fs::path("gpuplug-probe");
  if (dir && ::access(helper.c_str(), X_OK) == 0) return helper;
  static std::once_flag warned;
  std::call_once(warned, [&helper] {
    log(LogLevel::warning, channel,
        "probe helper '" + helper.string() +
            "' not found or not executable; plugins are probed in this process, where a crash "
            "in a plugin ends the program");
  });
  return std::nullopt;
}

/// Checks and probes `candidates` (file, real path) in `settings`' mode; one entry each, in order.
std::vector<PluginEntry> probe_all(const std::vector<std::pair<fs::path, fs::path>>& candidates,
                                   const ProbeSettings& settings) {
  std::vector<PluginEntry> entries(candidates.size());
  std::vector<detail::ProbeJob> jobs;
  std::vector<std::size_t> job_index;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const auto& [file, canonical] = candidates[i];
    PluginEntry& e = entries[i];
    e.info.path = file;
    e.info.name = detail::name_from_file(file);
    e.canonical = canonical;
    if (auto why = detail::preflight(file)) {
      e.info.state = PluginState::failed;
      e.info.reason = why->reason;
      e.info.message = std::move(why->message);
      continue;
    }
    jobs.push_back({file, canonical});
    job_index.push_back(i);
  }
  std::optional<fs::path> helper;
  if (settings.mode == ProbeMode::isolated && !jobs.empty()) helper = probe_helper();
  if (helper) {
    std::vector<PluginEntry> probed = detail::probe_isolated(jobs, *helper, settings.timeout);
    for (std::size_t k = 0; k < jobs.size(); ++k) entries[job_index[k]] = std::move(probed[k]);
  } else {
    for (std::size_t k = 0; k < jobs.size(); ++k) {
      entries[job_index[k]] = detail::load_plugin(jobs[k].file, jobs[k].canonical);
    }
  }
  return entries;
}

void log_entry(const PluginEntry& e) {
  log(LogLevel::debug, channel,
      "'" + e.info.path.string() + "': " + std::string(to_string(e.info.state)) +
          (e.info.message.empty() ? "" : " (" + e.info.message + ")"));
}

}  // namespace

struct PluginRegistry::Impl {
  mutable std::mutex mutex;
  std::vector<PluginEntry> entries;  // discovery order; guarded by mutex
  std::set<std::string> logged;      // fallbacks already logged (each is logged once)
  bool discovered = false;           // discover() or add_plugin_file() ran; guarded by mutex
  detail::LayerCatalog layers;       // built-in and added layers; guarded by mutex
};

PluginRegistry::PluginRegistry() : impl_(std::make_unique<Impl>()) {}
PluginRegistry::~PluginRegistry() = default;

std::vector<fs::path> PluginRegistry::search_path() { return plugin_search_path(false).first; }

void PluginRegistry::discover(const DiscoveryOptions& options) {
  const auto [path, from_env] = plugin_search_path(/*warn=*/true);
  const ProbeSettings settings = probe_settings(options);
  std::vector<std::pair<fs::path, fs::path>> candidates;
  std::set<fs::path> seen;
  for (std::size_t i = 0; i < path.size(); ++i) {
    for (const fs::path& file : detail::plugin_candidates(path[i], i < from_env)) {
      fs::path canonical = canonical_or_self(file);
      if (!seen.insert(canonical).second) continue;  // the same file reached twice
      candidates.emplace_back(file, std::move(canonical));
    }
  }
  // Probing runs without the lock: it can take up to the probe timeout.
  std::vector<PluginEntry> found = probe_all(candidates, settings);
  detail::resolve_duplicates(found);
  for (const PluginEntry& e : found) log_entry(e);
  std::lock_guard lock(impl_->mutex);
  impl_->entries = std::move(found);
  impl_->discovered = true;
}

PluginInfo PluginRegistry::add_plugin_file(const fs::path& file, const DiscoveryOptions& options) {
  const fs::path canonical = canonical_or_self(file);
  {
    std::lock_guard lock(impl_->mutex);
    for (const PluginEntry& e : impl_->entries) {
      if (e.canonical == canonical) return e.info;
    }
  }
  std::vector<PluginEntry> probed = probe_all({{file, canonical}}, probe_settings(options));
  log_entry(probed.front());
  std::lock_guard lock(impl_->mutex);
  impl_->discovered = true;
  for (const PluginEntry& e : impl_->entries) {
    if (e.canonical == canonical) return e.info;  // added meanwhile by another thread
  }
  impl_->entries.push_back(std::move(probed.front()));
  // Earlier entries keep their names: the new file is the later candidate.
  detail::resolve_duplicates(impl_->entries);
  return impl_->entries.back().info;
}

std::vector<PluginInfo> PluginRegistry::plugins() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<PluginInfo> out;
  out.reserve(impl_->entries.size());
  for (const PluginEntry& e : impl_->entries) out.push_back(e.info);
  return out;
}

namespace {

/// The registry knows no plugin until it has looked: say so instead of "unknown backend".
void require_discovered(bool discovered, std::string_view selector) {
  if (discovered) return;
  parse_selector(selector);  // a malformed selector is still reported as such
  throw Error(Status::not_found, "", "select",
              "no plugins discovered: call discover() first (selector '" + std::string(selector) +
                  "')");
}

/// The entries to select among, copied under the lock (selecting can take long, driver init, and
/// must not hold it; the copies share their LoadedPlugin with the registry's entries, so a
/// library loaded for a selection stays with the registry). Throws as require_discovered.
std::vector<PluginEntry> selectable_entries(std::mutex& mutex,
                                            const std::vector<PluginEntry>& entries,
                                            const bool& discovered, std::string_view selector) {
  std::vector<PluginEntry> snapshot;
  bool was_discovered = false;
  {
    std::lock_guard lock(mutex);
    snapshot = entries;
    was_discovered = discovered;
  }
  require_discovered(was_discovered, selector);
  return snapshot;
}

}  // namespace

std::shared_ptr<GpuBackend> PluginRegistry::create(std::string_view selector,
                                                   const Options& options) {
  return select(selector, options).backend;
}

Selection PluginRegistry::select(std::string_view selector, const Options& options) {
  const std::vector<PluginEntry> snapshot =
      selectable_entries(impl_->mutex, impl_->entries, impl_->discovered, selector);
  detail::LayerCatalog layers;
  {
    std::lock_guard lock(impl_->mutex);
    layers = impl_->layers;
  }
  detail::SelectionOutcome outcome =
      detail::select_backend(selector, snapshot, options, layers);
  if (auto& fallback = outcome.fallback) {
    bool first;
    {
      std::lock_guard lock(impl_->mutex);
      first = impl_->logged.insert(fallback->second).second;
    }
    if (first) log(fallback->first, channel, fallback->second);
  }
  return std::move(outcome.selection);
}

Selection PluginRegistry::dry_run(std::string_view selector) const {
  const std::vector<PluginEntry> snapshot =
      selectable_entries(impl_->mutex, impl_->entries, impl_->discovered, selector);
  const Options none{};
  const detail::LayerCatalog layers;  // a dry run creates nothing, so enables no layer
  return detail::select_backend(selector, snapshot, none, layers, /*dry_run=*/true).selection;
}

ModuleInspection PluginRegistry::inspect_module(std::string_view plugin, std::uint32_t ordinal,
                                                std::span<const std::byte> image) const {
  std::vector<PluginEntry> snapshot;
  {
    std::lock_guard lock(impl_->mutex);
    snapshot = impl_->entries;
  }
  return detail::inspect_module(snapshot, plugin, ordinal, image);  // module_inspection.cpp
}

// ---- layers (docs/layers.md) ---------------------------------------------------------------------

void PluginRegistry::add_layer(const gpuplug_layer_v1& layer) {
  std::lock_guard lock(impl_->mutex);
  impl_->layers.add(layer, "the application");
}

std::string PluginRegistry::add_layer_file(const fs::path& file) {
  const std::string who = file.string();
  // A layer file is trusted no more than a plugin file: the same checks before it is loaded.
  const auto library = detail::load_checked_library(file, "add_layer_file");
  if (!library->has(GPUPLUG_LAYER_ENTRY_SYMBOL)) {
    throw Error(Status::invalid_argument, who, "add_layer_file",
                "not a gpuplug layer: it does not export " GPUPLUG_LAYER_ENTRY_SYMBOL);
  }
  const auto entry = library->get<std::remove_pointer_t<gpuplug_layer_entry_fn>>(
      GPUPLUG_LAYER_ENTRY_SYMBOL);
  const gpuplug_layer_v1* layer = entry(GPUPLUG_LAYER_VERSION);
  if (layer == nullptr) {
    throw Error(Status::invalid_argument, who, "add_layer_file",
                "the layer does not speak layer version " + std::to_string(GPUPLUG_LAYER_VERSION) +
                    " (" GPUPLUG_LAYER_ENTRY_SYMBOL " returned null)");
  }
  std::lock_guard lock(impl_->mutex);
  try {
    impl_->layers.add(*layer, who, library);
  } catch (const Error& e) {
    throw Error(e.status(), who, "add_layer_file", e.backend() + ": " + e.message());
  }
  return impl_->layers.entries().back()->name;
}

std::vector<LayerInfo> PluginRegistry::layers() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<LayerInfo> out;
  for (const auto& e : impl_->layers.entries())
    out.push_back(LayerInfo{e->name, e->summary, e->origin, e->option_keys});
  return out;
}

}  // namespace gpuplug
