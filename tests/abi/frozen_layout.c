/* SPDX-License-Identifier: Apache-2.0
 * The slot offsets of one frozen ABI table (tests/abi/v1_<GPUPLUG_TEST_FROZEN_MINOR>/gpuplug/abi.h
 * first on the include path), as the one slot list names them: test_abi_slot_list compares them
 * with today's header, so that no released minor's table ever changes. */
#include <gpuplug/abi.h>
#include <gpuplug/support/abi_slot_rows.h>
#include <stddef.h>

#include "frozen_layout.h"

#ifndef GPUPLUG_TEST_FROZEN_MINOR
#error "define GPUPLUG_TEST_FROZEN_MINOR to the frozen header's minor (tests/abi/CMakeLists.txt)"
#endif
#if GPUPLUG_ABI_VERSION_MINOR != GPUPLUG_TEST_FROZEN_MINOR
#error "frozen_layout.c must see the frozen header of its minor first (tests/abi/CMakeLists.txt)"
#endif

#define GPUPLUG_FROZEN_ROW(P, name, minor, side, group, rule, absent) \
  {#name, offsetof(gpuplug_plugin_v1, name), sizeof(((gpuplug_plugin_v1*)0)->name)},
static const gpuplug_test_slot_layout rows[] = {GPUPLUG_ABI_SLOTS(GPUPLUG_FROZEN_ROW, ~)};

#define GPUPLUG_LAYOUT_FN_(minor) gpuplug_test_v1_##minor##_layout
#define GPUPLUG_LAYOUT_FN(minor) GPUPLUG_LAYOUT_FN_(minor)

const gpuplug_test_slot_layout* GPUPLUG_LAYOUT_FN(GPUPLUG_TEST_FROZEN_MINOR)(size_t* count,
                                                                            size_t* table_size) {
  *count = sizeof rows / sizeof rows[0];
  *table_size = sizeof(gpuplug_plugin_v1);
  return rows;
}
