// SPDX-License-Identifier: Apache-2.0
// Host kernel module "e4m3": f32 <-> OCP E4M3 casts through kernels/common/e4m3.h.
#include "e4m3.h"

#include <gpuplug/host_kernel.hpp>

using namespace gpuplug::host_kernels;

// cast_f32_e4m3(uint32 n, const float* in, uint8_t* out): round to nearest even, saturating.
GPUPLUG_HOST_KERNEL(cast_f32_e4m3) {
  const std::uint32_t n = arg<std::uint32_t>(params, 0);
  const float* in = ptr<const float>(params, 1);
  std::uint8_t* out = ptr<std::uint8_t>(params, 2);
  const Range r = block_range(block, n);
  for (std::uint64_t i = r.begin; i < r.end; ++i) out[i] = gpuplug_f32_to_e4m3(in[i]);
}

// cast_e4m3_f32(uint32 n, const uint8_t* in, float* out): exact.
GPUPLUG_HOST_KERNEL(cast_e4m3_f32) {
  const std::uint32_t n = arg<std::uint32_t>(params, 0);
  const std::uint8_t* in = ptr<const std::uint8_t>(params, 1);
  float* out = ptr<float>(params, 2);
  const Range r = block_range(block, n);
  for (std::uint64_t i = r.begin; i < r.end; ++i) out[i] = gpuplug_e4m3_to_f32(in[i]);
}

// The argument sizes, for plugins that copy arguments (<gpuplug/kernel_args.h>).
GPUPLUG_HOST_KERNEL_ARGS(cast_f32_e4m3, 3, {4, 8, 8});
GPUPLUG_HOST_KERNEL_ARGS(cast_e4m3_f32, 3, {4, 8, 8});
