// SPDX-License-Identifier: Apache-2.0
// Test-only module "test_origin": needs libgpuplug_test_sibling.so (DT_NEEDED), found next to it
// through RUNPATH $ORIGIN, which only works when the module is loaded by its path.
#include <gpuplug/host_kernel.hpp>

extern "C" std::uint32_t gpuplug_test_sibling_value();

using namespace gpuplug::host_kernels;

// sibling_value(uint32* out): *out = the sibling library's value (20260).
GPUPLUG_HOST_KERNEL(sibling_value) {
  (void)block;
  *ptr<std::uint32_t>(params, 0) = gpuplug_test_sibling_value();
}
