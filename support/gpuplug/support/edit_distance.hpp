// SPDX-License-Identifier: Apache-2.0
// Internal: the edit distance behind every "did you mean ...?" (selector names, fault specs).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <vector>

namespace gpuplug::support {

/// Levenshtein distance (insertions, deletions, substitutions); meant for short names.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace gpuplug::support
