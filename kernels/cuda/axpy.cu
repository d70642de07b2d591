// SPDX-License-Identifier: Apache-2.0
// Module "axpy" for the CUDA backend: y = a*x + y, one element per thread.
#include <gpuplug/kernel_args.h>
#include <stdint.h>

// Launch: grid = ceil(n / 256), block = 256. Threads past n do nothing.
extern "C" __global__ void axpy(uint32_t n, float a, const float* x, float* y) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// The argument sizes, for plugins that copy arguments (<gpuplug/kernel_args.h>).
extern "C" __device__ const gpuplug_kernel_args_t axpy_args = {
    GPUPLUG_KERNEL_ARGS_VERSION, 4, {4, 4, 8, 8}};
