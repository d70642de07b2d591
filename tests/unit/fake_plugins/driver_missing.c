/* SPDX-License-Identifier: Apache-2.0
 * Fake GPU plugin that loads fine but whose driver is absent: unavailable / driver_missing. */
#include "fake_table.h"

static gpuplug_status_t probe_driver_missing(gpuplug_probe_result_t* out) {
  out->reason = GPUPLUG_PROBE_DRIVER_MISSING;
  out->device_count = 0;
  strncpy(out->message, "driver missing: libfakegpu.so.1 not found", sizeof out->message - 1);
  return GPUPLUG_STATUS_SUCCESS;
}

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  gpuplug_plugin_v1* table = fake_named_table("fake_missing", probe_driver_missing);
  table->vendor = "Fake GPUs Inc.";
  return table;
}
