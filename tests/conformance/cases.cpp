// SPDX-License-Identifier: Apache-2.0
// The conformance runner: contexts, targets, the registry of cases and the verdict of one case.
#include "cases.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>

#include "gpuplug/support/files.hpp"
#include "helpers.hpp"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPUPLUG_CONF_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define GPUPLUG_CONF_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define GPUPLUG_CONF_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define GPUPLUG_CONF_TSAN 1
#endif

namespace gpuplug::conformance {

// ---- targets ---------------------------------------------------------------------------------

std::string Target::backend_name() const { return plugin + ":" + std::to_string(ordinal); }
std::string Target::selector() const { return backend_name() + "!"; }

std::filesystem::path Target::kernel_dir() const {
  return (plugin_file.parent_path() / ".." / "kernels" / plugin).lexically_normal();
}

// ---- Context ---------------------------------------------------------------------------------

std::string flat_modules_warning(const std::filesystem::path& folder, std::string_view plugin) {
  std::error_code ec;
  if (std::filesystem::is_directory(folder / std::string(plugin), ec)) return {};
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    if (entry.is_regular_file(ec)) {
      return "--modules '" + folder.string() + "' holds module files directly (the flat layout, " +
             "still read in this release): put them in " +
             (folder / std::string(plugin)).string() + "/, one subfolder per plugin";
    }
  }
  return {};
}

Context::Context(const Target& target) : target_(target) {}

Context::~Context() = default;

GpuBackend& Context::backend() {
  if (!backend_) backend_ = make_backend();
  return *backend_;
}

std::shared_ptr<GpuBackend> Context::make_backend(const Options& options) {
  auto gpu = target_.registry->create(target_.selector(), options);
  if (!gpu) fail("registry.create(\"" + target_.selector() + "\") returned null");
  if (gpu->plugin_name() != target_.plugin || gpu->ordinal() != target_.ordinal) {
    fail("registry.create(\"" + target_.selector() + "\") made " + std::string(gpu->name()) +
         ", not " + target_.backend_name());
  }
  return gpu;
}

std::uint32_t Context::plugin_abi_version() const {
  for (const PluginInfo& p : target_.registry->plugins()) {
    if (p.name == target_.plugin && p.abi_version != 0) return p.abi_version;
  }
  fail("the registry lists no plugin '" + target_.plugin + "' with an ABI version");
}

void Context::require_abi_minor(std::uint32_t minor, std::string_view convention) const {
  const std::uint32_t v = plugin_abi_version();
  if (GPUPLUG_ABI_MAJOR(v) == GPUPLUG_ABI_VERSION_MAJOR && GPUPLUG_ABI_MINOR(v) < minor) {
    skip(std::string(convention) + " is a convention of ABI 1." + std::to_string(minor) +
         "; the plugin declares ABI " + std::to_string(GPUPLUG_ABI_MAJOR(v)) + "." +
         std::to_string(GPUPLUG_ABI_MINOR(v)));
  }
}

GpuBackend& Context::reference() {
  if (!reference_) {
    if (!target_.reference_registry) skip("no host reference backend: no registry to make it from");
    try {
      reference_ = target_.reference_registry->create("host!");
    } catch (const gpuplug::Error& e) {
      skip(std::string("the host reference backend is unavailable: ") + e.what());
    }
    // Testing host itself, the reference is the same implementation on the same device: a
    // comparison with it can only find nondeterminism, never a wrong result, and the row says so.
    if (reference_->plugin_name() == target_.plugin && reference_->ordinal() == target_.ordinal)
      note("reference is the backend itself (" + target_.backend_name() +
           "): nothing was compared against an independent implementation");
  }
  return *reference_;
}

std::vector<std::byte> Context::module_image(std::string_view module) const {
  const auto dir = target_.kernel_dir();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().stem() == module) {
      std::string why;
      auto bytes = support::read_file(entry.path(), why);
      if (!bytes) fail("cannot read " + entry.path().string() + ": " + why);
      return std::move(*bytes);
    }
  }
  skip("no image of module '" + std::string(module) + "' in " + dir.string() +
       (ec ? " (" + ec.message() + ")" : std::string()));
}

