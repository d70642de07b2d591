/* SPDX-License-Identifier: Apache-2.0
 * Fake plugin whose probe claims 4 billion devices: discovery must refuse it, not describe them. */
#include "fake_table.h"

static gpuplug_status_t probe_too_many(gpuplug_probe_result_t* out) {
  out->reason = GPUPLUG_PROBE_AVAILABLE;
  out->device_count = 0xFFFFFFFFu;
  return GPUPLUG_STATUS_SUCCESS;
}

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  return fake_named_table("fake_many", probe_too_many);
}
