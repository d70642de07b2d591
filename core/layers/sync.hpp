// SPDX-License-Identifier: Apache-2.0
// The built-in `sync` layer (docs/layers.md, "sync"): waits for the stream after every launch, so
// that a kernel's asynchronous fault is reported by the launch that caused it, naming the kernel.
#pragma once

#include <gpuplug/layer.h>

namespace gpuplug::detail {

/// The sync layer's table: launch, then stream_synchronize of the launch's stream; a failure of
/// either is the launch's, its message naming the kernel ("module::function") and the stream.
const gpuplug_layer_v1& sync_layer() noexcept;

}  // namespace gpuplug::detail
