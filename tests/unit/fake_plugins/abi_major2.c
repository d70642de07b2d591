/* SPDX-License-Identifier: Apache-2.0
 * Fake plugin that only speaks ABI 2.0: abi_mismatch, with both versions in the message. */
#include "fake_table.h"

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  gpuplug_plugin_v1* table = fake_named_table("fake_abi2", fake_probe_no_device);
  table->abi_version = GPUPLUG_MAKE_VERSION(2, 0);
  return table;
}
