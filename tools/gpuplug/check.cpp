// SPDX-License-Identifier: Apache-2.0
// `gpuplug check`: runs the conformance cases against one backend and prints a verdict table.
//
//   gpuplug check [--backend SEL | --plugin FILE] [--case TEXT]... [--known-failures FILE]
//                 [--timeout SECONDS | --no-isolate]
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
// Every case runs in a child process of its own unless --no-isolate (this program again, from
// /proc/self/exe, with the internal options --run-case NAME --result-pipe INODE; the child
// writes its Result to descriptor 3 once it has checked that 3 is that pipe): a case that crashes,
// exits or hangs is a failed row naming the signal, the exit status or the time limit, and the run
// goes on. Each case has --timeout SECONDS, else default_case_timeout_s(): a hung thread cannot be
// stopped inside this process. A child that dies after it wrote its whole record fails that case
// as having died after it ended (a thread the case left behind), never the next one. A child's
// own output is collected, never interleaved with the table, and shown (its last lines) under a
// row that did not pass. --no-isolate runs the cases in this process: a crash ends the run (its
// last row names the case) and a hang hangs it.
// The lints that load the plugin always run in a child (--run-lints FILE, on the same kind of
// result pipe, at most --timeout or 60 s), so that a plugin that crashes, exits or hangs while it
// loads fails them instead of ending the run.
// Exit status: 0 nothing failed; 1 a case or a lint failed; 2 usage error; 3 the backend is
// unavailable (every case is then reported skipped with the reason).
#include "check.hpp"

#include <algorithm>
#include <cases.hpp>
#include <cstdio>
#include <fstream>
#include <gpuplug/support/escape.hpp>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "case_library.hpp"
#include "check_child.hpp"
#include "check_options.hpp"
#include "cli.hpp"
#include "lint.hpp"
#include "results.hpp"

namespace conf = gpuplug::conformance;
using gpuplug::tool::CheckOptions;
using gpuplug::tool::UserCases;

namespace {

constexpr int exit_failed = 1;
constexpr int exit_usage = gpuplug::tool::exit_usage;
constexpr int exit_unavailable = 3;

int usage_error(const std::string& message) { return gpuplug::tool::usage_error("check", message); }

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

int list_cases(std::span<const conf::Case> cases) {
  std::size_t width = 0;
  for (const auto& c : cases) width = std::max(width, c.name.size());
  for (const auto& c : cases) {
    std::cout << std::left << std::setw(static_cast<int>(width)) << c.name << "  " << c.summary
              << '\n';
  }
  return 0;
}

bool selected(const conf::Case& c, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  return std::any_of(filters.begin(), filters.end(),
                     [&](std::string_view f) { return c.name.find(f) != std::string_view::npos; });
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

/// How long the child that loads the plugin for the lints may take under --no-isolate (no case
/// time limit): loading and three calls of the entry point take milliseconds, a minute only
/// stops a hang.
constexpr long lint_load_timeout_s = 60;

/// Runs the lints on `file` and prints one line each ("lint exports: ok", "lint runpath: FAILED:
/// <why>"), counted in `tally` as passed or failed: first those that only read the file, then,
/// when it is a well-formed shared object, those that load it. Those always run in a child
/// process, isolated or not: the file may be one the registry has just seen crash its
/// probe, and with --no-isolate the cases are then skipped, so the lints would be the only code
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
    print(gpuplug::tool::loaded_lints_isolated(file, timeout_s > 0 ? timeout_s : lint_load_timeout_s));
  }
  std::cout << "\n" << std::flush;
}

/// The backend under test: the target, the header's words for it, or why it is unavailable (an
/// unavailable backend still gets the table, every case skipped with the reason).
struct Chosen {
  conf::Target target;
  std::string words;
  std::string unavailable;
};

Chosen choose_target(const CheckOptions& o) {
  Chosen c;
  try {
    if (o.plugin_file) {
      c.target = conf::target_for_plugin_file(*o.plugin_file);
      c.words = c.target.backend_name() + " from " + c.target.plugin_file.string();
    } else {
      const std::string selector = o.backend.value_or("auto");
      c.target = conf::target_for_selector(selector);
      c.words = c.target.backend_name() + " (selector '" + selector + "') from " +
                c.target.plugin_file.string();
    }
    if (o.modules) c.target.user_modules = *o.modules;
  } catch (const std::exception& e) {
    c.unavailable = e.what();
  }
  return c;
}

void print_header(const CheckOptions& o, const Chosen& chosen,
                  const std::filesystem::path& known_path, const conf::KnownFailures& known,
                  const UserCases& user) {
  std::cout << "gpuplug check " << gpuplug::version_string;
  if (!conf::sanitizer_name().empty())
    std::cout << " (under " << conf::sanitizer_name() << ")";
  std::cout << "\n";
  std::cout << "backend:        "
            << (chosen.unavailable.empty() ? chosen.words : "unavailable: " + chosen.unavailable)
            << "\n";
  std::cout << "known failures: " << known_path.string() << " (" << known.size() << " entries)\n";
  if (o.isolate) {
    std::cout << "isolation:      one process per case, at most " << o.timeout_s << " s each\n";
  } else {
    std::cout << "isolation:      none (--no-isolate): a crash ends the run, a hang hangs it\n";
  }
  for (const auto& problem : known.problems(user.cases))
    std::cout << "warning:        " << problem << "\n";
  if (o.modules && chosen.unavailable.empty()) {
    if (const auto w = conf::flat_modules_warning(*o.modules, chosen.target.plugin); !w.empty())
      std::cout << "warning:        " << gpuplug::support::escape_text(w) << "\n";
  }
  std::cout << "\n";
}

