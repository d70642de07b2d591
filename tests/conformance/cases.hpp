// SPDX-License-Identifier: Apache-2.0
// The conformance suite's case registry, context and checks, shared by test_conformance and
// `gpuplug check`.
#pragma once

// One list of cases, two runners. A case is a plain function `void(Context&)` that drives the
// GpuBackend under test through the public C++ API and throws CheckFailure (through the
// GPUPLUG_CHECK* macros below) when the backend breaks the contract of DESIGN.md, or Skip when
// the contract does not apply to this device (no managed memory, say). The Boost.Test suite
// (test_conformance.cpp) and `gpuplug check` (tools/gpuplug/check.cpp) both run every case
// through run_case(), so a plugin author's `gpuplug check` and our CI see the same verdicts.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <gpuplug/conformance.hpp>
#include <gpuplug/gpuplug.hpp>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <source_location>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuplug::conformance {

// ---- what is under test ----------------------------------------------------------------------

/// One backend to run the suite against: a plugin and a device ordinal, reachable through a
/// registry. Made by the runners (from discovery, GPUPLUG_BACKEND, --backend or --plugin).
struct Target {
  std::string plugin;  // "host", "cuda"
  std::uint32_t ordinal = 0;
  std::filesystem::path plugin_file;  // the plugin's .so
  /// The registry the target's backends come from. Shared by every case of a run.
  std::shared_ptr<PluginRegistry> registry;
  /// Makes a fresh registry that can create this target's backends (for lifetime cases that
  /// destroy the registry before the backend).
  std::function<std::shared_ptr<PluginRegistry>()> make_registry;
  /// Where the host reference backend comes from (may equal `registry`). Null: no reference.
  std::shared_ptr<PluginRegistry> reference_registry;
  /// The folder of the run's own kernel modules, one subfolder per plugin (`gpuplug check
  /// --modules DIR`); empty: none. Context::load_module looks there first.
  std::filesystem::path user_modules;

  /// "host:0!": demands exactly this device, so a missing one is an error, never a fallback.
  std::string selector() const;
  /// "host:0".
  std::string backend_name() const;
  /// The plugin's kernel modules: <folder of the .so>/../kernels/<plugin>.
  std::filesystem::path kernel_dir() const;
};

/// The warning for a run's modules folder that holds module files directly instead of in
/// `<folder>/<plugin>/` (the flat layout, read for one release); empty when it has the layout.
std::string flat_modules_warning(const std::filesystem::path& folder, std::string_view plugin);

// ---- the registry of cases -------------------------------------------------------------------

/// Every case, in a stable order (area by area).
std::span<const Case> all_cases();

namespace detail {  // one list per area file
std::span<const Case> memory_cases();
std::span<const Case> device_cases();  // limits, options, ordinals, the ledger, info, streams
std::span<const Case> module_cases();
std::span<const Case> opcache_cases();
std::span<const Case> concurrency_cases();
std::span<const Case> differential_cases();
std::span<const Case> lifecycle_cases();
std::span<const Case> event_cases();
std::span<const Case> stream_cases();  // stream order without timing
std::span<const Case> launch_args_cases();  // launch-argument lifetime, <func>_args
std::span<const Case> peer_cases();    // copy_peer and copy_peer_async
std::span<const Case> pinned_cases();  // mapped host memory and host_address (ABI 1.3)
std::span<const Case> arena_cases();   // arenas and stream flags (ABI 1.3)
std::span<const Case> graph_cases();  // capture and replay (ABI 1.3, docs/graphs.md)
std::span<const Case> skew_cases();  // the "ABI skew" group (docs/architecture.md, ABI-1 ...)
std::span<const Case> pitched_cases();  // the pitched 2D copies (ABI 1.3)
}  // namespace detail

// ---- known failures --------------------------------------------------------------------------

