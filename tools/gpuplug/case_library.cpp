// SPDX-License-Identifier: Apache-2.0
#include "case_library.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <set>

#include "gpuplug/support/escape.hpp"
#include "gpuplug/support/regular_file.hpp"

namespace gpuplug::tool {

namespace {

constexpr std::size_t max_name_bytes = 96;
constexpr std::size_t max_summary_bytes = 512;
constexpr std::size_t max_cases = 10000;

bool snake_case(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

std::vector<conformance::Case> load_case_libraries(const std::vector<std::string>& files,
                                                   std::span<const conformance::Case> builtin) {
  std::vector<conformance::Case> out;
  std::set<std::string_view> taken;
  for (const auto& c : builtin) taken.insert(c.name);
  for (const auto& file : files) {
    // An absolute path, so that dlopen never searches LD_LIBRARY_PATH or the current directory
    // for a bare name.
    std::error_code ec;
    const std::filesystem::path path = std::filesystem::absolute(file, ec).lexically_normal();
    const std::string shown = "--cases '" + support::escape_text(file) + "'";
    std::string why;
    if (ec || !support::RegularFile::open(path, why))
      throw BadCaseLibrary(shown + ": " + support::escape_text(ec ? ec.message() : why));
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = ::dlerror();
      throw BadCaseLibrary(shown + ": does not load: " +
                           support::escape_text(err != nullptr ? err : "unknown dlopen error"));
    }
    // Never closed: the cases' names, summaries and functions live in it.
    auto entry = reinterpret_cast<gpuplug_conformance_cases_fn>(
        ::dlsym(handle, GPUPLUG_CONFORMANCE_CASES_SYMBOL));
    if (entry == nullptr) {
      throw BadCaseLibrary(shown + ": exports no " GPUPLUG_CONFORMANCE_CASES_SYMBOL
                           " (list the cases with GPUPLUG_CONFORMANCE_CASES, "
                           "<gpuplug/conformance.hpp>)");
    }
    std::size_t count = 0;
    const conformance::Case* cases = entry(GPUPLUG_CONFORMANCE_CASES_VERSION, &count);
    if (cases == nullptr) {
      throw BadCaseLibrary(shown + ": lists no cases for case-list version " +
                           std::to_string(GPUPLUG_CONFORMANCE_CASES_VERSION) +
                           " (built against another gpuplug? rebuild it against this one)");
    }
    if (count == 0 || count > max_cases) {
      throw BadCaseLibrary(shown + ": lists " + std::to_string(count) + " cases (1 to " +
                           std::to_string(max_cases) + " expected)");
    }
    for (std::size_t i = 0; i < count; ++i) {
      const conformance::Case& c = cases[i];
      const std::string which = shown + ": case " + std::to_string(i);
      if (c.name.size() > max_name_bytes || !snake_case(c.name)) {
        throw BadCaseLibrary(which + " is named '" +
                             support::escape_text(c.name.substr(0, max_name_bytes)) +
                             "': names are snake_case ([a-z0-9_]), 1 to " +
                             std::to_string(max_name_bytes) + " bytes");
      }
      if (!taken.insert(c.name).second) {
        throw BadCaseLibrary(which + " ('" + std::string(c.name) +
                             "') has the name of a case already listed (built-in or user): "
                             "names are unique across a run");
      }
      if (c.summary.size() > max_summary_bytes || !support::is_valid_utf8(c.summary)) {
        throw BadCaseLibrary(which + " ('" + std::string(c.name) + "') has a summary that is not " +
                             "UTF-8 of at most " + std::to_string(max_summary_bytes) + " bytes");
      }
      if (c.run == nullptr)
        throw BadCaseLibrary(which + " ('" + std::string(c.name) + "') has no run function");
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace gpuplug::tool