/// The table: one row per case as it finishes, each counted in `tally` and kept in `record`.
void run_cases(const CheckOptions& o, const Chosen& chosen, std::span<const conf::Case* const> cases,
               const std::filesystem::path& known_path, const conf::KnownFailures& known,
               const UserCases& user, conf::Tally& tally, gpuplug::tool::RunRecord& record) {
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

  if (!o.isolate) gpuplug::tool::install_crash_note();
  for (const auto* c : cases) {
    name_cell(c->name);
    if (!chosen.unavailable.empty()) {
      tally.add(conf::Outcome::skipped);
      rest("skipped", "-", "backend unavailable");
      record.cases.push_back({std::string(c->name), std::string(c->summary),
                              gpuplug::tool::Verdict::skipped, 0.0,
                              "backend unavailable: " + chosen.unavailable});
      continue;
    }
    std::string child_output;
    std::optional<gpuplug::tool::Verdict> died;
    conf::Result r;
    if (o.isolate) {
      r = gpuplug::tool::run_isolated(*c, chosen.target, o.plugin_file, known_path, known,
                                      o.timeout_s, user, child_output, died);
    } else {
      gpuplug::tool::note_case_running(true);
      r = conf::run_case(*c, chosen.target, known);
      gpuplug::tool::note_case_running(false);
    }
    tally.add(r.outcome);
    std::string reason = r.reason;
    for (const auto& n : r.notes) reason += (reason.empty() ? "" : "; ") + n;
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.0f ms", r.elapsed.count() * 1000.0);
    rest(conf::to_string(r.outcome), ms, one_line(reason));
    if (!child_output.empty()) std::cout << child_output << std::flush;
    record.cases.push_back({std::string(c->name), std::string(c->summary),
                            died.value_or(verdict_of(r.outcome)), r.elapsed.count(), reason,
                            known.reason(chosen.target.plugin, c->name).value_or("")});
  }
}

/// The suite against one backend: header, lints, the table, the tally line, --json and --junit.
int run_suite(const CheckOptions& o, std::span<const conf::Case> all, const UserCases& user) {
  std::vector<const conf::Case*> cases;
  for (const auto& c : all) {
    if (selected(c, o.filters)) cases.push_back(&c);
  }
  if (cases.empty()) return usage_error("no case matches the --case filters (see --list)");

  const std::filesystem::path known_path =
      o.known_file ? std::filesystem::path(*o.known_file) : conf::KnownFailures::default_file();
  const conf::KnownFailures known = conf::KnownFailures::load(known_path);
  const Chosen chosen = choose_target(o);
  print_header(o, chosen, known_path, known, user);

  gpuplug::tool::RunRecord record = run_record(chosen.target, o.plugin_file, o.backend,
                                               chosen.unavailable);
  record.isolated = o.isolate;
  record.timeout_s = o.timeout_s;

  // The lints, before the cases: on the file given, or on the file of the plugin selected.
  // --only-user leaves them out with the built-in cases: the run is about the user's kernels.
  conf::Tally tally;
  if (o.only_user) {
    // nothing: the lints belong to the built-in suite
  } else if (o.plugin_file) {
    run_lints(*o.plugin_file, o.timeout_s, tally, record.cases);
  } else if (chosen.unavailable.empty()) {
    run_lints(chosen.target.plugin_file, o.timeout_s, tally, record.cases);
  }
  run_cases(o, chosen, cases, known_path, known, user, tally, record);
  std::cout << tally.line() << std::endl;
  if (o.json_file && !write_text_file(*o.json_file, gpuplug::tool::to_json(record), "--json"))
    return exit_usage;
  if (o.junit_file && !write_text_file(*o.junit_file, gpuplug::tool::to_junit(record), "--junit"))
    return exit_usage;
  if (!chosen.unavailable.empty()) return exit_unavailable;
  return tally.failed == 0 ? 0 : exit_failed;
}

}  // namespace

int run_check(std::span<const std::string_view> args) {
  auto parsed = gpuplug::tool::parse_check_options(args);
  if (const int* status = std::get_if<int>(&parsed)) return *status;
  const CheckOptions& o = std::get<CheckOptions>(parsed);
  if (o.list_plugins) return list_plugins();
  if (o.run_lints_file)
    return gpuplug::tool::run_loaded_lints(*o.run_lints_file, o.result_pipe);

  UserCases user;
  user.files = o.case_files;
  user.modules = o.modules;
  try {
    user.cases = gpuplug::tool::load_case_libraries(user.files, conf::all_cases());
  } catch (const gpuplug::tool::BadCaseLibrary& e) {
    return usage_error(e.what());
  }
  std::vector<conf::Case> all;
  if (!o.only_user || o.run_case_name)
    all.assign(conf::all_cases().begin(), conf::all_cases().end());
  all.insert(all.end(), user.cases.begin(), user.cases.end());
  if (o.list) return list_cases(all);
  if (o.run_case_name) {
    const std::filesystem::path path =
        o.known_file ? std::filesystem::path(*o.known_file) : conf::KnownFailures::default_file();
    return gpuplug::tool::run_one_case(*o.run_case_name, o.result_pipe, o.backend, o.plugin_file,
                                       conf::KnownFailures::load(path), all, user);
  }
  return run_suite(o, all, user);
}

int run_check(int argc, char** argv) {
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return run_check(std::span<const std::string_view>(args));
}
