// SPDX-License-Identifier: Apache-2.0
// Internal: strings across the C ABI, in both directions, bounded by the buffer and never by a
// terminator the other side promised.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace gpuplug::support {

/// The text of a fixed-size char field filled by the other side of the ABI: up to the first NUL
/// or `capacity` bytes, whichever comes first, so a missing terminator cannot run past the field.
inline std::string fixed_string(const char* text, std::size_t capacity) {
  if (text == nullptr) return {};
  return std::string(text, ::strnlen(text, capacity));
}

/// Copies `text` into a caller's buffer, truncating and always NUL-terminating (nothing is
/// written when `buf` is null or `size` is 0); returns the full length, as snprintf does, so a
/// caller can size a second call.
inline std::size_t copy_out(std::string_view text, char* buf, std::size_t size) noexcept {
  if (buf != nullptr && size != 0) {
    const std::size_t n = std::min(text.size(), size - 1);
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return text.size();
}

}  // namespace gpuplug::support
