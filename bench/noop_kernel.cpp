// SPDX-License-Identifier: Apache-2.0
// Bench-only host kernel module "bench_noop": noop() does nothing, so a launch costs only dispatch.
#include <gpuplug/abi.h>

// noop(): no arguments; any grid and block. Its body is empty on purpose: bench_backend times
// the layers between the caller and the kernel, and a real kernel's work would drown them.
extern "C" GPUPLUG_PLUGIN_EXPORT void noop(const gpuplug_host_block_t* /*block*/,
                                           void* const* /*params*/) {}
