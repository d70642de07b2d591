// SPDX-License-Identifier: Apache-2.0
// What the fuzz targets share: reporting a broken property.
#include "fuzz_input.hpp"

#include <cstdio>
#include <cstdlib>

namespace gpuplug::fuzz {

void broken(const std::string& what) {
  std::fprintf(stderr, "gpuplug fuzz: property broken: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace gpuplug::fuzz
