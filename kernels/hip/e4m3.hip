// SPDX-License-Identifier: Apache-2.0
// Module "e4m3" for the HIP backend: f32 <-> OCP E4M3 casts through kernels/common/e4m3.h.
#include <gpuplug/kernel_args.h>
#include <hip/hip_runtime.h>
#include <stdint.h>

#include "e4m3.h"

// Both casts: grid = ceil(n / 256), block = 256; one element per thread. The shared header
// makes the rounding bit-identical to the host and CUDA kernels (RNE, saturating, NaN kept).
extern "C" __global__ void __launch_bounds__(256)
    cast_f32_e4m3(uint32_t n, const float* in, uint8_t* out) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = gpuplug_f32_to_e4m3(in[i]);
}

extern "C" __global__ void __launch_bounds__(256)
    cast_e4m3_f32(uint32_t n, const uint8_t* in, float* out) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = gpuplug_e4m3_to_f32(in[i]);
}

// The argument sizes, for plugins that copy arguments (<gpuplug/kernel_args.h>).
extern "C" __device__ __attribute__((used)) const gpuplug_kernel_args_t cast_f32_e4m3_args = {
    GPUPLUG_KERNEL_ARGS_VERSION, 3, {4, 8, 8}};
extern "C" __device__ __attribute__((used)) const gpuplug_kernel_args_t cast_e4m3_f32_args = {
    GPUPLUG_KERNEL_ARGS_VERSION, 3, {4, 8, 8}};
