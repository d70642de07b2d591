// SPDX-License-Identifier: Apache-2.0
#include "check_child.hpp"

#include <sys/syscall.h>
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

/// Whether a case is running in this process (set around it by the in-process run), read by
/// crash_note.
volatile std::sig_atomic_t case_running = 0;

void write_text(const char* text, std::size_t size) { (void)!::write(STDOUT_FILENO, text, size); }

/// Finishes the row of a case that crashes the process, then lets the signal do its default.
/// Only async-signal-safe calls. A crash in another thread than the one running the case may be
/// a worker of that case or a thread an earlier case left behind, and one between cases is the
/// latter: the note says which it can tell, never blaming a case it cannot.
extern "C" void crash_note(int sig) {
  static const char in_case[] = "CRASHED: the process died in this case (signal ";
  static const char other_thread[] =
      "CRASHED: the process died in this case, in another thread than the case's: one of its "
      "workers, or a thread an earlier case left behind? (isolated runs tell) (signal ";
  static const char no_case[] =
      "CRASHED: the process died while no case was running, in a thread a case left behind? "
      "(signal ";
  const bool main_thread = ::syscall(SYS_gettid) == ::getpid();
  if (case_running == 0) {
    write_text("\n", 1);  // off the row or the summary line it may interrupt
    write_text(no_case, sizeof no_case - 1);
  } else if (main_thread) {
    write_text(in_case, sizeof in_case - 1);
  } else {
    write_text(other_thread, sizeof other_thread - 1);
  }
  char digits[4] = {static_cast<char>('0' + sig / 10 % 10), static_cast<char>('0' + sig % 10), ')',
                    '\n'};
  write_text(digits, sizeof digits);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void install_crash_note() {
  if (!conf::sanitizer_name().empty()) return;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, crash_note);
}

void note_case_running(bool running) { case_running = running ? 1 : 0; }

namespace {

// ---- --isolate: the child's record ------------------------------------------------------------
// One record per child on descriptor 3: "<outcome>\n<milliseconds>\n<reason bytes>\n<reason>".
// The parent trusts none of it: an unknown outcome, a bad number or an oversized record fails the
// case. The reason's length makes a whole record tell from one cut short, so that a child that
// dies after it wrote its record is known to have died after its case ended.

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
  return std::string(conf::to_string(r.outcome)) + "\n" + std::to_string(ms) + "\n" +
         std::to_string(reason.size()) + "\n" + reason;
}

/// A line of decimal digits at the start of `text` (at most 12), consumed with its newline.
std::optional<long long> take_number(std::string_view& text) {
  const auto nl = text.find('\n');
  if (nl == std::string_view::npos) return std::nullopt;
  const std::string_view digits = text.substr(0, nl);
  if (digits.empty() || digits.size() > 12 ||
      digits.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  text.remove_prefix(nl + 1);
  return std::stoll(std::string(digits));
}

/// The parent's reading of a whole record; the defect in words when it is not one.
std::optional<conf::Result> decode_result(std::string_view text, std::string& defect) {
  if (text.empty()) {
    defect = "left no result";
    return std::nullopt;
  }
  const auto nl = text.find('\n');
  if (nl == std::string_view::npos) {
    defect = "its result record is cut short";
    return std::nullopt;
  }
  const auto outcome = outcome_named(text.substr(0, nl));
  if (!outcome) {
    defect = "its result record names no outcome";
    return std::nullopt;
  }
  std::string_view rest = text.substr(nl + 1);
  const auto ms = take_number(rest);
  if (!ms) {
    defect = "its result record has no time in milliseconds";
    return std::nullopt;
  }
  const auto reason_bytes = take_number(rest);
  if (!reason_bytes || static_cast<std::size_t>(*reason_bytes) != rest.size()) {
    defect = "its result record is cut short";
    return std::nullopt;
  }
  conf::Result r;
  r.outcome = *outcome;
  r.elapsed = std::chrono::duration<double>(static_cast<double>(*ms) / 1000.0);
  // The child's text reaches the terminal: control characters escaped, invalid UTF-8 shown as hex.
  r.reason = gpuplug::support::escape_text(rest);
  return r;
}

}  // namespace

int run_one_case(std::string_view name, std::string_view result_pipe,
                 const std::optional<std::string>& backend,
                 const std::optional<std::string>& plugin_file, const conf::KnownFailures& known,
                 std::span<const conf::Case> cases, const UserCases& user) {
  if (!is_result_pipe(result_pipe))
    return usage_error(
        "--run-case is internal to isolated runs (descriptor 3 is not its result pipe)");
  const auto it =
      std::find_if(cases.begin(), cases.end(), [&](const conf::Case& c) { return c.name == name; });
  if (it == cases.end())
    return usage_error("--run-case: no case is named '" + std::string(name) + "'");
  conf::Result r;
  // The target (its registries, the plugin they loaded) outlives the record: what comes after the
  // record, the plugin's unloading and this process's exit, comes after the case has ended, and
  // the parent reports a death there as such.
  conf::Target target;
  try {
    target = plugin_file ? conf::target_for_plugin_file(*plugin_file)
                         : conf::target_for_selector(backend.value_or("auto"));
    if (user.modules) target.user_modules = *user.modules;
    install_crash_note();
    note_case_running(true);
    r = conf::run_case(*it, target, known);
    note_case_running(false);
  } catch (const std::exception& e) {
    note_case_running(false);
    r.outcome = conf::Outcome::failed;
    r.reason = std::string("the backend is unavailable in the child process: ") + e.what();
  }
  const bool sent = write_all(child_result_fd, encode_result(r));
  ::close(child_result_fd);
  return sent ? 0 : exit_failed;
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
  const std::optional<conf::Result> decoded =
      run.result_overflow ? std::nullopt : decode_result(run.result, defect);
  const bool exited_0 = WIFEXITED(run.wait_status) && WEXITSTATUS(run.wait_status) == 0;
  const std::string timed_out_words = "timed out after " + std::to_string(timeout_s) + " s (" +
                                      describe_wait_status(run.wait_status) + ")";
  if (!run.spawn_error.empty()) {
    why = "could not run the case in a child process: " + run.spawn_error;
  } else if (decoded && (run.timed_out || !exited_0)) {
    // The whole record came first: the case had ended, and something it left running (a thread,
    // an unload that waits for one) killed or stalled the process after it. That case's plugin
    // is broken, so the row fails, saying when it died; the next case is not involved.
    const std::string after =
        " after the case '" + std::string(c.name) + "' had ended (a thread it left behind?)";
    if (run.timed_out) {
      why = "hung" + after + ": " + timed_out_words;
      died = Verdict::timed_out;
    } else if (WIFSIGNALED(run.wait_status)) {
      why = "crashed" + after + ": " + describe_wait_status(run.wait_status);
      died = Verdict::crashed;
    } else {
      why = "the child " + describe_wait_status(run.wait_status) + after;
    }
    why += "; the case itself " + std::string(conf::to_string(decoded->outcome));
    if (!decoded->reason.empty()) why += ": " + decoded->reason;
    r.elapsed = decoded->elapsed;
  } else if (run.timed_out) {
    why = timed_out_words;
    died = Verdict::timed_out;
  } else if (WIFSIGNALED(run.wait_status)) {
    why = "crashed: " + describe_wait_status(run.wait_status);
    died = Verdict::crashed;
  } else if (run.result_overflow) {
    why = "the child sent a result record over " +
          std::to_string(max_child_result_bytes) + " bytes";
  } else if (decoded) {  // a whole record, and the child exited 0
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
