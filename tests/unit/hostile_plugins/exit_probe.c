/* SPDX-License-Identifier: Apache-2.0
 * Hostile plugin: probe calls exit(0). In-process, that turned an application into a silent
 * exit 0; isolated, it is reported as exited with status 0. */
#include <stdlib.h>

#include "../fake_plugins/fake_table.h"

static gpuplug_plugin_v1 table;

static gpuplug_status_t probe_exits(gpuplug_probe_result_t* out) {
  (void)out;
  exit(0);
}

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  fake_fill_table(&table);
  table.name = "hostile_exit";
  table.probe = probe_exits;
  return &table;
}
