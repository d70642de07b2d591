// SPDX-License-Identifier: Apache-2.0
// Test-only module "test_redzones": kernels that write where they should not, for the validate
// layer's guard bands (docs/layers.md, "Guard bands"). Launch each with grid 1, block 1.
#include <cstdint>

#include <gpuplug/host_kernel.hpp>

using namespace gpuplug::host_kernels;

// fill_one_past(float* out, uint32 n, float value): out[0..n] = value, n + 1 floats: one element
// past an n-float output.
GPUPLUG_HOST_KERNEL(fill_one_past) {
  (void)block;
  float* out = ptr<float>(params, 0);
  const std::uint32_t n = arg<std::uint32_t>(params, 1);
  const float value = arg<float>(params, 2);
  for (std::uint64_t i = 0; i <= n; ++i) out[i] = value;
}
GPUPLUG_HOST_KERNEL_ARGS(fill_one_past, 3, {8, 4, 4});

// fill(float* out, uint32 n, float value): out[0..n) = value, the correct kernel.
GPUPLUG_HOST_KERNEL(fill) {
  (void)block;
  float* out = ptr<float>(params, 0);
  const std::uint32_t n = arg<std::uint32_t>(params, 1);
  const float value = arg<float>(params, 2);
  for (std::uint64_t i = 0; i < n; ++i) out[i] = value;
}
GPUPLUG_HOST_KERNEL_ARGS(fill, 3, {8, 4, 4});

// poke(uint8* ptr, int64 offset, uint32 byte): ptr[offset] = byte (offset may be negative).
GPUPLUG_HOST_KERNEL(poke) {
  (void)block;
  const auto base = reinterpret_cast<std::uintptr_t>(ptr<std::uint8_t>(params, 0));
  const std::int64_t offset = arg<std::int64_t>(params, 1);
  const auto byte = static_cast<std::uint8_t>(arg<std::uint32_t>(params, 2));
  *reinterpret_cast<std::uint8_t*>(base + static_cast<std::uintptr_t>(offset)) = byte;
}
GPUPLUG_HOST_KERNEL_ARGS(poke, 3, {8, 8, 4});
