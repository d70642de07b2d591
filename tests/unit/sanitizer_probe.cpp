// SPDX-License-Identifier: Apache-2.0
// Prints what the conformance library's sanitizer_name() sees in this process ("none" when
// nothing), for the CTest cases that run it with and without a sanitizer runtime preloaded: the
// installed gpuplug tool is not instrumented, yet checks instrumented plugins that way.
#include <iostream>

#include "cases.hpp"

int main() {
  const std::string_view name = gpuplug::conformance::sanitizer_name();
  std::cout << "sanitizer: " << (name.empty() ? "none" : name) << '\n';
  return 0;
}
