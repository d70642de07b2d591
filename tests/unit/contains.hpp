// SPDX-License-Identifier: Apache-2.0
// contains(): whether a message names what it should, the check most unit tests make.
#pragma once

#include <string_view>

namespace gpuplug::test {

inline bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

}  // namespace gpuplug::test
