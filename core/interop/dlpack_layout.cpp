// SPDX-License-Identifier: Apache-2.0
// DLPack layouts: the dtypes gpuplug exchanges, and the byte span of a shape with strides.
#include "interop/dlpack_layout.hpp"

#include <gpuplug/dlpack.hpp>
#include <gpuplug/support/text.hpp>

#include <limits>

namespace gpuplug {

std::string to_string(DLDataType dtype) {
  const auto bits = std::to_string(dtype.bits);
  if (dtype.lanes == 1) {
    switch (dtype.code) {
      case kDLInt: return "int" + bits;
      case kDLUInt: return "uint" + bits;
      case kDLFloat: return "float" + bits;
      case kDLBfloat: return "bfloat" + bits;
      case kDLComplex: return "complex" + bits;
      case kDLBool: return dtype.bits == 8 ? "bool" : "bool" + bits;
      default: break;
    }
  }
  return "dtype code " + std::to_string(dtype.code) + " bits " + bits + " lanes " +
         std::to_string(dtype.lanes);
}

namespace detail {

std::size_t dlpack_element_bytes(DLDataType dtype) noexcept {
  if (dtype.lanes != 1) return 0;  // vector types: no array library exchanges them
  const unsigned bits = dtype.bits;
  switch (dtype.code) {
    case kDLInt:
    case kDLUInt: return bits == 8 || bits == 16 || bits == 32 || bits == 64 ? bits / 8 : 0;
    case kDLFloat: return bits == 16 || bits == 32 || bits == 64 ? bits / 8 : 0;
    case kDLBfloat: return bits == 16 ? 2 : 0;
    case kDLComplex: return bits == 64 || bits == 128 ? bits / 8 : 0;
    case kDLBool: return bits == 8 ? 1 : 0;  // the array libraries' one-byte bool
    default: return 0;
  }
}

namespace {

constexpr std::int64_t max_rank = 64;
constexpr std::int64_t limit = std::numeric_limits<std::int64_t>::max() / 2;

std::string list(std::span<const std::int64_t> v) {
  std::vector<std::string> items;
  for (const std::int64_t x : v) items.push_back(std::to_string(x));
  return "[" + support::join(items) + "]";
}

}  // namespace

std::string dlpack_measure(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
                           DLDataType dtype, std::vector<std::int64_t>& used_strides,
                           DlpackSpan& span) {
  const std::size_t element = dlpack_element_bytes(dtype);
  if (element == 0) return "unsupported dtype " + to_string(dtype);
  if (static_cast<std::int64_t>(shape.size()) > max_rank)
    return "rank " + std::to_string(shape.size()) + " is over " + std::to_string(max_rank);
  if (!strides.empty() && strides.size() != shape.size())
    return "strides " + list(strides) + " have rank " + std::to_string(strides.size()) +
           ", shape " + list(shape) + " has rank " + std::to_string(shape.size());
  bool empty = false;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) return "shape " + list(shape) + " has a negative extent";
    if (shape[i] > limit) return "shape " + list(shape) + " is too large";
    empty = empty || shape[i] == 0;
  }
  used_strides.assign(shape.size(), 0);
  if (strides.empty()) {  // compact row-major: the last index varies fastest
    std::int64_t step = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
      used_strides[i] = step;
      if (shape[i] > 1 && step > limit / shape[i]) return "shape " + list(shape) + " is too large";
      step *= shape[i] > 0 ? shape[i] : 1;
    }
  } else {
    used_strides.assign(strides.begin(), strides.end());
  }
  span = {};
  if (empty) return "";
  // The lowest and highest element offsets: each dimension adds (extent - 1) * stride to one end.
  std::int64_t low = 0, high = 0;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::int64_t stride = used_strides[i], reach = shape[i] - 1;
    if (stride > limit || stride < -limit || (reach > 0 && (stride > limit / reach || stride < -limit / reach)))
      return "strides " + list(used_strides) + " with shape " + list(shape) + " are too large";
    (stride < 0 ? low : high) += reach * stride;
    if (high > limit || low < -limit)
      return "strides " + list(used_strides) + " with shape " + list(shape) + " are too large";
  }
  const auto bytes = static_cast<std::int64_t>(element);
  if (high + 1 > limit / bytes || low < -limit / bytes)
    return "shape " + list(shape) + " of " + to_string(dtype) + " is too large";
  span.first = low * bytes;
  span.end = (high + 1) * bytes;
  return "";
}

}  // namespace detail
}  // namespace gpuplug