/// The per-plugin list of cases known to fail, each with its reason. File format, one entry a
/// line: `<plugin-name> <case-name> <reason...>`; '#' starts a comment; blank lines are ignored.
class KnownFailures {
 public:
  KnownFailures() = default;
  /// Parses `text`; malformed lines (fewer than three fields) are reported in problems().
  static KnownFailures parse(std::string_view text, std::string_view origin = "<text>");
  /// Reads and parses `file`; a missing file is an empty list plus a problem.
  static KnownFailures load(const std::filesystem::path& file);
  /// The default file: $GPUPLUG_KNOWN_FAILURES, else <exe>/../share/gpuplug/conformance/
  /// known_failures.txt (build and install tree alike), else the source tree's copy.
  static std::filesystem::path default_file();

  /// The reason `case_name` is known to fail on `plugin`, nullopt when it is not listed.
  std::optional<std::string> reason(std::string_view plugin, std::string_view case_name) const;
  /// Lines that could not be parsed, and entries naming cases that do not exist (among the
  /// built-in ones and `extra`, a run's own cases).
  std::vector<std::string> problems(std::span<const Case> extra = {}) const;
  std::size_t size() const noexcept { return entries_.size(); }

 private:
  std::map<std::pair<std::string, std::string>, std::string, std::less<>> entries_;
  std::vector<std::string> parse_problems_;
};

// ---- running a case --------------------------------------------------------------------------

enum class Outcome {
  passed,
  failed,
  skipped,
  xfail,  // listed as a known failure, and failed: counted with the skipped, reason shown
  xpass,  // listed as a known failure, but passed: counted as a failure so the list stays honest
};

std::string_view to_string(Outcome o) noexcept;
inline std::ostream& operator<<(std::ostream& os, Outcome o) { return os << to_string(o); }

struct Result {
  Outcome outcome = Outcome::passed;
  std::string reason;              // why it failed, was skipped, or is a known failure
  std::vector<std::string> notes;  // remarks from a passing case
  std::chrono::duration<double> elapsed{};
};

/// Runs one case against `target` in a fresh Context, catching everything, and applies the known
/// failures of `target.plugin`.
Result run_case(const Case& c, const Target& target, const KnownFailures& known);

/// Counts as printed on `check`'s last line: xfail counts as skipped, xpass as failed.
struct Tally {
  std::size_t passed = 0, failed = 0, skipped = 0;
  void add(Outcome o) noexcept;
  std::string line() const;  // "N passed, N failed, N skipped"
};

// ---- environment -----------------------------------------------------------------------------

/// "AddressSanitizer", "ThreadSanitizer", ... or "" when no sanitizer runs in this process: the
/// suite's own build first, else a sanitizer runtime found at run time (preloaded for an
/// instrumented plugin, docs/plugin-authors.md). Under a sanitizer RSS measurements mean nothing
/// (shadow memory, quarantine) and loops run fewer times.
std::string_view sanitizer_name() noexcept;

/// Number of create/destroy cycles of the lifecycle case: $GPUPLUG_CONFORMANCE_CYCLES, else
/// 1000, or 100 under a sanitizer.
std::size_t lifecycle_cycles();

/// The targets to run on by default: for every plugin the registry found, the Target for device
/// 0 when available, or a PluginInfo saying why not. `selector_filter` (e.g. GPUPLUG_BACKEND's
/// value) restricts to the plugins it names and picks their ordinals.
struct Discovered {
  std::vector<Target> targets;
  std::vector<PluginInfo> unavailable;  // with their reasons (and required ones demanded by '!')
  std::vector<std::string> required_missing;  // "cuda:0!" named but not available
};
Discovered discover_targets(std::string_view selector_filter = {});

/// A Target for what `selector` selects ("auto", "cuda", "hip:1", lists): the registry's own
/// choice, so `gpuplug check --backend auto` tests what an application would get. Throws Error
/// when nothing matches (its message says why each candidate was passed over).
Target target_for_selector(std::string_view selector);

/// A Target for one plugin file (`gpuplug check --plugin FILE`): a registry holding only that file;
/// the reference host backend comes from normal discovery. Throws Error when the file is not
/// usable.
Target target_for_plugin_file(const std::filesystem::path& file, std::uint32_t ordinal = 0);

}  // namespace gpuplug::conformance
