// SPDX-License-Identifier: Apache-2.0
#include "cli.hpp"

#include <algorithm>
#include <iostream>

#include <gpuplug/support/edit_distance.hpp>
#include <gpuplug/support/escape.hpp>

namespace gpuplug::tool {

int usage_error(std::string_view command, const std::string& message) {
  const std::string name = command.empty() ? "gpuplug" : "gpuplug " + std::string(command);
  std::cerr << name << ": " << message << "\n(run '" << name << " --help' for usage)\n";
  return exit_usage;
}

CommandLine::CommandLine(std::string command, std::function<void(std::ostream&)> help)
    : command_(std::move(command)), help_(std::move(help)), app_("gpuplug " + command_) {
  app_.set_help_flag();  // the command's own text, below
  app_.add_flag("-h,--help", help_asked_);
  app_.allow_extras();  // unknown options are reported here, with a did-you-mean
}

CLI::Option* CommandLine::flag(const std::string& names, bool& into) {
  return app_.add_flag(names, into);
}

CLI::Option* CommandLine::needs_value(CLI::Option* option, std::string needs) {
  option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  for (const std::string& name : option->get_lnames()) needs_["--" + name] = needs;
  for (const std::string& name : option->get_snames()) needs_["-" + name] = needs;
  return option;
}

CLI::Option* CommandLine::value(const std::string& names, std::optional<std::string>& into,
                                std::string needs) {
  return needs_value(app_.add_option(names, into), std::move(needs));
}

CLI::Option* CommandLine::value(const std::string& names, std::string& into, std::string needs) {
  return needs_value(app_.add_option(names, into), std::move(needs));
}

CLI::Option* CommandLine::values(const std::string& names, std::vector<std::string>& into,
                                 std::string needs) {
  CLI::Option* option = app_.add_option(names, into)->allow_extra_args(false);
  needs_value(option, std::move(needs));
  return option->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

CLI::Option* CommandLine::positionals(const std::string& name, std::vector<std::string>& into) {
  return app_.add_option(name, into);
}

std::string CommandLine::did_you_mean(std::string_view unknown) const {
  const std::string_view bare = unknown.substr(0, unknown.find('='));
  std::string best;
  std::size_t best_distance = 3;  // more edits than 2 is another word
  for (const CLI::Option* option : app_.get_options()) {
    for (const std::string& name : option->get_lnames()) {
      const std::size_t d = support::edit_distance(bare, "--" + name);
      if (d < best_distance) best_distance = d, best = "--" + name;
    }
  }
  return best.empty() ? std::string() : " (did you mean '" + best + "'?)";
}

std::optional<int> CommandLine::parse(std::span<const std::string_view> args) {
  // A value option as the last word has no value: say what it needs, in the command's words.
  if (!args.empty()) {
    if (const auto it = needs_.find(std::string(args.back())); it != needs_.end())
      return usage_error(command_, it->first + " needs " + it->second);
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 reads from the back
  try {
    app_.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return usage_error(command_, support::escape_text(e.what()));
  }
  if (help_asked_) {
    help_(std::cout);
    return 0;
  }
  const std::vector<std::string> extras = app_.remaining();
  if (!extras.empty()) {
    const std::string& first = extras.front();
    if (first.starts_with("-")) {
      return usage_error(command_, "unknown option '" + support::escape_text(first) + "'" +
                                       did_you_mean(first));
    }
    return usage_error(command_, "unexpected argument '" + support::escape_text(first) + "'");
  }
  return std::nullopt;
}

}  // namespace gpuplug::tool
