// SPDX-License-Identifier: Apache-2.0
// read_file: a kernel module image from disk, for the benchmark programs that load one.
#pragma once

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpuplug::bench {

/// The whole file at `path`; throws std::runtime_error naming it when it cannot be read.
inline std::vector<char> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot read ") + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace gpuplug::bench
