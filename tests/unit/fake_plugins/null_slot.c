/* SPDX-License-Identifier: Apache-2.0
 * Fake plugin whose table leaves a required slot (probe) null: refused as breaking the ABI. */
#include "fake_table.h"

static gpuplug_plugin_v1 table;

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  fake_fill_table(&table);
  table.name = "fake_nullslot";
  table.probe = NULL;
  return &table;
}
