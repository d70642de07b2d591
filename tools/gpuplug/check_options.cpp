// SPDX-License-Identifier: Apache-2.0
#include "check_options.hpp"

#include <cases.hpp>
#include <gpuplug/support/escape.hpp>

#include "cli.hpp"
#include "isolate.hpp"

namespace gpuplug::tool {

namespace {

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

int usage(const std::string& message) { return usage_error("check", message); }

}  // namespace

long default_case_timeout_s() {
  return conformance::sanitizer_name().empty() ? default_timeout_seconds
                                               : default_timeout_seconds_sanitized;
}

void print_check_usage(std::ostream& os) {
  os << "usage: gpuplug check [--backend SEL | --plugin FILE] [--case TEXT]... [--known-failures "
        "FILE]\n"
        "                     [--timeout SECONDS | --no-isolate] [--json FILE] [--junit FILE]\n"
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
        "name and abi_answer load it in a child process (at most the per-case time limit; 60 s\n"
        "with --no-isolate), so a plugin that crashes or hangs while loading fails them and the\n"
        "run goes on.\n"
        "\n"
        "Each case runs in a child process of its own: a crash (named by its signal), an exit\n"
        "or a hang fails that case and the run goes on; the child's output is shown under a\n"
        "row that did not pass. A child that dies after its case has ended (a thread the case\n"
        "left behind) fails that case, saying so.\n"
        "\n"
        "  --backend SEL          selector as for the API: auto (default; GPUPLUG_BACKEND "
        "applies),\n"
        "                         cuda, hip:1, host, cuda,host ...\n"
        "  --plugin FILE          test this plugin file (device 0) instead of a discovered one\n"
        "  --case TEXT            run only the cases whose name contains TEXT (repeatable)\n"
        "  --known-failures FILE  known failures (default: "
        "share/gpuplug/conformance/known_failures.txt\n"
        "                         beside the tool, or GPUPLUG_KNOWN_FAILURES)\n"
        "  --timeout SECONDS      per case, 1 to 86400 (default 60; 600 in a sanitizer build):\n"
        "                         a case still running then gets SIGTERM, SIGKILL 2 s later,\n"
        "                         and fails 'timed out'\n"
        "  --no-isolate           run every case in this process instead: faster, but a crash\n"
        "                         ends the run and a hang hangs it\n"
        "  --isolate              the default (deprecated: accepted for this release, does\n"
        "                         nothing)\n"
        "  --json FILE            also write the run as JSON (share/gpuplug/check.schema.json):\n"
        "                         machine, backend, device identity, versions, every case's\n"
        "                         status, time and message; `gpuplug matrix` merges such files\n"
        "  --junit FILE           also write the run as JUnit XML for CI test reporters\n"
        "  --cases LIB.so         also run the cases a library of your own lists\n"
        "                         (<gpuplug/conformance.hpp>, GPUPLUG_CONFORMANCE_CASES); "
        "repeatable\n"
        "  --modules DIR          your cases' kernel modules: DIR/<plugin>/<module>.* (a module\n"
        "                         not found there fails the case; a flat DIR is still read)\n"
        "  --only-user            run only the --cases cases: not the built-in suite, not the "
        "lints\n"
        "  --list                 list the cases (with --cases: yours too) and exit\n"
        "  --list-plugins         list candidate plugins as tab-separated lines and exit\n"
        "\n"
        "The last line is 'N passed, N failed, N skipped' (each lint counts as passed or failed;\n"
        "xfail counts as skipped; XPASS, crashed and timed-out cases as failed).\n"
        "Exit status: 0 nothing failed, 1 a case or a lint failed, 2 usage error, 3 backend\n"
        "unavailable.\n";
}

std::variant<CheckOptions, int> parse_check_options(std::span<const std::string_view> args) {
  CheckOptions o;
  std::optional<std::string> timeout;
  CommandLine cli("check", print_check_usage);
  cli.value("--backend", o.backend, "a selector");
  cli.value("--plugin", o.plugin_file, "a file");
  cli.value("--known-failures", o.known_file, "a file");
  cli.values("--case", o.filters, "a text");
  bool isolate_flag = false, no_isolate = false;
  cli.flag("--isolate", isolate_flag);
  cli.flag("--no-isolate", no_isolate);
  cli.value("--timeout", timeout, "a number of seconds");
  cli.value("--json", o.json_file, "a file to write");
  cli.value("--junit", o.junit_file, "a file to write");
  cli.values("--cases", o.case_files, "a shared library of cases");
  cli.value("--modules", o.modules, "a folder");
  cli.flag("--only-user", o.only_user);
  cli.flag("--list", o.list);
  cli.flag("--list-plugins", o.list_plugins);
  cli.value("--run-case", o.run_case_name, "a case name");
  cli.value("--run-lints", o.run_lints_file, "a plugin file");
  cli.value(std::string(result_pipe_option), o.result_pipe, "an inode number");
  if (const auto status = cli.parse(args)) return *status;

  if (timeout) {
    const auto t = parse_timeout(*timeout);
    if (!t) {
      return usage("--timeout needs whole seconds from 1 to " +
                   std::to_string(max_timeout_seconds) + ", not '" +
                   support::escape_text(*timeout) + "'");
    }
    o.timeout_s = *t;
  }
  // A hung case can only be stopped by killing its process: no time limit in process.
  if (no_isolate && timeout)
    return usage(
        "--timeout and --no-isolate exclude each other: a time limit needs a process per case");
  if (no_isolate && isolate_flag) return usage("--isolate and --no-isolate exclude each other");
  o.isolate = !no_isolate;
  if (o.isolate && o.timeout_s == 0) o.timeout_s = default_case_timeout_s();
  if (o.list_plugins) return o;
  if (o.backend && o.plugin_file) return usage("--backend and --plugin exclude each other");
  const bool isolation_asked = isolate_flag || no_isolate || timeout;
  if (o.run_lints_file &&
      (o.run_case_name || o.backend || o.plugin_file || isolation_asked || !o.filters.empty()))
    return usage("--run-lints (internal) takes no other option but --result-pipe");
  if (o.run_lints_file) return o;
  if (o.only_user && o.case_files.empty())
    return usage("--only-user needs --cases FILE (the cases to run instead of the built-in ones)");
  if (o.run_case_name && !o.list &&
      (isolation_asked || !o.filters.empty() || o.json_file || o.junit_file))
    return usage(
        "--run-case (internal) takes no --isolate, --no-isolate, --timeout, --case, --json or "
        "--junit");
  return o;
}

}  // namespace gpuplug::tool
