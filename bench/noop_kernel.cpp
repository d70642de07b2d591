// SPDX-License-Identifier: Apache-2.0
// Bench-only host kernel module "bench_noop": its kernels do nothing, so a launch costs only
// dispatch.
#include <gpuplug/host_kernel.hpp>

// noop(): no arguments; any grid and block. Its body is empty on purpose: bench_backend times
// the layers between the caller and the kernel, and a real kernel's work would drown them.
extern "C" GPUPLUG_PLUGIN_EXPORT void noop(const gpuplug_host_block_t* /*block*/,
                                           void* const* /*params*/) {}

// noop_counted(uint32_t): the same, with `noop_counted_args` published, so that a counted launch
// (launch_args) pays for its check against the signature.
extern "C" GPUPLUG_PLUGIN_EXPORT void noop_counted(const gpuplug_host_block_t* /*block*/,
                                                   void* const* /*params*/) {}
GPUPLUG_HOST_KERNEL_ARGS(noop_counted, 1, {4});
