// SPDX-License-Identifier: Apache-2.0
// Module "activation" for the CUDA backend: x = max(x + bias[col], 0) over a row-major matrix.
#include <gpuplug/kernel_args.h>
#include <stdint.h>

// Launch: grid = ceil(rows * cols / 256), block = 256; one element per thread.
extern "C" __global__ void bias_relu(uint32_t rows, uint32_t cols, const float* bias, float* x) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<uint64_t>(rows) * cols) return;
  const float v = x[i] + bias[i % cols];
  x[i] = v > 0.0f ? v : 0.0f;
}

// The argument sizes, for plugins that copy arguments (<gpuplug/kernel_args.h>).
extern "C" __device__ const gpuplug_kernel_args_t bias_relu_args = {
    GPUPLUG_KERNEL_ARGS_VERSION, 4, {4, 4, 8, 8}};
