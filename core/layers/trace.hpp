// SPDX-License-Identifier: Apache-2.0
// The built-in `trace` layer (docs/layers.md): every call of a backend, with its arguments,
// duration and status, in a bounded ring (option trace_buffer, default 262144 calls), written as
// Chrome trace-event JSON (option trace_file, default gpuplug-trace-<pid>.json) when the backend
// is destroyed, and a summary per operation (calls, total, p50/p99, bytes) logged at info level.
#pragma once

#include <gpuplug/layer.h>

namespace gpuplug::detail::layers {

const gpuplug_layer_v1& trace_layer() noexcept;

}  // namespace gpuplug::detail::layers
