/* SPDX-License-Identifier: Apache-2.0
 * Fake plugin that also calls itself "host": found after the real one, it is a duplicate_name. */
#include "fake_table.h"

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  return fake_named_table("host", fake_probe_no_device);
}
