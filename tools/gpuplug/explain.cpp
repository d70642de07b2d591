// SPDX-License-Identifier: Apache-2.0
// `gpuplug list --explain SELECTOR`: why each candidate would win or lose, without creating one.
#include "explain.hpp"

#include <gpuplug/support/escape.hpp>
#include <iostream>
#include <string>

int explain_selection(const gpuplug::PluginRegistry& registry, std::string_view selector) {
  using gpuplug::support::escape_text;
  // Plugin text (names of devices, refusal messages) reaches the terminal: escaped, always.
  gpuplug::Selection s;
  try {
    s = registry.dry_run(selector);
  } catch (const gpuplug::Error& e) {
    std::cout << "selector '" << escape_text(selector) << "' (dry run): nothing would be chosen\n";
    std::cerr << "gpuplug: list --explain: " << escape_text(e.what()) << "\n";
    return 1;
  }
  std::cout << "selector '" << escape_text(selector)
            << "' (dry run): would choose " << escape_text(s.chosen) << "\n";
  if (!s.ranking.empty()) {
    std::cout << "ranking (class, then score: peak GFLOP/s, memory, compute units; then discovery "
                 "order, then ordinal):\n";
    for (const std::string& line : s.ranking) std::cout << "  " << escape_text(line) << "\n";
  }
  if (!s.passed_over.empty()) {
    std::cout << "passed over:\n";
    for (const std::string& line : s.passed_over) std::cout << "  " << escape_text(line) << "\n";
  }
  return 0;
}
