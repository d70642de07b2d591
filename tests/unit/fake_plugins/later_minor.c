/* SPDX-License-Identifier: Apache-2.0
 * Fake plugin that answers ABI 1.5 whatever the host asks: a later minor than any host of this
 * tree speaks, refused under ABI-4 with both versions in the message. */
#include "fake_table.h"

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  gpuplug_plugin_v1* table = fake_named_table("fake_later_minor", fake_probe_no_device);
  table->abi_version = GPUPLUG_MAKE_VERSION(1, 5);
  return table;
}
