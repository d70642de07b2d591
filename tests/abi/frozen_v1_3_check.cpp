// SPDX-License-Identifier: Apache-2.0
// Compiled into the ABI 1.3 SDK (tests/abi/CMakeLists.txt): fails the build unless the frozen
// 1.3 header, not include/gpuplug/abi.h, is the one its include path finds.
#include <gpuplug/abi.h>

static_assert(GPUPLUG_ABI_VERSION_MAJOR == 1 && GPUPLUG_ABI_VERSION_MINOR == 3,
              "the ABI 1.3 build must find tests/abi/v1_3/gpuplug/abi.h first");
#ifdef GPUPLUG_PLUGIN_V1_4_SIZE
#error "the ABI 1.3 build sees the 1.4 header"
#endif
