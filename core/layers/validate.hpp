// SPDX-License-Identifier: Apache-2.0
// The built-in `validate` layer (docs/layers.md, "validate"): refuses misuse of one backend before
// its plugin sees it, naming the operation, the object and where it was made.
#pragma once

#include <gpuplug/layer.h>

namespace gpuplug::detail {

/// The validate layer's table: use after free, double free, copies past the end of an
/// allocation, unknown or destroyed streams and events, kernel handles of another backend or of
/// an unloaded module, zero grids and blocks; a warning for streams and events left at destroy.
const gpuplug_layer_v1& validate_layer() noexcept;

}  // namespace gpuplug::detail
