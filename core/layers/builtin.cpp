// SPDX-License-Identifier: Apache-2.0
// The list of built-in layers; each lives in a file of its own under core/layers/.
#include "layers/builtin.hpp"

#include <array>

#include "layers/faults.hpp"
#include "layers/sync.hpp"
#include "layers/trace.hpp"
#include "layers/validate.hpp"

namespace gpuplug::detail {

std::span<const gpuplug_layer_v1* const> builtin_layers() noexcept {
  static const std::array all{
      &validate_layer(),
      &layers::trace_layer(),
      &faults_layer(),
      &sync_layer(),
  };
  return all;
}

}  // namespace gpuplug::detail
