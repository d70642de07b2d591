/* SPDX-License-Identifier: Apache-2.0
 * Fake plugin whose table leaves a required slot (probe) null: refused as breaking the ABI. */
#include "fake_table.h"

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  return fake_named_table("fake_nullslot", NULL);
}
