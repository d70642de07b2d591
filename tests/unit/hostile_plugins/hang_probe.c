/* SPDX-License-Identifier: Apache-2.0
 * Hostile plugin: probe never returns. Discovery reports it as timed_out after the probe
 * timeout and goes on. */
#include <unistd.h>

#include "../fake_plugins/fake_table.h"

static gpuplug_plugin_v1 table;

static gpuplug_status_t probe_hangs(gpuplug_probe_result_t* out) {
  (void)out;
  for (;;) pause();
}

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  fake_fill_table(&table);
  table.name = "hostile_hang";
  table.probe = probe_hangs;
  return &table;
}
