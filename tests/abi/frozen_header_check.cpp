// SPDX-License-Identifier: Apache-2.0
// Compiled into the ABI 1.0 SDK and plugin (tests/abi/CMakeLists.txt): fails the build unless
// the frozen 1.0 header, not include/gpuplug/abi.h, is the one their include path finds.
#include <gpuplug/abi.h>

static_assert(GPUPLUG_ABI_VERSION_MAJOR == 1 && GPUPLUG_ABI_VERSION_MINOR == 0,
              "the ABI 1.0 build must find tests/abi/v1_0/gpuplug/abi.h first");
#ifdef GPUPLUG_PLUGIN_V1_1_SIZE
#error "the ABI 1.0 build sees the 1.1 header"
#endif
