/* SPDX-License-Identifier: Apache-2.0
 * The slot offsets of the frozen ABI 1.0 table (tests/abi/v1_0/gpuplug/abi.h first on the include
 * path), as the one slot list names them: test_abi_slot_list compares them with today's header. */
#include <gpuplug/abi.h>
#include <gpuplug/support/abi_slot_rows.h>
#include <stddef.h>

#include "v1_0_layout.h"

#if GPUPLUG_ABI_VERSION_MINOR != 0
#error "v1_0_layout.c must see the frozen 1.0 header first (tests/abi/CMakeLists.txt)"
#endif

#define GPUPLUG_V1_0_ROW(P, name, minor, side, group, rule, absent) \
  {#name, offsetof(gpuplug_plugin_v1, name), sizeof(((gpuplug_plugin_v1*)0)->name)},
static const gpuplug_test_slot_layout rows[] = {GPUPLUG_ABI_SLOTS(GPUPLUG_V1_0_ROW, ~)};

const gpuplug_test_slot_layout* gpuplug_test_v1_0_layout(size_t* count, size_t* table_size) {
  *count = sizeof rows / sizeof rows[0];
  *table_size = sizeof(gpuplug_plugin_v1);
  return rows;
}
