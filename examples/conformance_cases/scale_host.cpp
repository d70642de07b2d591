// SPDX-License-Identifier: Apache-2.0
// Kernel module "scale" for the host backend: y[i] = a * x[i] for i < n.
// Launch: grid ceil(n/256), block 256. Arguments: uint32 n, float a, device x, device y.
// (scale.cu is the same kernel for CUDA; a HIP version would be scale.hip built with --genco.)
#include <gpuplug/abi.h>
#include <gpuplug/kernel_args.h>

#include <cstdint>
#include <cstring>

namespace {
template <class T>
T arg(void* const* params, int i) {
  T value;
  std::memcpy(&value, params[i], sizeof value);
  return value;
}
}  // namespace

// Its argument sizes, for a plugin that runs launches later and must copy the arguments
// (docs/kernels.md): uint32 n, float a, two device pointers.
extern "C" GPUPLUG_PLUGIN_EXPORT const gpuplug_kernel_args_t scale_args = {
    GPUPLUG_KERNEL_ARGS_VERSION, 4, {4, 4, 8, 8}};

extern "C" GPUPLUG_PLUGIN_EXPORT void scale(const gpuplug_host_block_t* block,
                                            void* const* params) {
  const auto n = arg<std::uint32_t>(params, 0);
  const auto a = arg<float>(params, 1);
  const auto* x = reinterpret_cast<const float*>(arg<std::uint64_t>(params, 2));
  auto* y = reinterpret_cast<float*>(arg<std::uint64_t>(params, 3));
  const std::uint64_t begin = std::uint64_t{block->block_idx.x} * block->block_dim.x;
  for (std::uint64_t i = begin; i < begin + block->block_dim.x && i < n; ++i) y[i] = a * x[i];
}