namespace {
/// The file of `module` (any extension) in `dir`, or an empty path.
std::filesystem::path module_file_in(const std::filesystem::path& dir, std::string_view module) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().stem() == module) return entry.path();
  }
  return {};
}
}  // namespace

void Context::load_module(GpuBackend& gpu, std::string_view module) {
  if (gpu.has_module(module)) return;
  const std::string plugin(gpu.plugin_name());
  std::vector<std::filesystem::path> dirs;
  if (!target_.user_modules.empty()) {
    // <folder>/<plugin>/ is the layout; a folder without that subfolder is read flat for one
    // release (gpuplug check warns once, in its header: flat_modules_warning).
    std::error_code ec;
    const auto per_plugin = target_.user_modules / plugin;
    dirs.push_back(std::filesystem::is_directory(per_plugin, ec) ? per_plugin
                                                                  : target_.user_modules);
  }
  if (plugin == target_.plugin) dirs.push_back(target_.kernel_dir());
  for (const auto& dir : dirs) {
    if (auto file = module_file_in(dir, module); !file.empty()) {
      gpu.load_module_file(module, file);
      return;
    }
  }
  const std::string what = "no image of module '" + std::string(module) + "' for plugin '" +
                           plugin + "'";
  if (target_.user_modules.empty()) {
    // Without --modules the run was never told where the cases' modules are: not applicable.
    skip(what + (dirs.empty() ? std::string(" (the run has no modules folder: --modules DIR)")
                              : " in " + dirs.back().string()));
  }
  // With --modules the run names where they are, so not finding one there is the run's mistake,
  // never a reason to skip: a typo in the folder would otherwise pass every case unseen.
  const std::filesystem::path& folder = target_.user_modules;
  std::error_code ec;
  const bool exists = std::filesystem::is_directory(folder, ec);
  fail(what + " in the --modules folder '" + folder.string() + "' (" +
       (exists ? "looked in " + dirs.front().string() +
                     (plugin == target_.plugin ? " and " + target_.kernel_dir().string() : "")
               : std::string("the folder does not exist")) +
       "; the layout is <folder>/<plugin>/<module>.*)");
}

void Context::note(std::string text) { notes_.push_back(std::move(text)); }

void Context::finish() {
  if (!backend_) return;
  GpuBackend& gpu = *backend_;
  gpu.synchronize();
  gpu.op_cache().release(gpu);
  const LedgerStats stats = gpu.ledger_stats();
  if (stats.live_count != 0) {
    const std::string report = gpu.alloc_report(5);
    {
      ScopedLogLevel quiet(LogLevel::error);  // the sweep's warning would repeat what we report
      gpu.sweep_unreleased();
    }
    fail("the case left " + std::to_string(stats.live_count) + " allocation(s), " +
         std::to_string(stats.live_bytes) +
         " bytes, on the ledger after OpCache::release: " + report);
  }
}

// ---- the registry of cases -------------------------------------------------------------------

std::span<const Case> all_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> all;
    for (auto area :
         {detail::memory_cases, detail::device_cases, detail::stream_cases,
          detail::launch_args_cases, detail::module_cases, detail::opcache_cases,
          detail::concurrency_cases, detail::differential_cases, detail::lifecycle_cases,
          detail::event_cases, detail::peer_cases, detail::pinned_cases, detail::skew_cases,
          detail::pitched_cases, detail::graph_cases, detail::arena_cases}) {
      const auto list = area();
      all.insert(all.end(), list.begin(), list.end());
    }
    return all;
  }();
  return cases;
}

// ---- running ---------------------------------------------------------------------------------

std::string_view to_string(Outcome o) noexcept {
  switch (o) {
    case Outcome::passed:
      return "passed";
    case Outcome::failed:
      return "FAILED";
    case Outcome::skipped:
      return "skipped";
    case Outcome::xfail:
      return "xfail";
    case Outcome::xpass:
      return "XPASS";
  }
  return "?";
}

