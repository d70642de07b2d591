// SPDX-License-Identifier: Apache-2.0
// The child processes of `gpuplug check`: a case run alone (the default; not --no-isolate) and the
// lints that load the plugin. The parent side starts them and judges what they leave; the child
// side runs one case or the loaded lints and writes its record to the result pipe.
#pragma once

#include <cases.hpp>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lint.hpp"
#include "results.hpp"

namespace gpuplug::tool {

/// The user's own cases (--cases, --modules): what the parent loaded, and what it hands to the
/// child of --isolate so that the child can find the same case by name.
struct UserCases {
  std::vector<std::string> files;      // --cases, in order
  std::optional<std::string> modules;  // --modules
  std::vector<conformance::Case> cases;       // what the files list
};

/// Makes a crash finish its row (the signal's number) before the process dies, saying whether it
/// came from the thread that runs the case, another thread, or while no case was running
/// (note_case_running); not under a sanitizer, whose own report says far more.
void install_crash_note();

/// Tells the crash note whether a case is running in this process now.
void note_case_running(bool running);

/// `gpuplug check --run-case NAME ... --result-pipe INODE`: the child of an isolated run. Runs
/// exactly that case and writes its record to descriptor 3, once that is the parent's pipe, and
/// closes it, before the plugin is released; its stdout and stderr are the parent's to collect.
/// Returns the exit status.
int run_one_case(std::string_view name, std::string_view result_pipe,
                 const std::optional<std::string>& backend,
                 const std::optional<std::string>& plugin_file,
                 const conformance::KnownFailures& known, std::span<const conformance::Case> cases,
                 const UserCases& user);

/// Runs case `c` in a child and judges it: the child's record when it left one and exited 0,
/// else a failure naming the crash, the exit or the time limit; one that came after a whole
/// record says the case had ended (a thread it left behind?) and what the case itself gave (a
/// known failure of this plugin turns either into xfail). `output` gets the child's output tail
/// for a row that did not pass; `died` is set when the child crashed or timed out.
conformance::Result run_isolated(const conformance::Case& c, const conformance::Target& target,
                                 const std::optional<std::string>& plugin_file,
                                 const std::filesystem::path& known_path,
                                 const conformance::KnownFailures& known, long timeout_s,
                                 const UserCases& user, std::string& output,
                                 std::optional<Verdict>& died);

/// `gpuplug check --run-lints FILE --result-pipe INODE`: the child that loads the plugin for the
/// lints that run its code (lint_loaded) and writes their record to descriptor 3.
int run_loaded_lints(std::string_view file, std::string_view result_pipe);

/// lint_loaded in a child process: a plugin that crashes, exits or hangs while it loads or
/// answers fails those lints, naming how, instead of ending the checker. `timeout_s` > 0.
std::vector<LintResult> loaded_lints_isolated(const std::filesystem::path& file, long timeout_s);

}  // namespace gpuplug::tool
