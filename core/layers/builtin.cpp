// SPDX-License-Identifier: Apache-2.0
// The list of built-in layers; each lives in a file of its own under core/layers/.
#include "builtin.hpp"

#include <array>

namespace gpuplug::detail {

std::span<const gpuplug_layer_v1* const> builtin_layers() noexcept {
  static constexpr std::array<const gpuplug_layer_v1*, 0> layers{};
  return layers;
}

}  // namespace gpuplug::detail
