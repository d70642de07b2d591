/* SPDX-License-Identifier: Apache-2.0
 * Fake plugin whose table claims fewer bytes than v1 needs: table_too_small. */
#include "fake_table.h"

static gpuplug_plugin_v1 table;

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  fake_fill_table(&table);
  table.struct_size = 16;
  table.name = "fake_small";
  table.probe = fake_probe_no_device;
  return &table;
}
