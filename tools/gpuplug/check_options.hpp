// SPDX-License-Identifier: Apache-2.0
// The options of `gpuplug check`, read from its command line, and its help text.
#pragma once

#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace gpuplug::tool {

/// What `gpuplug check` was asked to do. Cases run isolated unless --no-isolate, each with
/// timeout_s (--timeout, else default_case_timeout_s()). The internal modes (run_case, run_lints)
/// are the child processes of isolation and of the lints; result_pipe is then run_child's inode
/// number.
struct CheckOptions {
  std::optional<std::string> backend;         // --backend SEL
  std::optional<std::string> plugin_file;     // --plugin FILE
  std::optional<std::string> known_file;      // --known-failures FILE
  std::vector<std::string> filters;           // --case TEXT...
  bool isolate = true;                        // false: --no-isolate (in process)
  long timeout_s = 0;                         // per isolated case; 0 only with --no-isolate
  std::optional<std::string> json_file;       // --json FILE
  std::optional<std::string> junit_file;      // --junit FILE
  std::vector<std::string> case_files;        // --cases LIB.so..., in order
  std::optional<std::string> modules;         // --modules DIR
  bool only_user = false;                     // --only-user
  bool list = false;                          // --list
  bool list_plugins = false;                  // --list-plugins
  std::optional<std::string> run_case_name;   // --run-case NAME (internal)
  std::optional<std::string> run_lints_file;  // --run-lints FILE (internal)
  std::string result_pipe;                    // --result-pipe INODE (internal)
};

/// The largest --timeout, in seconds (a day).
inline constexpr long max_timeout_seconds = 86400;
/// The per-case limit of an isolated run without --timeout: far above the slowest case (the
/// lifecycle cycles, about a second on host), short enough that a hang ends a first run soon.
inline constexpr long default_timeout_seconds = 60;
/// The same under a sanitizer, where every case runs several times slower.
inline constexpr long default_timeout_seconds_sanitized = 600;

/// default_timeout_seconds, or default_timeout_seconds_sanitized when this process runs under a
/// sanitizer.
long default_case_timeout_s();

/// The options in `args` (what follows "check"), checked for the combinations that make no
/// sense; or the exit status to return at once: 0 after --help, 2 after a usage error (said on
/// stderr).
std::variant<CheckOptions, int> parse_check_options(std::span<const std::string_view> args);

void print_check_usage(std::ostream& os);

}  // namespace gpuplug::tool
