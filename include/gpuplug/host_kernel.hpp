// SPDX-License-Identifier: Apache-2.0
// Helpers for host kernel modules: reading arguments from params, walking a block's threads, and
// exporting kernels and their <func>_args. Needs only <gpuplug/abi.h> and <gpuplug/kernel_args.h>.
#pragma once

// The calling convention is documented in <gpuplug/abi.h> and plugins/host/device.hpp.
#include <gpuplug/abi.h>
#include <gpuplug/kernel_args.h>

#include <cstdint>
#include <cstring>

namespace gpuplug::host_kernels {

/// Argument i as a value of type T (uint32_t, float, ...).
template <class T>
inline T arg(void* const* params, int i) noexcept {
  T value;
  std::memcpy(&value, params[i], sizeof value);
  return value;
}

/// Argument i as a device pointer: the argument is a uint64 device address.
template <class T>
inline T* ptr(void* const* params, int i) noexcept {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(arg<std::uint64_t>(params, i)));
}

/// [begin, end) of the 1-D element range a block covers (block_idx.x * block_dim.x + t for the
/// block's threads t), clamped to n: the bounds check every element-wise kernel needs.
struct Range {
  std::uint64_t begin, end;
};
inline Range block_range(const gpuplug_host_block_t* b, std::uint64_t n) noexcept {
  const std::uint64_t begin = static_cast<std::uint64_t>(b->block_idx.x) * b->block_dim.x;
  const std::uint64_t end = begin + b->block_dim.x;
  return {begin < n ? begin : n, end < n ? end : n};
}

}  // namespace gpuplug::host_kernels

/// Declares a kernel with the host calling convention, exported from the module.
#define GPUPLUG_HOST_KERNEL(name) \
  extern "C" GPUPLUG_PLUGIN_EXPORT void name(const gpuplug_host_block_t* block, void* const* params)

/// Publishes `<name>_args` (<gpuplug/kernel_args.h>): the kernel's argument count and the size in
/// bytes of each, e.g. GPUPLUG_HOST_KERNEL_ARGS(axpy, 4, {4, 4, 8, 8}). A device pointer is 8.
#define GPUPLUG_HOST_KERNEL_ARGS(name, count, ...)                             \
  extern "C" GPUPLUG_PLUGIN_EXPORT const gpuplug_kernel_args_t name##_args = { \
      GPUPLUG_KERNEL_ARGS_VERSION, (count), __VA_ARGS__}
