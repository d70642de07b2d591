// SPDX-License-Identifier: Apache-2.0
#include "check_child.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <gpuplug/support/escape.hpp>

#include "cli.hpp"
#include "isolate.hpp"

namespace gpuplug::tool {

namespace conf = gpuplug::conformance;

namespace {

constexpr int exit_failed = 1;

int usage_error(const std::string& message) { return tool::usage_error("check", message); }

/// Finishes the row of a case that crashes the process, then lets the signal do its default.
extern "C" void crash_note(int sig) {
  static const char text[] = "CRASHED: the process died in this case (signal ";
  (void)!::write(STDOUT_FILENO, text, sizeof text - 1);
  char digits[4] = {static_cast<char>('0' + sig / 10 % 10), static_cast<char>('0' + sig % 10), ')',
                    '\n'};
  (void)!::write(STDOUT_FILENO, digits, sizeof digits);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void install_crash_note() {
  if (!conf::sanitizer_name().empty()) return;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, crash_note);
}


namespace {

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
  reason = reason.substr(0, max_child_result_bytes / 2);
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

}  // namespace

int run_one_case(std::string_view name, std::string_view result_pipe,
                 const std::optional<std::string>& backend,
                 const std::optional<std::string>& plugin_file, const conf::KnownFailures& known,
                 std::span<const conf::Case> cases, const UserCases& user) {
  if (!is_result_pipe(result_pipe))
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
  return write_all(child_result_fd, encode_result(r)) ? 0 : exit_failed;
}

namespace {

/// The last lines of a child's output, each prefixed, control characters escaped, for the
/// lines under a row.
std::string output_tail(const ChildRun& run) {
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

}  // namespace

conf::Result run_isolated(const conf::Case& c, const conf::Target& target,
                          const std::optional<std::string>& plugin_file,
                          const std::filesystem::path& known_path, const conf::KnownFailures& known,
                          long timeout_s, const UserCases& user, std::string& output,
                          std::optional<Verdict>& died) {
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
  const auto run = run_child(args, std::chrono::seconds(timeout_s));
  conf::Result r;
  r.elapsed = run.elapsed;
  std::string why;
  std::string defect;
  if (!run.spawn_error.empty()) {
    why = "could not run the case in a child process: " + run.spawn_error;
  } else if (run.timed_out) {
    why = "timed out after " + std::to_string(timeout_s) + " s (" +
          describe_wait_status(run.wait_status) + ")";
    died = Verdict::timed_out;
  } else if (WIFSIGNALED(run.wait_status)) {
    why = "crashed: " + describe_wait_status(run.wait_status);
    died = Verdict::crashed;
  } else if (run.result_overflow) {
    why = "the child sent a result record over " +
          std::to_string(max_child_result_bytes) + " bytes";
  } else if (const auto decoded = decode_result(run.result, defect);
             decoded && WIFEXITED(run.wait_status) && WEXITSTATUS(run.wait_status) == 0) {
    r = *decoded;
  } else {
    why = "the child " + describe_wait_status(run.wait_status) +
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

int run_loaded_lints(std::string_view file, std::string_view result_pipe) {
  if (!is_result_pipe(result_pipe))
    return usage_error(
        "--run-lints is internal to the lints (descriptor 3 is not its result pipe)");
  const auto results = lint_loaded(std::filesystem::path(file));
  return write_all(child_result_fd, encode_lints(results))
             ? 0
             : exit_failed;
}

std::vector<LintResult> loaded_lints_isolated(const std::filesystem::path& file,
                                                             long timeout_s) {
  const auto run = run_child({"gpuplug", "check", "--run-lints", file.string()},
                                            std::chrono::seconds(timeout_s));
  std::string why;
  std::string defect;
  if (!run.spawn_error.empty()) {
    why = "could not load the plugin in a child process: " + run.spawn_error;
  } else if (run.timed_out) {
    why = "loading the plugin and calling its entry point timed out after " +
          std::to_string(timeout_s) + " s (" +
          describe_wait_status(run.wait_status) + ")";
  } else if (WIFSIGNALED(run.wait_status)) {
    why = "the process that loaded the plugin crashed: " +
          describe_wait_status(run.wait_status);
  } else if (const auto decoded = decode_lints(run.result, defect);
             decoded && WIFEXITED(run.wait_status) && WEXITSTATUS(run.wait_status) == 0) {
    return *decoded;
  } else {
    why = "the process that loaded the plugin " +
          describe_wait_status(run.wait_status) +
          (decoded ? "" : " and " + (run.result.empty() ? std::string("left no result") : defect));
  }
  return loaded_lints_failed(why);
}

}  // namespace gpuplug::tool
