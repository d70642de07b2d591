/* SPDX-License-Identifier: Apache-2.0
 * Fake plugin whose table claims fewer bytes than v1 needs: table_too_small. */
#include "fake_table.h"

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  gpuplug_plugin_v1* table = fake_named_table("fake_small", fake_probe_no_device);
  table->struct_size = 16;
  return table;
}
