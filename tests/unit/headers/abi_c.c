/* SPDX-License-Identifier: Apache-2.0
 * abi.h compiles as C99 on its own: C plugins include it without any C++ around. */
#include <gpuplug/abi.h>

/* Touch the table and the entry type so that the declarations are used, not just parsed. */
size_t gpuplug_test_abi_c_min_size(void) { return GPUPLUG_PLUGIN_V1_MIN_SIZE; }
gpuplug_plugin_entry_fn gpuplug_test_abi_c_entry_type(void) { return (gpuplug_plugin_entry_fn)0; }

/* kernel_args.h too (CUDA/HIP and C modules include it), with its layout pinned: nvcc, hipcc
 * and host compilers must agree on it. */
#include <gpuplug/kernel_args.h>
_Static_assert(sizeof(gpuplug_kernel_args_t) == 72, "gpuplug_kernel_args_t is 72 bytes");
