// SPDX-License-Identifier: Apache-2.0
// KnownFailures: the known-failures file (`<plugin> <case> <reason>` lines), where it is looked
// for, and what in it names no case.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cases.hpp"
#include "gpuplug/support/files.hpp"

namespace gpuplug::conformance {

KnownFailures KnownFailures::parse(std::string_view text, std::string_view origin) {
  KnownFailures kf;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (const auto hash = line.find('#'); hash != std::string_view::npos)
      line = line.substr(0, hash);
    std::vector<std::string_view> fields;
    std::size_t i = 0;
    while (fields.size() < 2) {
      i = line.find_first_not_of(" \t\r", i);
      if (i == std::string_view::npos) break;
      const auto j = std::min(line.find_first_of(" \t\r", i), line.size());
      fields.push_back(line.substr(i, j - i));
      i = j;
    }
    if (fields.empty()) continue;
    std::string_view reason;
    if (i != std::string_view::npos && i < line.size()) {
      reason = line.substr(i);
      const auto first = reason.find_first_not_of(" \t\r");
      const auto last = reason.find_last_not_of(" \t\r");
      reason = first == std::string_view::npos ? std::string_view{}
                                               : reason.substr(first, last - first + 1);
    }
    if (fields.size() < 2 || reason.empty()) {
      kf.parse_problems_.push_back(std::string(origin) + ":" + std::to_string(line_no) +
                                   ": expected '<plugin> <case> <reason>'");
      continue;
    }
    kf.entries_[{std::string(fields[0]), std::string(fields[1])}] = std::string(reason);
  }
  return kf;
}

KnownFailures KnownFailures::load(const std::filesystem::path& file) {
  std::string why;
  const auto bytes = support::read_file(file, why);
  if (!bytes) {
    KnownFailures kf;
    kf.parse_problems_.push_back("cannot read known-failures file " + file.string());
    return kf;
  }
  const std::string text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  return parse(text, file.string());
}

std::filesystem::path KnownFailures::default_file() {
  if (const char* env = std::getenv("GPUPLUG_KNOWN_FAILURES"); env != nullptr && *env != '\0')
    return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside =
        (exe.parent_path() / ".." / "share" / "gpuplug" / "conformance" / "known_failures.txt")
            .lexically_normal();
    if (std::filesystem::exists(beside, ec)) return beside;
  }
  return std::filesystem::path(GPUPLUG_CONFORMANCE_SOURCE_DIR) / "known_failures.txt";
}

std::optional<std::string> KnownFailures::reason(std::string_view plugin,
                                                 std::string_view case_name) const {
  const auto it = entries_.find(std::pair<std::string, std::string>(plugin, case_name));
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> KnownFailures::problems(std::span<const Case> extra) const {
  std::vector<std::string> out = parse_problems_;
  std::set<std::string_view> names;
  for (const Case& c : all_cases()) names.insert(c.name);
  for (const Case& c : extra) names.insert(c.name);
  for (const auto& [key, reason] : entries_) {
    if (!names.contains(key.second)) {
      out.push_back("known failure '" + key.first + " " + key.second +
                    "' names no conformance case");
    }
  }
  return out;
}

}  // namespace gpuplug::conformance