Result run_case(const Case& c, const Target& target, const KnownFailures& known) {
  Result r;
  const auto known_reason = known.reason(target.plugin, c.name);
  if (known_reason && known_reason->starts_with("crash")) {
    // A case that takes the process down cannot report; it is listed, not run.
    r.outcome = Outcome::xfail;
    r.reason = "known failure, not run: " + *known_reason;
    return r;
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    Context ctx(target);
    c.run(ctx);
    ctx.finish();
    r.notes = ctx.notes();
  } catch (const CheckFailure& f) {
    r.outcome = Outcome::failed;
    r.reason = f.what();
    // A bare check prints only its expression and a line of a source file the kit does not
    // install: say in words what the case was checking, so the line stands on its own.
    if (f.message().starts_with("check failed: ") && !c.summary.empty())
      r.reason += "; the case checks that " + std::string(c.summary);
  } catch (const Skip& s) {
    r.outcome = Outcome::skipped;
    r.reason = s.what();
  } catch (const gpuplug::Error& e) {
    r.outcome = Outcome::failed;
    r.reason = "unexpected " + detail::describe(e);
  } catch (const std::exception& e) {
    r.outcome = Outcome::failed;
    r.reason = std::string("unexpected exception: ") + e.what();
  } catch (...) {
    r.outcome = Outcome::failed;
    r.reason = "unexpected exception of unknown type";
  }
  r.elapsed = std::chrono::steady_clock::now() - start;

  if (const auto& why = known_reason) {
    if (r.outcome == Outcome::failed) {
      r.outcome = Outcome::xfail;
      r.reason = "known failure: " + *why + " [" + r.reason + "]";
    } else if (r.outcome == Outcome::passed) {
      r.outcome = Outcome::xpass;
      r.reason =
          "listed as a known failure (" + *why + ") but passed: remove it from known_failures.txt";
    }
  }
  return r;
}

void Tally::add(Outcome o) noexcept {
  switch (o) {
    case Outcome::passed:
      ++passed;
      break;
    case Outcome::failed:
    case Outcome::xpass:
      ++failed;
      break;
    case Outcome::skipped:
    case Outcome::xfail:
      ++skipped;
      break;
  }
}

std::string Tally::line() const {
  return std::to_string(passed) + " passed, " + std::to_string(failed) + " failed, " +
         std::to_string(skipped) + " skipped";
}

// ---- environment -----------------------------------------------------------------------------

std::string_view sanitizer_name() noexcept {
#if defined(GPUPLUG_CONF_ASAN)
  return "AddressSanitizer";
#elif defined(GPUPLUG_CONF_TSAN)
  return "ThreadSanitizer";
#else
  // Built without one, this process may still run a sanitizer's runtime: an instrumented plugin
  // checked by the installed (uninstrumented) gpuplug tool needs its runtime LD_PRELOADed, and
  // then RSS and timing mean what they mean under that sanitizer. The runtime's entry points are
  // then in the global scope; asked on every call (not cached), so that the answer holds after
  // the plugin is loaded.
  static constexpr std::pair<const char*, std::string_view> runtimes[] = {
      {"__asan_init", "AddressSanitizer"},
      {"__hwasan_init", "HWAddressSanitizer"},
      {"__tsan_init", "ThreadSanitizer"},
      {"__msan_init", "MemorySanitizer"},
  };
  for (const auto& [symbol, name] : runtimes)
    if (dlsym(RTLD_DEFAULT, symbol) != nullptr) return name;
  return "";
#endif
}

