// SPDX-License-Identifier: Apache-2.0
// The lints of `gpuplug check` (docs/lints.md): what each rule looks at and how it says what is
// wrong. Reading the ELF file is plugin_elf.cpp's job; running them and printing is check.cpp's.
#include "lint.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <gpuplug/abi.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <gpuplug/support/escape.hpp>
#include <gpuplug/support/plugin_name.hpp>
#include <string_view>

#include "plugin_elf.hpp"

namespace gpuplug::tool {

namespace {

namespace fs = std::filesystem;
using support::escape_text;

constexpr std::string_view entry_symbol = GPUPLUG_PLUGIN_ENTRY_SYMBOL;
/// Names shown in a failure at most; the rest is counted.
constexpr std::size_t max_named = 5;

/// Symbols GNU ld defines in every shared object that has no version script to hide them; the
/// author never wrote them and nothing binds to them.
constexpr std::array<std::string_view, 5> linker_symbols = {"_init", "_fini", "_edata", "_end",
                                                            "__bss_start"};

/// What registers a destructor to run at exit or dlclose: the C++ ABI's calls for a static or
/// function-local static object (__cxa_atexit), a thread_local one (__cxa_thread_atexit and
/// glibc's _impl), and C's atexit.
constexpr std::array<std::string_view, 4> destructor_registrars = {
    "__cxa_atexit", "__cxa_thread_atexit", "__cxa_thread_atexit_impl", "atexit"};

std::string version_text(std::uint32_t v) {
  return std::to_string(GPUPLUG_ABI_MAJOR(v)) + "." + std::to_string(GPUPLUG_ABI_MINOR(v));
}

/// "a, b, c, d, e and 7 more"
std::string first_few(const std::vector<std::string>& names) {
  std::string text;
  for (std::size_t i = 0; i < names.size() && i < max_named; ++i)
    text += (i == 0 ? "" : ", ") + escape_text(names[i]);
  if (names.size() > max_named)
    text += " and " + std::to_string(names.size() - max_named) + " more";
  return text;
}

template <class Range>
bool among(const Range& names, std::string_view name) {
  for (const std::string_view n : names)
    if (n == name) return true;
  return false;
}

std::string lint_exports(const PluginElf& elf) {
  std::vector<std::string> extra;
  bool has_entry = false;
  for (const DynamicSymbol& s : elf.symbols) {
    // What another object can bind to: defined, global or weak, default or protected visibility.
    // Absolute symbols are the linker's version-node names (GPUPLUG_1.0), not the author's.
    if (!s.defined || !s.global || !s.visible || s.absolute) continue;
    if (s.type == STT_SECTION || s.type == STT_FILE) continue;
    if (s.name == entry_symbol) {
      has_entry = true;
    } else if (!among(linker_symbols, s.name)) {
      extra.push_back(s.name);
    }
  }
  std::string why;
  if (!has_entry) why = "does not export " + std::string(entry_symbol);
  if (!extra.empty()) {
    why += why.empty() ? "" : "; ";
    why += "exports " + std::to_string(extra.size()) + " symbol" + (extra.size() == 1 ? "" : "s") +
           " besides " + std::string(entry_symbol) + ": " + first_few(extra) +
           " (build with hidden visibility and a version script, as gpuplug_add_plugin does: an "
           "exported symbol can bind to or replace another library's of the same name)";
  }
  return why;
}

std::string lint_static_destructors(const PluginElf& elf) {
  std::vector<std::string> found;
  for (const DynamicSymbol& s : elf.symbols) {
    if (s.defined || !among(destructor_registrars, s.name)) continue;
    found.push_back(s.name + (s.relocations == 0
                                  ? std::string()
                                  : " (" + std::to_string(s.relocations) + " relocation" +
                                        (s.relocations == 1 ? ")" : "s)")));
  }
  if (found.empty()) return {};
  return "imports " + first_few(found) +
         ": a static or thread_local object with a destructor (a global std::string, a "
         "function-local static) registers it to run at dlclose or exit, after the core may have "
         "torn down what it uses; plugins keep no static destructors (docs/lints.md)";
}

/// Why element `e` of a search path can mean the current directory, or "".
std::string relative_element(std::string_view e) {
  if (e.empty()) return "an empty element, which the dynamic loader reads as the current directory";
  if (e.front() == '/' || e.starts_with("$ORIGIN") || e.starts_with("${ORIGIN}")) return {};
  return "the element '" + escape_text(e) +
         "', relative to the current directory of whatever process loads the plugin";
}

std::string lint_runpath(const PluginElf& elf) {
  std::vector<std::string> problems;
  const auto check = [&](const std::vector<std::string>& values, const char* tag) {
    for (const std::string& value : values) {
      std::size_t at = 0;
      for (;;) {  // every ':'-separated element, empty ones included ("a::b", "", "a:")
        const std::size_t end = std::min(value.find(':', at), value.size());
        if (auto why = relative_element(std::string_view(value).substr(at, end - at));
            !why.empty()) {
          problems.push_back(std::string(tag) + " '" + escape_text(value) + "' has " + why);
          break;
        }
        if (end == value.size()) break;
        at = end + 1;
      }
    }
  };
  check(elf.runpath, "DT_RUNPATH");
  check(elf.rpath, "DT_RPATH");
  if (problems.empty()) return {};
  std::string why;
  for (const auto& p : problems) why += (why.empty() ? "" : "; ") + p;
  return why +
         " (a library planted there is loaded instead of the real dependency; use "
         "absolute paths or $ORIGIN)";
}

/// The <name> of libgpuplug-<name>.so, or nullopt when `file` is not named so.
std::optional<std::string> name_from_file(const fs::path& file) {
  const std::string base = file.filename().string();
  const std::string_view name = support::plugin_name_of_file(base);
  if (name.empty()) return std::nullopt;
  return std::string(name);
}

std::string lint_name(const fs::path& file, const gpuplug_plugin_v1* own) {
  const std::string base = escape_text(file.filename().string());
  const auto expected = name_from_file(file);
  if (!expected || !support::valid_plugin_name(*expected))
    return "the file name '" + base + "' is not libgpuplug-<name>.so with a name of " +
           std::string(support::plugin_name_pattern) + " (discovery looks for that pattern)";
  if (own == nullptr)
    return "no table to read the name from: " + std::string(entry_symbol) + "(" +
           version_text(GPUPLUG_ABI_VERSION) + ") returned null";
  if (own->name == nullptr) return "the table's name is null (the file says '" + *expected + "')";
  constexpr std::size_t max_name = 256;
  const std::size_t length = ::strnlen(own->name, max_name);
  const std::string name(own->name, length);
  if (length == max_name)
    return "the table's name is not a string of fewer than " + std::to_string(max_name) +
           " bytes (it starts '" + escape_text(name.substr(0, 32)) + "')";
  if (name == *expected) return {};
  return "the table names the plugin '" + escape_text(name) + "' but the file is '" + base +
         "': selectors, known_failures.txt and messages use the table's name, users see the "
         "file's; rename one (libgpuplug-" +
         escape_text(name) + ".so)";
}

std::string lint_abi_answer(gpuplug_plugin_entry_fn entry) {
  std::vector<std::string> problems;
  for (const std::uint32_t asked : {GPUPLUG_MAKE_VERSION(1, 0), std::uint32_t{GPUPLUG_ABI_VERSION},
                                    GPUPLUG_MAKE_VERSION(1, 99)}) {
    const gpuplug_plugin_v1* t = entry(asked);
    const std::string to = " to a host that asked for " + version_text(asked);
    if (t == nullptr) {
      problems.push_back("answered null" + to + " (a plugin of major 1 answers every 1.x host)");
    } else if (GPUPLUG_ABI_MAJOR(t->abi_version) != GPUPLUG_ABI_MAJOR(asked)) {
      problems.push_back("answered ABI " + version_text(t->abi_version) + to +
                         " (another major: the host refuses it)");
    } else if (GPUPLUG_ABI_MINOR(t->abi_version) > GPUPLUG_ABI_MINOR(asked)) {
      problems.push_back("answered ABI " + version_text(t->abi_version) + to +
                         " (a later minor than asked; the core refuses it at load)");
    }
  }
  if (problems.empty()) return {};
  std::string why = "breaks ABI-4 (a plugin answers the highest version both share): ";
  for (std::size_t i = 0; i < problems.size(); ++i) why += (i == 0 ? "" : "; ") + problems[i];
  return why;
}

/// The child's text reaches the terminal: kept as it is when escape_text would change nothing
/// but double its backslashes (it is what lint_loaded wrote, already escaped), else escaped.
std::string terminal_safe(std::string_view text) {
  std::string doubled;
  for (const char c : text)
    doubled += c == '\\' ? std::string_view("\\\\") : std::string_view(&c, 1);
  std::string escaped = escape_text(text);
  return escaped == doubled ? std::string(text) : escaped;
}

constexpr std::array<std::string_view, 2> loaded_lint_names = {"name", "abi_answer"};

}  // namespace

std::vector<LintResult> lint_file(const fs::path& file, bool& loadable) {
  std::string why;
  const auto elf = read_plugin_elf(file, why);
  loadable = elf.has_value();
  if (!elf) {
    const std::string failure = "cannot read '" + escape_text(file.string()) + "': " + why;
    return {{"exports", failure}, {"static_destructors", failure}, {"runpath", failure}};
  }
  return {{"exports", lint_exports(*elf)},
          {"static_destructors", lint_static_destructors(*elf)},
          {"runpath", lint_runpath(*elf)}};
}

std::vector<LintResult> loaded_lints_failed(const std::string& why) {
  std::vector<LintResult> out;
  for (const std::string_view n : loaded_lint_names) out.push_back({std::string(n), why});
  return out;
}

std::vector<LintResult> lint_loaded(const fs::path& file) {
  // RTLD_LOCAL: nothing of the plugin becomes visible to what is loaded later (the registry
  // loads the same file again for the cases, which only adds a reference).
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    return loaded_lints_failed("cannot load '" + escape_text(file.string()) +
                               "': " + escape_text(error != nullptr ? error : "dlopen failed"));
  }
  auto entry = reinterpret_cast<gpuplug_plugin_entry_fn>(::dlsym(handle, entry_symbol.data()));
  std::vector<LintResult> out;
  if (entry == nullptr) {
    out = loaded_lints_failed("'" + escape_text(file.string()) + "' exports no " +
                              std::string(entry_symbol));
  } else {
    out = {{"name", lint_name(file, entry(GPUPLUG_ABI_VERSION))},
           {"abi_answer", lint_abi_answer(entry)}};
  }
  ::dlclose(handle);
  return out;
}

