// SPDX-License-Identifier: Apache-2.0
// Test-only module: 256 kernels with 40-character names, more than the 4096-byte functions field
// of gpuplug_module_inspection_t holds, so that inspect_module must cut the list (ending it with
// "...") without cutting a name.
#include <gpuplug/host_kernel.hpp>

#define GPUPLUG_MANY_KERNEL(n) \
  GPUPLUG_HOST_KERNEL(kernel_with_a_name_long_enough_to_fill_##n) { (void)block; (void)params; }
#define GPUPLUG_MANY_4(n) \
  GPUPLUG_MANY_KERNEL(n##0) GPUPLUG_MANY_KERNEL(n##1) GPUPLUG_MANY_KERNEL(n##2) GPUPLUG_MANY_KERNEL(n##3)
#define GPUPLUG_MANY_16(n) GPUPLUG_MANY_4(n##0) GPUPLUG_MANY_4(n##1) GPUPLUG_MANY_4(n##2) GPUPLUG_MANY_4(n##3)
#define GPUPLUG_MANY_64(n) \
  GPUPLUG_MANY_16(n##0) GPUPLUG_MANY_16(n##1) GPUPLUG_MANY_16(n##2) GPUPLUG_MANY_16(n##3)

GPUPLUG_MANY_64(0)
GPUPLUG_MANY_64(1)
GPUPLUG_MANY_64(2)
GPUPLUG_MANY_64(3)
