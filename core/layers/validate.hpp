// SPDX-License-Identifier: Apache-2.0
// The built-in `validate` layer (docs/layers.md, "validate"): refuses misuse of one backend before
// its plugin sees it, naming the operation, the object and where it was made.
#pragma once

#include <gpuplug/layer.h>

#include <cstddef>

namespace gpuplug::detail {

/// The validate layer's table: use after free, double free, copies past the end of an
/// allocation, unknown or destroyed streams and events, kernel handles of another backend or of
/// an unloaded module, zero grids and blocks; a warning for streams and events left at destroy.
/// Guard bands too (docs/layers.md, "Guard bands"): alloc and alloc_managed padded with bands
/// checked at every synchronize and free.
const gpuplug_layer_v1& validate_layer() noexcept;

/// How many guard bands of the validate layer instance `instance` (one validate_layer() made)
/// are broken now, read back through the levels below it (*broken). A failure to read them is
/// returned with its message set through the layer's services. Thread-safe.
gpuplug_status_t validate_scan_redzones(gpuplug_instance_t instance, std::size_t* broken) noexcept;

}  // namespace gpuplug::detail
