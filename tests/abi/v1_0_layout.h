/* SPDX-License-Identifier: Apache-2.0
 * The frozen ABI 1.0 table's layout, from v1_0_layout.c (compiled against the frozen header). */
#ifndef GPUPLUG_TEST_V1_0_LAYOUT_H
#define GPUPLUG_TEST_V1_0_LAYOUT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpuplug_test_slot_layout {
  const char* name;
  size_t offset;
  size_t size;
} gpuplug_test_slot_layout;

/* The slots of the 1.0 table in order, their count, and sizeof the 1.0 gpuplug_plugin_v1. */
const gpuplug_test_slot_layout* gpuplug_test_v1_0_layout(size_t* count, size_t* table_size);

#ifdef __cplusplus
}
#endif

#endif
