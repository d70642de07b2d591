// SPDX-License-Identifier: Apache-2.0
// This core's ABI version as its messages spell it ("1.3"), as a string literal, for tests that
// check a message naming it.
#pragma once

#include <gpuplug/abi.h>

#define GPUPLUG_TEST_STR2(x) #x
#define GPUPLUG_TEST_STR(x) GPUPLUG_TEST_STR2(x)
#define GPUPLUG_TEST_ABI_TEXT \
  GPUPLUG_TEST_STR(GPUPLUG_ABI_VERSION_MAJOR) "." GPUPLUG_TEST_STR(GPUPLUG_ABI_VERSION_MINOR)
