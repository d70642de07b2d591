/* SPDX-License-Identifier: Apache-2.0
 * Fake plugin that only speaks ABI 2.0: abi_mismatch, with both versions in the message. */
#include "fake_table.h"

static gpuplug_plugin_v1 table;

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  fake_fill_table(&table);
  table.abi_version = GPUPLUG_MAKE_VERSION(2, 0);
  table.name = "fake_abi2";
  table.probe = fake_probe_no_device;
  return &table;
}
