// SPDX-License-Identifier: Apache-2.0
// Compiled into the ABI 1.2 SDK (tests/abi/CMakeLists.txt): fails the build unless the frozen
// 1.2 header, not include/gpuplug/abi.h, is the one its include path finds.
#include <gpuplug/abi.h>

static_assert(GPUPLUG_ABI_VERSION_MAJOR == 1 && GPUPLUG_ABI_VERSION_MINOR == 2,
              "the ABI 1.2 build must find tests/abi/v1_2/gpuplug/abi.h first");
#ifdef GPUPLUG_PLUGIN_V1_3_SIZE
#error "the ABI 1.2 build sees the 1.3 header"
#endif
