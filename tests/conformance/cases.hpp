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

// ---- failures and skips ---------------------------------------------------------------------

/// A broken contract, with the file and line of the check that saw it.
class CheckFailure : public std::runtime_error {
 public:
  CheckFailure(const std::string& message, std::source_location where);
  const char* file() const noexcept { return file_; }
  std::uint32_t line() const noexcept { return line_; }
  /// The message without the location.
  const std::string& message() const noexcept { return message_; }

 private:
  std::string message_;
  const char* file_;
  std::uint32_t line_;
};

/// The case does not apply to this backend; the reason is reported.
class Skip : public std::runtime_error {
 public:
  explicit Skip(const std::string& reason) : std::runtime_error(reason) {}
};

[[noreturn]] void fail(const std::string& message,
                       std::source_location where = std::source_location::current());
[[noreturn]] void skip(const std::string& reason);

namespace detail {
std::string describe(const gpuplug::Error& e);
template <class T>
std::string show(const T& value) {
  std::ostringstream os;
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    os << static_cast<unsigned>(value);
  } else if constexpr (requires { os << value; }) {
    os << value;
  } else if constexpr (requires { value.value; }) {
    os << "0x" << std::hex << value.value;
  } else {
    os << "<value>";
  }
  return os.str();
}
}  // namespace detail

/// Throws CheckFailure naming the expression when `cond` is false.
#define GPUPLUG_CHECK(cond)                                            \
  do {                                                                 \
    if (!(cond)) ::gpuplug::conformance::fail("check failed: " #cond); \
  } while (false)

/// As GPUPLUG_CHECK, with a message built by `<<` from the arguments.
#define GPUPLUG_CHECK_MSG(cond, ...)                         \
  do {                                                       \
    if (!(cond)) {                                           \
      std::ostringstream gpuplug_check_os_;                  \
      gpuplug_check_os_ << __VA_ARGS__;                      \
      ::gpuplug::conformance::fail(gpuplug_check_os_.str()); \
    }                                                        \
  } while (false)

/// a == b, printing both values on failure. Both are copied first: a reference into a
/// temporary (`f()[0]`) would dangle.
#define GPUPLUG_CHECK_EQ(a, b)                                                                 \
  do {                                                                                         \
    const auto gpuplug_a_ = (a);                                                               \
    const auto gpuplug_b_ = (b);                                                               \
    if (!(gpuplug_a_ == gpuplug_b_)) {                                                         \
      ::gpuplug::conformance::fail("check failed: " #a " == " #b " (" +                        \
                                   ::gpuplug::conformance::detail::show(gpuplug_a_) + " vs " + \
                                   ::gpuplug::conformance::detail::show(gpuplug_b_) + ")");    \
    }                                                                                          \
  } while (false)

/// Runs `expr`, which must throw gpuplug::Error with `status`; evaluates to the Error so that
/// the message can be checked. Any other outcome is a CheckFailure saying what happened.
#define GPUPLUG_CHECK_THROWS(expr, expected_status)                                             \
  ::gpuplug::conformance::detail::expect_error([&] { (void)(expr); }, (expected_status), #expr, \
                                               std::source_location::current())

/// As GPUPLUG_CHECK_THROWS, accepting any Status.
#define GPUPLUG_CHECK_THROWS_ANY(expr)                                                     \
  ::gpuplug::conformance::detail::expect_error([&] { (void)(expr); }, std::nullopt, #expr, \
                                               std::source_location::current())

namespace detail {
gpuplug::Error expect_error(const std::function<void()>& run, std::optional<Status> expected,
                            const char* expr, std::source_location where);
}  // namespace detail

/// True when the message contains `needle` (used to check that errors name the thing).
bool contains(std::string_view haystack, std::string_view needle) noexcept;

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

  /// "host:0!": demands exactly this device, so a missing one is an error, never a fallback.
  std::string selector() const;
  /// "host:0".
  std::string backend_name() const;
  /// The plugin's kernel modules: <folder of the .so>/../kernels/<plugin>.
  std::filesystem::path kernel_dir() const;
};

/// Everything a case may touch. One Context per case run: the backend under test is fresh for
/// every case (created on first use), so cases never see each other's modules, scratch or latches.
/// Not thread-safe itself: call its members from the case's own thread (hand the GpuBackend&
/// to worker threads, which is thread-safe).
class Context {
 public:
  explicit Context(const Target& target);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Target& target() const noexcept { return target_; }
  /// The backend under test, created on first use with no options.
  GpuBackend& backend();
  /// A new backend of the same plugin and device with `options` (create/destroy cycles,
  /// per-backend latches, device_memory_limit). Owned by the caller.
  std::shared_ptr<GpuBackend> make_backend(const Options& options = {});
  /// The host backend used as the reference in differential cases; Skip when none is available.
  GpuBackend& reference();
  /// The bytes of the plugin's kernel image for `module` (any extension); Skip when absent.
  std::vector<std::byte> module_image(std::string_view module) const;
  /// Adds a remark shown with the result (e.g. "RSS not checked under ThreadSanitizer").
  void note(std::string text);
  const std::vector<std::string>& notes() const noexcept { return notes_; }

  /// Called by run_case after the case body: releases the op cache of the backend under test,
  /// waits for its streams, and fails when the case left allocations on its ledger.
  void finish();

 private:
  const Target& target_;
  std::shared_ptr<GpuBackend> backend_;
  std::shared_ptr<GpuBackend> reference_;
  std::vector<std::string> notes_;
};

// ---- the registry of cases -------------------------------------------------------------------

struct Case {
  std::string_view name;     // unique, snake_case; the Boost test case and `check` row name
  std::string_view summary;  // one line: the contract it checks
  void (*run)(Context&);
};

/// Every case, in a stable order (area by area).
std::span<const Case> all_cases();

namespace detail {  // one list per area file
std::span<const Case> memory_cases();
std::span<const Case> module_cases();
std::span<const Case> opcache_cases();
std::span<const Case> concurrency_cases();
std::span<const Case> differential_cases();
std::span<const Case> lifecycle_cases();
std::span<const Case> event_cases();
std::span<const Case> stream_cases();  // stream order without timing, launch-argument lifetime
std::span<const Case> skew_cases();  // the "ABI skew" group (docs/architecture.md, ABI-1 ...)
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
  /// Lines that could not be parsed, and entries naming cases that do not exist.
  std::vector<std::string> problems() const;
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

/// "AddressSanitizer", "ThreadSanitizer", or "" when the suite was built without either. Under a
/// sanitizer RSS measurements mean nothing (shadow memory, quarantine) and loops run fewer times.
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
