// SPDX-License-Identifier: Apache-2.0
// The validate layer's handle records (validate_handles.hpp).
#include "layers/validate_handles.hpp"

#include <gpuplug/support/text.hpp>

#include <algorithm>
#include <vector>

namespace gpuplug::detail::layers {

std::string list_handles(const std::unordered_set<std::uint64_t>& handles) {
  std::vector<std::uint64_t> sorted(handles.begin(), handles.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> names;
  for (std::uint64_t h : sorted) names.push_back(std::to_string(h));
  return support::join(names);
}

}  // namespace gpuplug::detail::layers
