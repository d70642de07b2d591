// SPDX-License-Identifier: Apache-2.0
// The built-in `faults` layer (docs/layers.md): fails chosen calls with a chosen status, to prove
// the error paths of callers and backends.
#pragma once

#include <gpuplug/layer.h>

namespace gpuplug::detail {

/// The `faults` layer: option key `faults` (or GPUPLUG_FAULTS), a spec of fault_spec.hpp.
const gpuplug_layer_v1& faults_layer() noexcept;

}  // namespace gpuplug::detail
