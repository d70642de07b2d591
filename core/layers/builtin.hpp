// SPDX-License-Identifier: Apache-2.0
// The layers built into the core (docs/layers.md): what every registry's catalog starts with.
#pragma once

#include <gpuplug/layer.h>

#include <span>

namespace gpuplug::detail {

/// The built-in layers, in the order `gpuplug list --layers` shows them.
std::span<const gpuplug_layer_v1* const> builtin_layers() noexcept;

}  // namespace gpuplug::detail
