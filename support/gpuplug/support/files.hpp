// SPDX-License-Identifier: Apache-2.0
// Internal: reading a whole file into bytes, with the reason when it cannot be read.
#pragma once

#include "gpuplug/support/text.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gpuplug::support {

/// The bytes of `file`, or nullopt with `why` set to the reason ("No such file or directory").
/// Reads with plain stdio so that no stream state or locale is involved.
inline std::optional<std::vector<std::byte>> read_file(const std::filesystem::path& file,
                                                       std::string& why) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (f == nullptr) {
    why = errno_text(errno);
    return std::nullopt;
  }
  std::vector<std::byte> bytes;
  std::byte chunk[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) != 0) bytes.insert(bytes.end(), chunk, chunk + n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) {
    why = errno_text(err);
    return std::nullopt;
  }
  return bytes;
}

}  // namespace gpuplug::support
