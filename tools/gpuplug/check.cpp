// SPDX-License-Identifier: Apache-2.0
// `gpuplug check`: runs the conformance cases against one backend and prints a verdict table.
//
//   gpuplug check [--backend SEL | --plugin FILE] [--case TEXT]... [--known-failures FILE]
//   gpuplug check --list            the cases, one a line, with what each checks
//   gpuplug check --list-plugins    one line per candidate plugin: name, state, reason, devices,
//                                   message (tab-separated; what scripts/lib/matrix.sh reads)
//
// Output: a header naming the backend and why it was chosen, one row per case as it finishes
// (case, result, time, reason), and a last line that is exactly "N passed, N failed, N skipped".
// Known failures (known_failures.txt) that fail count as skipped ("xfail", with the reason);
// listed ones that pass count as failed ("XPASS"), so the list stays honest.
// Exit status: 0 nothing failed; 1 a case failed; 2 usage error; 3 the backend is unavailable
// (every case is then reported skipped with the reason).
#include "check.hpp"

#include <unistd.h>

#include <algorithm>
#include <cases.hpp>
#include <csignal>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace conf = gpuplug::conformance;

namespace {

constexpr int exit_failed = 1;
constexpr int exit_usage = 2;
constexpr int exit_unavailable = 3;

void print_usage(std::ostream& os) {
  os << "usage: gpuplug check [--backend SEL | --plugin FILE] [--case TEXT]... [--known-failures "
        "FILE]\n"
        "       gpuplug check --list | --list-plugins\n"
        "\n"
        "Runs the conformance suite against one backend: a plugin author's first test.\n"
        "\n"
        "  --backend SEL          selector as for the API: auto (default; GPUPLUG_BACKEND "
        "applies),\n"
        "                         cuda, hip:1, host, cuda,host ...\n"
        "  --plugin FILE          test this plugin file (device 0) instead of a discovered one\n"
        "  --case TEXT            run only the cases whose name contains TEXT (repeatable)\n"
        "  --known-failures FILE  known failures (default: "
        "share/gpuplug/conformance/known_failures.txt\n"
        "                         beside the tool, or GPUPLUG_KNOWN_FAILURES)\n"
        "  --list                 list the cases and exit\n"
        "  --list-plugins         list candidate plugins as tab-separated lines and exit\n"
        "\n"
        "The last line is 'N passed, N failed, N skipped' (xfail counts as skipped, XPASS as "
        "failed).\n"
        "Exit status: 0 nothing failed, 1 a case failed, 2 usage error, 3 backend unavailable.\n";
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

int list_cases() {
  std::size_t width = 0;
  for (const auto& c : conf::all_cases()) width = std::max(width, c.name.size());
  for (const auto& c : conf::all_cases()) {
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

}  // namespace

int run_check(std::span<const std::string_view> args) {
  std::optional<std::string> backend;
  std::optional<std::string> plugin_file;
  std::optional<std::string> known_file;
  std::vector<std::string_view> filters;
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
      return list_cases();
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
    } else if (a == "--case") {
      if (i + 1 >= args.size()) return usage_error("--case needs a text");
      filters.push_back(args[++i]);
    } else {
      return usage_error("unknown option '" + std::string(a) + "'");
    }
  }
  if (backend && plugin_file) return usage_error("--backend and --plugin exclude each other");

  std::vector<const conf::Case*> cases;
  for (const auto& c : conf::all_cases()) {
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
  } catch (const std::exception& e) {
    unavailable = e.what();
  }

  std::cout << "gpuplug check " << gpuplug::version_string;
  if (!conf::sanitizer_name().empty())
    std::cout << " (built with " << conf::sanitizer_name() << ")";
  std::cout << "\n";
  std::cout << "backend:        " << (unavailable.empty() ? chosen : "unavailable: " + unavailable)
            << "\n";
  std::cout << "known failures: " << known_path.string() << " (" << known.size() << " entries)\n";
  for (const auto& problem : known.problems()) std::cout << "warning:        " << problem << "\n";
  std::cout << "\n";

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

  install_crash_note();
  conf::Tally tally;
  for (const auto* c : cases) {
    name_cell(c->name);
    if (!unavailable.empty()) {
      tally.add(conf::Outcome::skipped);
      rest("skipped", "-", "backend unavailable");
      continue;
    }
    const conf::Result r = conf::run_case(*c, target, known);
    tally.add(r.outcome);
    std::string reason = r.reason;
    for (const auto& n : r.notes) reason += (reason.empty() ? "" : "; ") + n;
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.0f ms", r.elapsed.count() * 1000.0);
    rest(conf::to_string(r.outcome), ms, one_line(reason));
  }
  std::cout << tally.line() << std::endl;
  if (!unavailable.empty()) return exit_unavailable;
  return tally.failed == 0 ? 0 : exit_failed;
}

int run_check(int argc, char** argv) {
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return run_check(std::span<const std::string_view>(args));
}