std::size_t lifecycle_cycles() {
  if (const char* env = std::getenv("GPUPLUG_CONFORMANCE_CYCLES"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0' && n > 0) return static_cast<std::size_t>(n);
  }
  return sanitizer_name().empty() ? 1000 : 100;
}

namespace {

std::shared_ptr<PluginRegistry> discovered_registry() {
  auto registry = std::make_shared<PluginRegistry>();
  registry->discover();
  return registry;
}

Target make_target(const PluginInfo& info, std::uint32_t ordinal,
                   std::shared_ptr<PluginRegistry> registry) {
  Target t;
  t.plugin = info.name;
  t.ordinal = ordinal;
  t.plugin_file = info.path;
  t.reference_registry = registry;
  t.registry = std::move(registry);
  t.make_registry = discovered_registry;
  return t;
}

}  // namespace

Discovered discover_targets(std::string_view selector_filter) {
  Discovered out;
  auto registry = discovered_registry();
  const auto plugins = registry->plugins();

  std::vector<SelectorItem> wanted;
  if (!selector_filter.empty()) {
    for (auto& item : parse_selector(selector_filter)) {
      if (item.name != "auto") wanted.push_back(std::move(item));
    }
  }
  auto add = [&](const PluginInfo& info, std::uint32_t ordinal) {
    if (info.state == PluginState::available && ordinal < info.devices.size()) {
      out.targets.push_back(make_target(info, ordinal, registry));
    } else {
      PluginInfo copy = info;
      if (info.state == PluginState::available) {
        copy.state = PluginState::unavailable;
        copy.reason = PluginReason::no_device;
        copy.message = "no device " + std::to_string(ordinal) + " (" +
                       std::to_string(info.devices.size()) + " device(s) found)";
      }
      out.unavailable.push_back(std::move(copy));
    }
  };

  if (wanted.empty()) {
    for (const auto& info : plugins) add(info, 0);
    return out;
  }
  for (const auto& item : wanted) {
    const auto it = std::find_if(plugins.begin(), plugins.end(), [&](const PluginInfo& p) {
      return p.name == item.name && p.state == PluginState::available;
    });
    const auto any = it != plugins.end()
                         ? it
                         : std::find_if(plugins.begin(), plugins.end(),
                                        [&](const PluginInfo& p) { return p.name == item.name; });
    const std::uint32_t ordinal = item.ordinal.value_or(0);
    if (any == plugins.end()) {
      PluginInfo missing;
      missing.name = item.name;
      missing.state = PluginState::unavailable;
      missing.message = "no plugin named '" + item.name + "' was found";
      out.unavailable.push_back(missing);
    } else {
      add(*any, ordinal);
    }
    const bool ran = !out.targets.empty() && out.targets.back().plugin == item.name &&
                     out.targets.back().ordinal == ordinal;
    if (item.required && !ran)
      out.required_missing.push_back(item.name + ":" + std::to_string(ordinal) + "!");
  }
  return out;
}

Target target_for_selector(std::string_view selector) {
  auto registry = discovered_registry();
  const Selection selection = registry->select(selector);
  const auto& gpu = *selection.backend;
  const auto plugins = registry->plugins();
  const auto it = std::find_if(plugins.begin(), plugins.end(), [&](const PluginInfo& p) {
    return p.name == gpu.plugin_name() && p.state == PluginState::available;
  });
  if (it == plugins.end()) {
    throw Error(Status::internal, std::string(gpu.name()),
                "the registry made a backend of a plugin it does not list");
  }
  return make_target(*it, gpu.ordinal(), registry);
}

Target target_for_plugin_file(const std::filesystem::path& file, std::uint32_t ordinal) {
  auto registry = std::make_shared<PluginRegistry>();
  const PluginInfo info = registry->add_plugin_file(file);
  if (info.state != PluginState::available) {
    throw Error(Status::unavailable, info.name,
                std::string(to_string(info.state)) + " (" + std::string(to_string(info.reason)) +
                    "): " + info.message);
  }
  if (ordinal >= info.devices.size()) {
    throw Error(Status::unavailable, info.name,
                "no device " + std::to_string(ordinal) + " (" +
                    std::to_string(info.devices.size()) + " found)");
  }
  Target t = make_target(info, ordinal, registry);
  t.make_registry = [file] {
    auto r = std::make_shared<PluginRegistry>();
    r->add_plugin_file(file);
    return r;
  };
  // The reference host backend comes from the normal search path.
  t.reference_registry = discovered_registry();
  return t;
}

}  // namespace gpuplug::conformance
