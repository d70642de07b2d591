// SPDX-License-Identifier: Apache-2.0
// `gpuplug check`: runs the conformance cases against one backend and prints a verdict table.
//
//   gpuplug check [--backend SEL | --plugin FILE] [--case TEXT]... [--known-failures FILE]
//                 [--isolate] [--timeout SECONDS]
//   gpuplug check --list            the cases, one a line, with what each checks
//   gpuplug check --list-plugins    one line per candidate plugin: name, state, reason, devices,
//                                   message (tab-separated; what scripts/test reads)
//
// Output: a header naming the backend and why it was chosen, one line per lint of the plugin file
// ("lint exports: ok", "lint runpath: FAILED: <why>"; lint.hpp, docs/lints.md), one row per case
// as it finishes (case, result, time, reason), and a last line that is exactly "N passed, N
// failed, N skipped", where each lint counts as passed or failed.
// Known failures (known_failures.txt) that fail count as skipped ("xfail", with the reason);
// listed ones that pass count as failed ("XPASS"), so the list stays honest.
// --isolate runs every case in a child process of its own (this program again, from
// /proc/self/exe, with the internal options --run-case NAME --result-pipe INODE; the child
// writes its Result to descriptor 3 once it has checked that 3 is that pipe): a case that crashes,
// exits or hangs is a failed row naming the signal, the exit status or the time limit, and the run
// goes on. --timeout SECONDS bounds each case and implies
// --isolate, since a hung thread cannot be stopped inside this process. A child's own output is
// collected, never interleaved with the table, and shown (its last lines) under a row that did
// not pass.
// The lints that load the plugin always run in a child (--run-lints FILE, on the same kind of
// result pipe, at most --timeout or 60 s), so that a plugin that crashes, exits or hangs while it
// loads fails them instead of ending the run.
// Exit status: 0 nothing failed; 1 a case or a lint failed; 2 usage error; 3 the backend is
// unavailable (every case is then reported skipped with the reason).
#include "check.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cases.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <gpuplug/support/escape.hpp>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "case_library.hpp"
#include "isolate.hpp"
#include "lint.hpp"
#include "results.hpp"

namespace conf = gpuplug::conformance;