std::string encode_lints(const std::vector<LintResult>& results) {
  std::string record;
  for (const LintResult& r : results) {
    std::string failure = r.failure;  // escaped where it quotes the plugin; one line regardless
    std::replace(failure.begin(), failure.end(), '\n', ' ');
    record += r.name + '\t' + failure + '\n';
  }
  return record;
}

std::optional<std::vector<LintResult>> decode_lints(std::string_view record, std::string& defect) {
  std::vector<LintResult> out;
  while (!record.empty()) {
    const std::size_t nl = record.find('\n');
    if (nl == std::string_view::npos) {
      defect = "its lint record is cut short";
      return std::nullopt;
    }
    const std::string_view line = record.substr(0, nl);
    record.remove_prefix(nl + 1);
    const std::size_t tab = line.find('\t');
    const std::string_view name = line.substr(0, tab);
    const bool known = tab != std::string_view::npos && among(loaded_lint_names, name);
    const bool again =
        std::any_of(out.begin(), out.end(), [&](const LintResult& r) { return r.name == name; });
    if (!known || again) {
      defect = "its lint record has an unknown or repeated lint '" + escape_text(name) + "'";
      return std::nullopt;
    }
    out.push_back({std::string(name), terminal_safe(line.substr(tab + 1))});
  }
  if (out.size() != loaded_lint_names.size()) {
    defect = "its lint record has " + std::to_string(out.size()) + " of the " +
             std::to_string(loaded_lint_names.size()) + " lints";
    return std::nullopt;
  }
  return out;
}

}  // namespace gpuplug::tool
