// SPDX-License-Identifier: Apache-2.0
// Test-only library libgpuplug_test_sibling.so: the sibling a module finds through RUNPATH
// $ORIGIN when it is loaded from a file (test_origin.cpp depends on it).
#include <gpuplug/abi.h>

#include <cstdint>

extern "C" GPUPLUG_PLUGIN_EXPORT std::uint32_t gpuplug_test_sibling_value() { return 20260; }
