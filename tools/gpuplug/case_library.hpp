// SPDX-License-Identifier: Apache-2.0
// `gpuplug check --cases FILE`: a shared library of the user's own conformance cases
// (<gpuplug/conformance.hpp>, GPUPLUG_CONFORMANCE_CASES), loaded and checked before it is run.
#pragma once

#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <gpuplug/conformance.hpp>

namespace gpuplug::tool {

/// Thrown when a case library cannot be used; what() names the file and the reason.
class BadCaseLibrary : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Loads every library in `files` (by absolute path: never a search), calls its entry point
/// with GPUPLUG_CONFORMANCE_CASES_VERSION and checks what it lists: a non-null run function, a
/// snake_case name of at most 96 bytes not used by a built-in case or an earlier user case, and
/// a UTF-8 summary of at most 512 bytes. The libraries stay loaded for the life of the process
/// (the cases point into them). Throws BadCaseLibrary.
std::vector<conformance::Case> load_case_libraries(const std::vector<std::string>& files,
                                                   std::span<const conformance::Case> builtin);

}  // namespace gpuplug::tool
