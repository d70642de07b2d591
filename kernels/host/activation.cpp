// SPDX-License-Identifier: Apache-2.0
// Host kernel module "activation": bias + ReLU in place.
#include <gpuplug/host_kernel.hpp>

using namespace gpuplug::host_kernels;

// bias_relu(uint32 rows, uint32 cols, const float* bias, float* x):
// x[r*cols+c] = max(x[r*cols+c] + bias[c], 0). Indices are 64-bit: rows*cols may pass 2^32.
GPUPLUG_HOST_KERNEL(bias_relu) {
  const std::uint64_t rows = arg<std::uint32_t>(params, 0);
  const std::uint64_t cols = arg<std::uint32_t>(params, 1);
  const float* bias = ptr<const float>(params, 2);
  float* x = ptr<float>(params, 3);
  if (cols == 0) return;
  const Range r = block_range(block, rows * cols);
  // Row segment by row segment, so that the inner loop runs over contiguous x and bias with no
  // division per element, and vectorizes.
  std::uint64_t i = r.begin;
  std::uint64_t c = i % cols;
  while (i < r.end) {
    const std::uint64_t n = cols - c < r.end - i ? cols - c : r.end - i;
    float* xs = x + i;
    const float* bs = bias + c;
    for (std::uint64_t j = 0; j < n; ++j) {
      const float v = xs[j] + bs[j];
      xs[j] = v > 0.0f ? v : 0.0f;
    }
    i += n;
    c = 0;
  }
}

// The argument sizes, for plugins that copy arguments (<gpuplug/kernel_args.h>).
GPUPLUG_HOST_KERNEL_ARGS(bias_relu, 4, {4, 4, 8, 8});
