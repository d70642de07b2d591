/* SPDX-License-Identifier: Apache-2.0
 * The slot layout of each frozen ABI table, from frozen_layout.c compiled once per frozen header
 * (tests/abi/v1_<minor>/gpuplug/abi.h first on the include path). */
#ifndef GPUPLUG_TEST_FROZEN_LAYOUT_H
#define GPUPLUG_TEST_FROZEN_LAYOUT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpuplug_test_slot_layout {
  const char* name;
  size_t offset;
  size_t size;
} gpuplug_test_slot_layout;

/* The slots of the frozen 1.<minor> table in order, their count, and sizeof its
 * gpuplug_plugin_v1. */
const gpuplug_test_slot_layout* gpuplug_test_v1_0_layout(size_t* count, size_t* table_size);
const gpuplug_test_slot_layout* gpuplug_test_v1_1_layout(size_t* count, size_t* table_size);
const gpuplug_test_slot_layout* gpuplug_test_v1_2_layout(size_t* count, size_t* table_size);
const gpuplug_test_slot_layout* gpuplug_test_v1_3_layout(size_t* count, size_t* table_size);

#ifdef __cplusplus
}
#endif

#endif
