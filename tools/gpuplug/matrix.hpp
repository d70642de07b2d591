// SPDX-License-Identifier: Apache-2.0
// `gpuplug matrix`: merges `gpuplug check --json` records from several machines and backends into
// one table (text, Markdown or a self-contained HTML page), optionally against a baseline.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "results.hpp"

namespace gpuplug::tool {

/// One row per case, one column per backend@machine; cells hold a verdict or nothing (the
/// case did not run there: an older version, a --case filter).
struct Matrix {
  std::vector<std::string> columns;  // RunRecord::column(), in input order
  std::vector<std::string> rows;     // case names, in order of first appearance
  /// (row, column) -> the case's record there.
  std::map<std::pair<std::size_t, std::size_t>, CaseRecord> cells;
  std::vector<std::string> notes;  // e.g. results from different gpuplug versions

  const CaseRecord* at(std::size_t row, std::size_t column) const;
};

/// What a cell became against the baseline.
enum class Change { none, regressed, fixed };

/// Merges `runs` (each with the file it came from, for errors). Throws BadResults when two runs
/// hold the same column (the same backend on the same machine twice).
Matrix merge(std::span<const std::pair<RunRecord, std::string>> runs);

/// The change of `now` against `before`: regressed when a case that did not fail now fails, or
/// when one that passed is now skipped or xfail (unless `allow_new_skips`); fixed when a case that
/// failed now passes.
Change compare(const CaseRecord* before, const CaseRecord& now,
               bool allow_new_skips = false) noexcept;

/// `gpuplug matrix [options] RESULT.json...`; args exclude "matrix". Exit status: 0 nothing
/// regressed against the baseline (always 0 without one), 1 something regressed, 2 usage or bad
/// input (a file that is not a results record, the same backend twice).
int run_matrix(std::span<const std::string_view> args);

}  // namespace gpuplug::tool
