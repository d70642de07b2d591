// SPDX-License-Identifier: Apache-2.0
// The checks DLPack export and import share: which dtypes gpuplug exchanges, and the bytes a
// shape with strides reaches.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gpuplug::detail {

/// Bytes per element of `dtype`, or 0 when gpuplug does not exchange it (lanes other than 1,
/// an opaque handle, a width its code does not have).
std::size_t dlpack_element_bytes(DLDataType dtype) noexcept;

/// The bytes a tensor's elements reach, relative to element (0, ..., 0): [first, end). Empty
/// (first == end == 0) when an extent is 0.
struct DlpackSpan {
  std::int64_t first = 0;
  std::int64_t end = 0;
  std::size_t bytes() const noexcept { return static_cast<std::size_t>(end - first); }
};

/// Checks a layout and measures it. `strides` empty means compact row-major; the strides
/// actually used are returned in `used_strides`. Returns the reason when the layout is not
/// acceptable ("" when it is): a rank over 64, a negative extent, strides of another rank, a
/// dtype gpuplug does not exchange, a size that overflows 63 bits.
std::string dlpack_measure(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                           DLDataType dtype, std::vector<std::int64_t>& used_strides,
                           DlpackSpan& span);

}  // namespace gpuplug::detail