namespace {

constexpr int exit_failed = 1;
constexpr int exit_usage = 2;
constexpr int exit_unavailable = 3;

void print_usage(std::ostream& os) {
  os << "usage: gpuplug check [--backend SEL | --plugin FILE] [--case TEXT]... [--known-failures "
        "FILE]\n"
        "                     [--isolate] [--timeout SECONDS] [--json FILE] [--junit FILE]\n"
        "                     [--cases LIB.so]... [--modules DIR] [--only-user]\n"
        "       gpuplug check --list | --list-plugins\n"
        "\n"
        "Runs the conformance suite against one backend: a plugin author's first test.\n"
        "First it lints the plugin file (--plugin FILE, or the file of the selected plugin),\n"
        "one line each, 'lint NAME: ok' or 'lint NAME: FAILED: why' (docs/lints.md):\n"
        "  exports             it exports gpuplug_plugin_entry and nothing else\n"
        "  static_destructors  it imports no __cxa_atexit, __cxa_thread_atexit(_impl), atexit\n"
        "  runpath             no RUNPATH/RPATH element is empty or relative (the current "
        "directory)\n"
        "  name                libgpuplug-<name>.so publishes a table named <name>\n"
        "  abi_answer          asked for 1.0, this host's version and 1.99 it answers a table\n"
        "                      of major 1 and no later minor than asked (ABI-4)\n"
        "A file that is not a well-formed shared object fails every lint and is not loaded;\n"
        "name and abi_answer load it in a child process (at most --timeout, else 60 s), so a\n"
        "plugin that crashes or hangs while loading fails them and the run goes on.\n"
        "\n"
        "  --backend SEL          selector as for the API: auto (default; GPUPLUG_BACKEND "
        "applies),\n"
        "                         cuda, hip:1, host, cuda,host ...\n"
        "  --plugin FILE          test this plugin file (device 0) instead of a discovered one\n"
        "  --case TEXT            run only the cases whose name contains TEXT (repeatable)\n"
        "  --known-failures FILE  known failures (default: "
        "share/gpuplug/conformance/known_failures.txt\n"
        "                         beside the tool, or GPUPLUG_KNOWN_FAILURES)\n"
        "  --isolate              run each case in a child process of its own: a crash (named by\n"
        "                         its signal), an exit or a hang fails that case, and the run "
        "goes\n"
        "                         on; the child's output is shown under a row that did not pass\n"
        "  --timeout SECONDS      per case, 1 to 86400 (implies --isolate): a case still running\n"
        "                         then gets SIGTERM, SIGKILL 2 s later, and fails 'timed out'\n"
        "                         (without it, --isolate sets no limit)\n"
        "  --json FILE            also write the run as JSON (share/gpuplug/check.schema.json):\n"
        "                         machine, backend, device identity, versions, every case's\n"
        "                         status, time and message; `gpuplug matrix` merges such files\n"
        "  --junit FILE           also write the run as JUnit XML for CI test reporters\n"
        "  --cases LIB.so         also run the cases a library of your own lists\n"
        "                         (<gpuplug/conformance.hpp>, GPUPLUG_CONFORMANCE_CASES); repeatable\n"
        "  --modules DIR          your cases' kernel modules: DIR/<plugin>/<module>.*\n"
        "  --only-user            run only the --cases cases: not the built-in suite, not the lints\n"
        "  --list                 list the cases (with --cases: yours too) and exit\n"
        "  --list-plugins         list candidate plugins as tab-separated lines and exit\n"
        "\n"
        "The last line is 'N passed, N failed, N skipped' (each lint counts as passed or failed;\n"
        "xfail counts as skipped; XPASS, crashed and timed-out cases as failed).\n"
        "Exit status: 0 nothing failed, 1 a case or a lint failed, 2 usage error, 3 backend\n"
        "unavailable.\n";
}

int usage_error(const std::string& message) {
  std::cerr << "gpuplug check: " << message << "\n(run 'gpuplug check --help' for usage)\n";
  return exit_usage;
}

/// Tabs and newlines would break the one-line-per-plugin format.
std::string one_line(std::string text) {
  std::replace_if(
      text.begin(), text.end(), [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
  return text;
}

int list_plugins() {
  gpuplug::PluginRegistry registry;
  registry.discover();
  for (const auto& p : registry.plugins()) {
    std::cout << one_line(p.name) << '\t' << gpuplug::to_string(p.state) << '\t'
              << gpuplug::to_string(p.reason) << '\t' << p.devices.size() << '\t'
              << one_line(p.message) << '\n';
  }
  return 0;
}

/// The user's own cases (--cases, --modules): what the parent loaded, and what it hands to the
/// child of --isolate so that the child can find the same case by name.
struct UserCases {
  std::vector<std::string> files;      // --cases, in order
  std::optional<std::string> modules;  // --modules
  std::vector<conf::Case> cases;       // what the files list
};

int list_cases(std::span<const conf::Case> cases) {
  std::size_t width = 0;
  for (const auto& c : cases) width = std::max(width, c.name.size());
  for (const auto& c : cases) {
    std::cout << std::left << std::setw(static_cast<int>(width)) << c.name << "  " << c.summary
              << '\n';
  }
  return 0;
}

/// Finishes the row of a case that crashes the process, then lets the signal do its default.
/// Not under a sanitizer, whose own handler reports far more.
extern "C" void crash_note(int sig) {
  static const char text[] = "CRASHED: the process died in this case (signal ";
  (void)!::write(STDOUT_FILENO, text, sizeof text - 1);
  char digits[4] = {static_cast<char>('0' + sig / 10 % 10), static_cast<char>('0' + sig % 10), ')',
                    '\n'};
  (void)!::write(STDOUT_FILENO, digits, sizeof digits);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void install_crash_note() {
  if (!conf::sanitizer_name().empty()) return;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, crash_note);
}

bool selected(const conf::Case& c, const std::vector<std::string_view>& filters) {
  if (filters.empty()) return true;
  return std::any_of(filters.begin(), filters.end(),
                     [&](std::string_view f) { return c.name.find(f) != std::string_view::npos; });
}

constexpr long max_timeout_seconds = 86400;

/// "--timeout" values: whole seconds, 1 to max_timeout_seconds. nullopt when not one.
std::optional<long> parse_timeout(std::string_view text) {
  if (text.empty() || text.size() > 6) return std::nullopt;
  long v = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  if (v < 1 || v > max_timeout_seconds) return std::nullopt;
  return v;
}

// ---- --isolate: the child's record ------------------------------------------------------------
// One record per child on descriptor 3: "<outcome>\n<milliseconds>\n<reason>". The parent trusts
// none of it: an unknown outcome, a bad number or an oversized record fails the case.

std::optional<conf::Outcome> outcome_named(std::string_view name) {
  for (auto o : {conf::Outcome::passed, conf::Outcome::failed, conf::Outcome::skipped,
                 conf::Outcome::xfail, conf::Outcome::xpass}) {
    if (conf::to_string(o) == name) return o;
  }
  return std::nullopt;
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::string encode_result(const conf::Result& r) {
  std::string reason = r.reason;
  for (const auto& n : r.notes) reason += (reason.empty() ? "" : "; ") + n;
  reason = reason.substr(0, gpuplug::tool::max_child_result_bytes / 2);
  const auto ms = static_cast<long long>(r.elapsed.count() * 1000.0);
  return std::string(conf::to_string(r.outcome)) + "\n" + std::to_string(ms) + "\n" + reason;
}

/// The parent's reading of a record; the defect in words when it is not one.
std::optional<conf::Result> decode_result(std::string_view text, std::string& defect) {
  if (text.empty()) {
    defect = "left no result";
    return std::nullopt;
  }
  const auto nl1 = text.find('\n');
  const auto nl2 = nl1 == std::string_view::npos ? nl1 : text.find('\n', nl1 + 1);
  if (nl2 == std::string_view::npos) {
    defect = "its result record is cut short";
    return std::nullopt;
  }
  const auto outcome = outcome_named(text.substr(0, nl1));
  if (!outcome) {
    defect = "its result record names no outcome";
    return std::nullopt;
  }
  const std::string_view ms = text.substr(nl1 + 1, nl2 - nl1 - 1);
  if (ms.empty() || ms.size() > 12 ||
      ms.find_first_not_of("0123456789") != std::string_view::npos) {
    defect = "its result record has no time in milliseconds";
    return std::nullopt;
  }
  conf::Result r;
  r.outcome = *outcome;
  r.elapsed = std::chrono::duration<double>(std::stod(std::string(ms)) / 1000.0);
  // The child's text reaches the terminal: control characters escaped, invalid UTF-8 shown as hex.
  r.reason = gpuplug::support::escape_text(text.substr(nl2 + 1));
  return r;
}

/// `gpuplug check --run-case NAME ... --result-pipe INODE`: the child of --isolate. Runs exactly
/// that case and writes its record to descriptor 3, once that is the parent's pipe; its stdout
/// and stderr are the parent's to collect.
int run_one_case(std::string_view name, std::string_view result_pipe,
                 const std::optional<std::string>& backend,
                 const std::optional<std::string>& plugin_file, const conf::KnownFailures& known,
                 std::span<const conf::Case> cases, const UserCases& user) {
  if (!gpuplug::tool::is_result_pipe(result_pipe))
    return usage_error("--run-case is internal to --isolate (descriptor 3 is not its result pipe)");
  const auto it =
      std::find_if(cases.begin(), cases.end(), [&](const conf::Case& c) { return c.name == name; });
  if (it == cases.end())
    return usage_error("--run-case: no case is named '" + std::string(name) + "'");
  conf::Result r;
  try {
    conf::Target target = plugin_file ? conf::target_for_plugin_file(*plugin_file)
                                      : conf::target_for_selector(backend.value_or("auto"));
    if (user.modules) target.user_modules = *user.modules;
    install_crash_note();
    r = conf::run_case(*it, target, known);
  } catch (const std::exception& e) {
    r.outcome = conf::Outcome::failed;
    r.reason = std::string("the backend is unavailable in the child process: ") + e.what();
  }
  return write_all(gpuplug::tool::child_result_fd, encode_result(r)) ? 0 : exit_failed;
}

/// The last lines of a child's output, each prefixed, control characters escaped, for the
/// lines under a row.
std::string output_tail(const gpuplug::tool::ChildRun& run) {
  constexpr std::size_t max_lines = 12;
  std::vector<std::string_view> lines;
  std::string_view rest = run.output;
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    lines.push_back(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }
  const std::size_t first = lines.size() > max_lines ? lines.size() - max_lines : 0;
  std::string text;
  if (first > 0 || run.output_truncated) text += "    | (earlier output left out)\n";
  for (std::size_t i = first; i < lines.size(); ++i)
    text += "    | " + gpuplug::support::escape_text(lines[i]) + "\n";
  return text;
}

/// Runs case `c` in a child and judges it: the child's record when it left one and exited 0,
/// else a failure naming the crash, the exit or the time limit (a known failure of this plugin
/// turns that into xfail). `output` gets the child's output tail.
conf::Result run_isolated(const conf::Case& c, const conf::Target& target,
                          const std::optional<std::string>& plugin_file,
                          const std::filesystem::path& known_path, const conf::KnownFailures& known,
                          long timeout_s, const UserCases& user, std::string& output,
                          std::optional<gpuplug::tool::Verdict>& died) {
  std::vector<std::string> args = {"gpuplug",          "check",
                                   "--run-case",       std::string(c.name),
                                   "--known-failures", known_path.string()};
  for (const auto& file : user.files) args.insert(args.end(), {"--cases", file});
  if (user.modules) args.insert(args.end(), {"--modules", *user.modules});
  if (plugin_file) {
    args.insert(args.end(), {"--plugin", *plugin_file});
  } else {
    args.insert(args.end(), {"--backend", target.selector()});  // exactly the parent's device
  }
  const auto run = gpuplug::tool::run_child(args, std::chrono::seconds(timeout_s));
  conf::Result r;
  r.elapsed = run.elapsed;
  std::string why;
  std::string defect;
  if (!run.spawn_error.empty()) {
    why = "could not run the case in a child process: " + run.spawn_error;
  } else if (run.timed_out) {
    why = "timed out after " + std::to_string(timeout_s) + " s (" +
          gpuplug::tool::describe_wait_status(run.wait_status) + ")";
    died = gpuplug::tool::Verdict::timed_out;
  } else if (WIFSIGNALED(run.wait_status)) {
    why = "crashed: " + gpuplug::tool::describe_wait_status(run.wait_status);
    died = gpuplug::tool::Verdict::crashed;
  } else if (run.result_overflow) {
    why = "the child sent a result record over " +
          std::to_string(gpuplug::tool::max_child_result_bytes) + " bytes";
  } else if (const auto decoded = decode_result(run.result, defect);
             decoded && WIFEXITED(run.wait_status) && WEXITSTATUS(run.wait_status) == 0) {
    r = *decoded;
  } else {
    why = "the child " + gpuplug::tool::describe_wait_status(run.wait_status) +
          (decoded ? "" : " and " + defect);
  }
  if (!why.empty()) {
    r.outcome = conf::Outcome::failed;
    r.reason = why;
    if (const auto known_reason = known.reason(target.plugin, c.name)) {
      died.reset();
      r.outcome = conf::Outcome::xfail;
      r.reason = "known failure: " + *known_reason + " [" + why + "]";
    }
  }
  if (r.outcome != conf::Outcome::passed && r.outcome != conf::Outcome::skipped)
    output = output_tail(run);
  return r;
}

gpuplug::tool::Verdict verdict_of(conf::Outcome o) {
  using V = gpuplug::tool::Verdict;
  switch (o) {
    case conf::Outcome::passed:
      return V::passed;
    case conf::Outcome::failed:
      return V::failed;
    case conf::Outcome::skipped:
      return V::skipped;
    case conf::Outcome::xfail:
      return V::xfail;
    case conf::Outcome::xpass:
      return V::xpass;
  }
  return V::failed;
}

/// The run's header for --json and --junit: machine, versions, and the device as the plugin
/// describes it (its PluginInfo from the target's registry).
gpuplug::tool::RunRecord run_record(const conf::Target& target,
                                    const std::optional<std::string>& plugin_file,
                                    const std::optional<std::string>& backend,
                                    const std::string& unavailable) {
  gpuplug::tool::RunRecord rec;
  rec.gpuplug_version = gpuplug::version_string;
  rec.abi_version =
      std::to_string(GPUPLUG_ABI_VERSION_MAJOR) + "." + std::to_string(GPUPLUG_ABI_VERSION_MINOR);
  rec.started = gpuplug::tool::utc_now_iso8601();
  rec.machine = gpuplug::tool::Machine::here();
  if (!unavailable.empty()) {
    rec.available = false;
    rec.unavailable_reason = unavailable;
    rec.backend = plugin_file ? *plugin_file : backend.value_or("auto");
    if (rec.backend.ends_with('!')) rec.backend.pop_back();  // "cuda:0!" is column "cuda:0"
    rec.plugin_file = plugin_file.value_or("");
    return rec;
  }
  rec.backend = target.backend_name();
  rec.plugin = target.plugin;
  rec.plugin_file = target.plugin_file.string();
  if (!target.registry) return rec;
  for (const auto& p : target.registry->plugins()) {
    if (p.name != target.plugin) continue;
    for (const auto& d : p.devices) {
      if (d.ordinal != target.ordinal) continue;
      rec.device.name = d.name;
      rec.device.uuid = d.uuid;
      rec.device.pci = d.pci ? gpuplug::to_string(*d.pci) : "";
      rec.device.device_class = gpuplug::to_string(d.device_class);
      rec.device.driver_version = d.driver_version;
      rec.device.runtime_version = d.runtime_version;
    }
  }
  return rec;
}

/// Writes `text` to `file` whole; false (having said why, naming the option) when it cannot.
bool write_text_file(const std::string& file, const std::string& text, std::string_view option) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (out) return true;
  std::cerr << "gpuplug check: " << option << ": cannot write '"
            << gpuplug::support::escape_text(file) << "'\n";
  return false;
}

/// `gpuplug check --run-lints FILE --result-pipe INODE`: the child of run_lints that loads the
/// plugin for the lints that run its code (lint_loaded) and writes their record to descriptor 3.
int run_loaded_lints(std::string_view file, std::string_view result_pipe) {
  if (!gpuplug::tool::is_result_pipe(result_pipe))
    return usage_error(
        "--run-lints is internal to the lints (descriptor 3 is not its result pipe)");
  const auto results = gpuplug::tool::lint_loaded(std::filesystem::path(file));
  return write_all(gpuplug::tool::child_result_fd, gpuplug::tool::encode_lints(results))
             ? 0
             : exit_failed;
}

/// lint_loaded in a child process: a plugin that crashes, exits or hangs while it loads or
/// answers fails those lints, naming how, instead of ending the checker. `timeout_s` > 0.
std::vector<gpuplug::tool::LintResult> loaded_lints_isolated(const std::filesystem::path& file,
                                                             long timeout_s) {
  const auto run = gpuplug::tool::run_child({"gpuplug", "check", "--run-lints", file.string()},
                                            std::chrono::seconds(timeout_s));
  std::string why;
  std::string defect;
  if (!run.spawn_error.empty()) {
    why = "could not load the plugin in a child process: " + run.spawn_error;
  } else if (run.timed_out) {
    why = "loading the plugin and calling its entry point timed out after " +
          std::to_string(timeout_s) + " s (" +
          gpuplug::tool::describe_wait_status(run.wait_status) + ")";
  } else if (WIFSIGNALED(run.wait_status)) {
    why = "the process that loaded the plugin crashed: " +
          gpuplug::tool::describe_wait_status(run.wait_status);
  } else if (const auto decoded = gpuplug::tool::decode_lints(run.result, defect);
             decoded && WIFEXITED(run.wait_status) && WEXITSTATUS(run.wait_status) == 0) {
    return *decoded;
  } else {
    why = "the process that loaded the plugin " +
          gpuplug::tool::describe_wait_status(run.wait_status) +
          (decoded ? "" : " and " + (run.result.empty() ? std::string("left no result") : defect));
  }
  return gpuplug::tool::loaded_lints_failed(why);
}

/// How long the child that loads the plugin for the lints may take when --timeout sets no limit:
/// loading and three calls of the entry point take milliseconds, a minute only stops a hang.
constexpr long lint_load_timeout_s = 60;

/// Runs the lints on `file` and prints one line each ("lint exports: ok", "lint runpath: FAILED:
/// <why>"), counted in `tally` as passed or failed: first those that only read the file, then,
/// when it is a well-formed shared object, those that load it. Those always run in a child
/// process, with or without --isolate: the file may be one the registry has just seen crash its
/// probe, and without --isolate the cases are then skipped, so the lints would be the only code
/// to load it into this process.
void run_lints(const std::filesystem::path& file, long timeout_s, conf::Tally& tally,
               std::vector<gpuplug::tool::CaseRecord>& record) {
  const auto print = [&](const std::vector<gpuplug::tool::LintResult>& results) {
    for (const auto& r : results) {
      tally.add(r.ok() ? conf::Outcome::passed : conf::Outcome::failed);
      // In --json/--junit and the matrix as the row "lint_<name>".
      record.push_back({"lint_" + std::string(r.name), "the plugin file passes the " +
                                                           std::string(r.name) + " lint",
                        r.ok() ? gpuplug::tool::Verdict::passed : gpuplug::tool::Verdict::failed,
                        0.0, r.ok() ? std::string() : r.failure});
      std::cout << "lint " << r.name << ": " << (r.ok() ? "ok" : "FAILED: " + one_line(r.failure))
                << "\n";
    }
    // Out before the plugin is loaded: a crash in it leaves the lines so far on the terminal.
    std::cout << std::flush;
  };
  bool loadable = false;
  print(gpuplug::tool::lint_file(file, loadable));
  if (!loadable) {
    print(gpuplug::tool::loaded_lints_failed(
        "not loaded: the file is not a well-formed shared object (see lint exports)"));
  } else {
    print(loaded_lints_isolated(file, timeout_s > 0 ? timeout_s : lint_load_timeout_s));
  }
  std::cout << "\n" << std::flush;
}

}  // namespace

int run_check(std::span<const std::string_view> args) {
  std::optional<std::string> backend;
  std::optional<std::string> plugin_file;
  std::optional<std::string> known_file;
  std::vector<std::string_view> filters;
  std::optional<std::string_view> run_case_name;   // set in the child of --isolate
  std::string_view result_pipe;                    // likewise (run_child's inode number)
  std::optional<std::string_view> run_lints_file;  // set in the child of run_lints
  bool isolate = false;
  long timeout_s = 0;                     // 0: no limit
  std::optional<std::string> json_file;   // --json
  std::optional<std::string> junit_file;  // --junit
  UserCases user;
  bool only_user = false;  // --only-user
  bool list = false;       // --list
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= args.size()) return std::nullopt;
      return std::string(args[++i]);
    };
    if (a == "--help" || a == "-h") {
      print_usage(std::cout);
      return 0;
    } else if (a == "--list") {
      list = true;
    } else if (a == "--cases") {
      auto file = value();
      if (!file) return usage_error("--cases needs a shared library of cases");
      user.files.push_back(*file);
    } else if (a == "--modules") {
      user.modules = value();
      if (!user.modules) return usage_error("--modules needs a folder");
    } else if (a == "--only-user") {
      only_user = true;
    } else if (a == "--list-plugins") {
      return list_plugins();
    } else if (a == "--backend") {
      backend = value();
      if (!backend) return usage_error("--backend needs a selector");
    } else if (a == "--plugin") {
      plugin_file = value();
      if (!plugin_file) return usage_error("--plugin needs a file");
    } else if (a == "--known-failures") {
      known_file = value();
      if (!known_file) return usage_error("--known-failures needs a file");
    } else if (a == "--json") {
      json_file = value();
      if (!json_file) return usage_error("--json needs a file to write");
    } else if (a == "--junit") {
      junit_file = value();
      if (!junit_file) return usage_error("--junit needs a file to write");
    } else if (a == "--isolate") {
      isolate = true;
    } else if (a == "--timeout") {
      if (i + 1 >= args.size()) return usage_error("--timeout needs a number of seconds");
      const std::string_view text = args[++i];
      const auto t = parse_timeout(text);
      if (!t) {
        return usage_error("--timeout needs whole seconds from 1 to " +
                           std::to_string(max_timeout_seconds) + ", not '" +
                           gpuplug::support::escape_text(text) + "'");
      }
      timeout_s = *t;
      isolate = true;  // a hung case can only be stopped by killing its process
    } else if (a == "--run-case") {
      if (i + 1 >= args.size()) return usage_error("--run-case needs a case name");
      run_case_name = args[++i];
    } else if (a == "--run-lints") {
      if (i + 1 >= args.size()) return usage_error("--run-lints needs a plugin file");
      run_lints_file = args[++i];
    } else if (a == gpuplug::tool::result_pipe_option) {
      if (i + 1 >= args.size()) return usage_error("--result-pipe needs an inode number");
      result_pipe = args[++i];
    } else if (a == "--case") {
      if (i + 1 >= args.size()) return usage_error("--case needs a text");
      filters.push_back(args[++i]);
    } else {
      return usage_error("unknown option '" + std::string(a) + "'");
    }
  }
  if (backend && plugin_file) return usage_error("--backend and --plugin exclude each other");
  if (run_lints_file) {
    if (run_case_name || backend || plugin_file || isolate || !filters.empty())
      return usage_error("--run-lints (internal) takes no other option but --result-pipe");
    return run_loaded_lints(*run_lints_file, result_pipe);
  }
  if (only_user && user.files.empty())
    return usage_error("--only-user needs --cases FILE (the cases to run instead of the built-in ones)");
  try {
    user.cases = gpuplug::tool::load_case_libraries(user.files, conf::all_cases());
  } catch (const gpuplug::tool::BadCaseLibrary& e) {
    return usage_error(e.what());
  }
  std::vector<conf::Case> all;
  if (!only_user || run_case_name)
    all.assign(conf::all_cases().begin(), conf::all_cases().end());
  all.insert(all.end(), user.cases.begin(), user.cases.end());
  if (list) return list_cases(all);
  if (run_case_name) {
    if (isolate || !filters.empty() || json_file || junit_file)
      return usage_error(
          "--run-case (internal) takes no --isolate, --timeout, --case, --json or --junit");
    const std::filesystem::path path =
        known_file ? std::filesystem::path(*known_file) : conf::KnownFailures::default_file();
    return run_one_case(*run_case_name, result_pipe, backend, plugin_file,
                        conf::KnownFailures::load(path), all, user);
  }

  std::vector<const conf::Case*> cases;
  for (const auto& c : all) {
    if (selected(c, filters)) cases.push_back(&c);
  }
  if (cases.empty()) return usage_error("no case matches the --case filters (see --list)");

  const std::filesystem::path known_path =
      known_file ? std::filesystem::path(*known_file) : conf::KnownFailures::default_file();
  const conf::KnownFailures known = conf::KnownFailures::load(known_path);

  // What to test. An unavailable backend still gets the table, every case skipped with the reason.
  conf::Target target;
  std::string chosen;
  std::string unavailable;
  try {
    if (plugin_file) {
      target = conf::target_for_plugin_file(*plugin_file);
      chosen = target.backend_name() + " from " + target.plugin_file.string();
    } else {
      const std::string selector = backend.value_or("auto");
      target = conf::target_for_selector(selector);
      chosen = target.backend_name() + " (selector '" + selector + "') from " +
               target.plugin_file.string();
    }
    if (user.modules) target.user_modules = *user.modules;
  } catch (const std::exception& e) {
    unavailable = e.what();
  }

  std::cout << "gpuplug check " << gpuplug::version_string;
  if (!conf::sanitizer_name().empty())
    std::cout << " (under " << conf::sanitizer_name() << ")";
  std::cout << "\n";
  std::cout << "backend:        " << (unavailable.empty() ? chosen : "unavailable: " + unavailable)
            << "\n";
  std::cout << "known failures: " << known_path.string() << " (" << known.size() << " entries)\n";
  if (isolate) {
    std::cout << "isolation:      one process per case, "
              << (timeout_s > 0 ? "at most " + std::to_string(timeout_s) + " s each"
                                : std::string("no time limit"))
              << "\n";
  }
  for (const auto& problem : known.problems(user.cases)) std::cout << "warning:        " << problem << "\n";
  std::cout << "\n";

  gpuplug::tool::RunRecord record = run_record(target, plugin_file, backend, unavailable);
  record.isolated = isolate;
  record.timeout_s = timeout_s;

  // The lints, before the cases: on the file given, or on the file of the plugin selected.
  // --only-user leaves them out with the built-in cases: the run is about the user's kernels.
  conf::Tally tally;
  if (only_user) {
    // nothing: the lints belong to the built-in suite
  } else if (plugin_file) {
    run_lints(*plugin_file, timeout_s, tally, record.cases);
  } else if (unavailable.empty()) {
    run_lints(target.plugin_file, timeout_s, tally, record.cases);
  }

  std::size_t width = 4;
  for (const auto* c : cases) width = std::max(width, c->name.size());
  // The name goes out (flushed) before the case runs, so a case that kills the process is
  // named on the last line of the output.
  const auto name_cell = [&](std::string_view name) {
    std::cout << std::left << std::setw(static_cast<int>(width)) << name << "  " << std::flush;
  };
  const auto rest = [&](std::string_view result, std::string_view time, std::string_view reason) {
    std::cout << std::left << std::setw(7) << result << "  " << std::right << std::setw(8) << time
              << "  " << reason << std::endl;
  };
  name_cell("case");
  rest("result", "time", "reason");

  if (!isolate) install_crash_note();
  for (const auto* c : cases) {
    name_cell(c->name);
    if (!unavailable.empty()) {
      tally.add(conf::Outcome::skipped);
      rest("skipped", "-", "backend unavailable");
      record.cases.push_back({std::string(c->name), std::string(c->summary),
                              gpuplug::tool::Verdict::skipped, 0.0,
                              "backend unavailable: " + unavailable});
      continue;
    }
    std::string child_output;
    std::optional<gpuplug::tool::Verdict> died;
    const conf::Result r = isolate ? run_isolated(*c, target, plugin_file, known_path, known,
                                                  timeout_s, user, child_output, died)
                                   : conf::run_case(*c, target, known);
    tally.add(r.outcome);
    std::string reason = r.reason;
    for (const auto& n : r.notes) reason += (reason.empty() ? "" : "; ") + n;
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.0f ms", r.elapsed.count() * 1000.0);
    rest(conf::to_string(r.outcome), ms, one_line(reason));
    if (!child_output.empty()) std::cout << child_output << std::flush;
    record.cases.push_back({std::string(c->name), std::string(c->summary),
                            died.value_or(verdict_of(r.outcome)), r.elapsed.count(), reason,
                            known.reason(target.plugin, c->name).value_or("")});
  }
  std::cout << tally.line() << std::endl;
  if (json_file && !write_text_file(*json_file, gpuplug::tool::to_json(record), "--json"))
    return exit_usage;
  if (junit_file && !write_text_file(*junit_file, gpuplug::tool::to_junit(record), "--junit"))
    return exit_usage;
  if (!unavailable.empty()) return exit_unavailable;
  return tally.failed == 0 ? 0 : exit_failed;
}

int run_check(int argc, char** argv) {
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return run_check(std::span<const std::string_view>(args));
}
