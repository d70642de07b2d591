// SPDX-License-Identifier: Apache-2.0
// Kernel module "scale" for CUDA (nvcc -fatbin): y[i] = a * x[i] for i < n.
// Launch: grid ceil(n/256), block 256. Arguments: uint32 n, float a, device x, device y.
#include <gpuplug/kernel_args.h>

#include <cstdint>

// Its argument sizes (docs/kernels.md): uint32 n, float a, two device pointers.
extern "C" __device__ const gpuplug_kernel_args_t scale_args = {GPUPLUG_KERNEL_ARGS_VERSION, 4,
                                                                 {4, 4, 8, 8}};

extern "C" __global__ void scale(std::uint32_t n, float a, const float* x, float* y) {
  const std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
