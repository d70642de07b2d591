// SPDX-License-Identifier: Apache-2.0
// Compiled into the ABI 1.1 SDK (tests/abi/CMakeLists.txt): fails the build unless the frozen
// 1.1 header, not include/gpuplug/abi.h, is the one its include path finds.
#include <gpuplug/abi.h>

static_assert(GPUPLUG_ABI_VERSION_MAJOR == 1 && GPUPLUG_ABI_VERSION_MINOR == 1,
              "the ABI 1.1 build must find tests/abi/v1_1/gpuplug/abi.h first");
#ifdef GPUPLUG_PLUGIN_V1_2_SIZE
#error "the ABI 1.1 build sees the 1.2 header"
#endif
