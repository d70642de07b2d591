// SPDX-License-Identifier: Apache-2.0
// The record of one `gpuplug check` run, as CI reads it: JSON (`--json FILE`, schema in
// share/gpuplug/check.schema.json), JUnit XML (`--junit FILE`), and the JSON read back by
// `gpuplug matrix`.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpuplug::tool {

/// The layout version of the JSON record ("schema"); bumped when a field changes meaning or goes.
/// Fields are only ever added within a version, and readers ignore fields they do not know.
inline constexpr int results_schema = 1;

/// What became of one case. `crashed` and `timed_out` exist only in an isolated run (not
/// --no-isolate), where the case's process died or was killed, during the case or after it had
/// ended; in the text table they are "failed" rows naming why.
enum class Verdict { passed, failed, skipped, xfail, xpass, crashed, timed_out };

/// "passed", "failed", "skipped", "xfail", "xpass", "crashed", "timed_out".
std::string_view to_string(Verdict v) noexcept;
std::optional<Verdict> verdict_named(std::string_view name) noexcept;
/// Whether the verdict counts against the run (failed, xpass, crashed, timed_out).
bool is_failure(Verdict v) noexcept;

struct CaseRecord {
  std::string name;
  std::string summary;  // what the case checks
  Verdict verdict = Verdict::passed;
  double seconds = 0;
  std::string message;  // why it failed or was skipped, or its notes
  std::string known_failure;  // the reason the known-failure file gives for it on this plugin
};

/// Where the run happened.
struct Machine {
  std::string hostname;
  std::string os;    // "Linux 6.1.0-28-amd64"
  std::string arch;  // "x86_64"
  /// This machine, from uname(2).
  static Machine here();
};

/// The device under test, as far as the plugin's ABI describes it (empty when unknown).
struct DeviceRecord {
  std::string name;
  std::string uuid;
  std::string pci;           // "0000:c1:00.0"
  std::string device_class;  // "discrete_gpu", ..., "unknown"
  std::string driver_version;
  std::string runtime_version;
};

struct RunRecord {
  std::string gpuplug_version;
  std::string abi_version;
  std::string started;  // UTC, ISO 8601 ("2026-12-01T03:20:00Z")
  Machine machine;
  std::string backend;      // "host:0"; the selector or the plugin file when it is unavailable
  std::string plugin;       // "host"
  std::string plugin_file;  // the .so tested
  bool available = true;
  std::string unavailable_reason;
  DeviceRecord device;
  bool isolated = false;
  long timeout_s = 0;  // per case; 0: none (--no-isolate)
  std::vector<CaseRecord> cases;

  /// The column of `gpuplug matrix`: "<backend>@<hostname>".
  std::string column() const { return backend + "@" + machine.hostname; }
};

/// The current time as RunRecord::started wants it.
std::string utc_now_iso8601();

/// The JSON document (schema `results_schema`). Every string from a plugin or a file name is
/// escaped to valid UTF-8 (support::json_string).
std::string to_json(const RunRecord& run);

/// JUnit XML: one <testsuites> with one <testsuite> for the backend, a <testcase> per case;
/// failed/xpass/crashed/timed_out are <failure type="...">, skipped and xfail are <skipped>
/// (an xfail's message says it is a known failure). Text is escaped for XML 1.0, whose
/// character set excludes most C0 controls: those become U+FFFD.
std::string to_junit(const RunRecord& run);

/// Text for XML 1.0 (and HTML) character data and attribute values: markup characters escaped,
/// and every character XML 1.0 cannot carry (C0 controls but tab, LF and CR, U+FFFE/U+FFFF,
/// bytes that are not UTF-8) replaced by U+FFFD.
std::string xml_text(std::string_view s);

/// A file that is not a results record of a schema this program reads; what() names the file
/// and the reason ("a.json: line 3: expected ':'", "b.json: schema 2, this gpuplug reads 1").
class BadResults : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Reads back what to_json wrote. `source` names the input in errors. Throws BadResults.
RunRecord parse_results(std::string_view text, const std::string& source);

}  // namespace gpuplug::tool
