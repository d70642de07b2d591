// SPDX-License-Identifier: Apache-2.0
// Host kernel module "axpy": y = a*x + y. Launch: grid ceil(n/256), block 256.
#include <gpuplug/host_kernel.hpp>

using namespace gpuplug::host_kernels;

// axpy(uint32 n, float a, const float* x, float* y)
GPUPLUG_HOST_KERNEL(axpy) {
  const std::uint32_t n = arg<std::uint32_t>(params, 0);
  const float a = arg<float>(params, 1);
  const float* x = ptr<const float>(params, 2);
  float* y = ptr<float>(params, 3);
  const Range r = block_range(block, n);
  for (std::uint64_t i = r.begin; i < r.end; ++i) y[i] = a * x[i] + y[i];
}

// The argument sizes, for plugins that copy arguments (<gpuplug/kernel_args.h>).
GPUPLUG_HOST_KERNEL_ARGS(axpy, 4, {4, 4, 8, 8});
