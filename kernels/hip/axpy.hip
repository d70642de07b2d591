// SPDX-License-Identifier: Apache-2.0
// Module "axpy" for the HIP backend: y = a*x + y, one element per thread.
#include <hip/hip_runtime.h>
#include <stdint.h>

// Launch: grid = ceil(n / 256), block = 256. Threads past n do nothing.
extern "C" __global__ void __launch_bounds__(256)
    axpy(uint32_t n, float a, const float* x, float* y) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
