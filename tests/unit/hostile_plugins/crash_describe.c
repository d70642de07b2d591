/* SPDX-License-Identifier: Apache-2.0
 * Hostile plugin: probe finds one device, then describe_device dereferences null (crashed). */
#include "../fake_plugins/fake_table.h"

static gpuplug_plugin_v1 table;

static gpuplug_status_t probe_one(gpuplug_probe_result_t* out) {
  out->reason = GPUPLUG_PROBE_AVAILABLE;
  out->device_count = 1;
  return GPUPLUG_STATUS_SUCCESS;
}

static gpuplug_status_t describe_crashes(uint32_t ordinal, gpuplug_device_info_t* out) {
  volatile gpuplug_device_info_t* volatile nowhere = NULL;
  nowhere->ordinal = ordinal;
  (void)out;
  return GPUPLUG_STATUS_SUCCESS;
}

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  fake_fill_table(&table);
  table.name = "hostile_describe";
  table.probe = probe_one;
  table.describe_device = describe_crashes;
  return &table;
}
