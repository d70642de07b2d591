// SPDX-License-Identifier: Apache-2.0
// The list of built-in layers; each lives in a file of its own under core/layers/.
#include "builtin.hpp"

#include <array>

#include "validate.hpp"

namespace gpuplug::detail {

std::span<const gpuplug_layer_v1* const> builtin_layers() noexcept {
  static const std::array<const gpuplug_layer_v1*, 1> layers{&validate_layer()};
  return layers;
}

}  // namespace gpuplug::detail
