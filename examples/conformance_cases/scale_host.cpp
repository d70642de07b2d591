// SPDX-License-Identifier: Apache-2.0
// Kernel module "scale" for the host backend: y[i] = a * x[i] for i < n.
// Launch: grid ceil(n/256), block 256. Arguments: uint32 n, float a, device x, device y.
// (scale.cu is the same kernel for CUDA; a HIP version would be scale.hip built with --genco.)
// Built by gpuplug_add_kernel_module (CMakeLists.txt); it needs the gpuplug headers only.
#include <gpuplug/host_kernel.hpp>

#include <cstdint>

using gpuplug::host_kernels::arg;
using gpuplug::host_kernels::block_range;
using gpuplug::host_kernels::ptr;

// Its argument sizes, for a plugin that runs launches later and must copy the arguments
// (docs/kernels.md): uint32 n, float a, two device pointers.
GPUPLUG_HOST_KERNEL_ARGS(scale, 4, {4, 4, 8, 8});

GPUPLUG_HOST_KERNEL(scale) {
  const auto n = arg<std::uint32_t>(params, 0);
  const auto a = arg<float>(params, 1);
  const float* x = ptr<const float>(params, 2);
  float* y = ptr<float>(params, 3);
  const auto [begin, end] = block_range(block, n);
  for (std::uint64_t i = begin; i < end; ++i) y[i] = a * x[i];
}
