// SPDX-License-Identifier: Apache-2.0
// The lints `gpuplug check` runs on a plugin file before the conformance cases: rules
// of docs/lints.md that no case can see, because they are about the file, not the backend.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuplug::tool {

/// One lint's verdict: `failure` empty when the rule holds, else why it does not, naming what was
/// found ("exports 3 symbols besides gpuplug_plugin_entry: helper, ...").
struct LintResult {
  std::string name;  // "exports", "static_destructors", "runpath", "name", "abi_answer"
  std::string failure;
  bool ok() const noexcept { return failure.empty(); }
};

/// The lints that only read the file (its ELF structures; nothing of it runs): exports,
/// static_destructors, runpath, in that order. A file that is not a well-formed shared object
/// (support::validate_elf_shared_object) fails all three naming the file and the defect, and
/// `loadable` is set false: the lints that load it must not run then. Never throws but
/// std::bad_alloc; never reads outside the file's bytes.
std::vector<LintResult> lint_file(const std::filesystem::path& file, bool& loadable);

/// The lints that load the file with dlopen and call its entry point with ABI 1.0, this host's
/// version and 1.99: name (the table's name is the <name> of libgpuplug-<name>.so) and
/// abi_answer (every answer non-null, of major 1, no later minor than asked: ABI-4). Runs the
/// plugin's code (its constructors, its entry point): a plugin that crashes there crashes the
/// caller, so `gpuplug check --isolate` calls this in a child process.
std::vector<LintResult> lint_loaded(const std::filesystem::path& file);

/// The results of lint_loaded when it could not run (the file is not loadable, the child that ran
/// it crashed): every one of those lints failed with `why`.
std::vector<LintResult> loaded_lints_failed(const std::string& why);

/// lint_loaded's results as a record for a pipe, and back. decode accepts exactly the lints
/// lint_loaded reports, each once, and nullopt with `defect` set otherwise: the record comes
/// from a child that ran a plugin's code and is not trusted.
std::string encode_lints(const std::vector<LintResult>& results);
std::optional<std::vector<LintResult>> decode_lints(std::string_view record, std::string& defect);

}  // namespace gpuplug::tool
