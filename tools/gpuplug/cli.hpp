// SPDX-License-Identifier: Apache-2.0
// The command line of every `gpuplug` command, parsed by CLI11: help, unknown options with a
// did-you-mean, options that lack their value and the usage exit status are handled here once.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpuplug::tool {

/// The exit status of every usage error.
inline constexpr int exit_usage = 2;

/// Prints "gpuplug <command>: <message>" and where the help is; returns exit_usage.
/// `command` empty: the top level ("gpuplug: ...", "run 'gpuplug --help'").
int usage_error(std::string_view command, const std::string& message);

/// One command's options. Values are taken by the last occurrence of an option; `-h`/`--help`
/// prints the command's help text. Options that take a value name what they need ("--backend
/// needs a selector"), the message of a usage error when the value is missing.
class CommandLine {
 public:
  CommandLine(std::string command, std::function<void(std::ostream&)> help);

  CLI::App& app() { return app_; }
  CLI::Option* flag(const std::string& names, bool& into);
  CLI::Option* value(const std::string& names, std::optional<std::string>& into, std::string needs);
  CLI::Option* value(const std::string& names, std::string& into, std::string needs);
  CLI::Option* values(const std::string& names, std::vector<std::string>& into, std::string needs);
  /// Arguments that are not options, in order (file names).
  CLI::Option* positionals(const std::string& name, std::vector<std::string>& into);

  /// Parses `args` (what follows the command's name). nullopt: go on; else the exit status to
  /// return now: 0 after the help, exit_usage after a usage error (said on stderr).
  std::optional<int> parse(std::span<const std::string_view> args);

 private:
  CLI::Option* needs_value(CLI::Option* option, std::string needs);
  std::string did_you_mean(std::string_view unknown) const;

  std::string command_;
  std::function<void(std::ostream&)> help_;
  CLI::App app_;
  bool help_asked_ = false;
  std::map<std::string, std::string> needs_;  // "--backend" -> "a selector"
};

}  // namespace gpuplug::tool
