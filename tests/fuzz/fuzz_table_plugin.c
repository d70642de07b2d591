/* SPDX-License-Identifier: Apache-2.0
 * A plugin whose table is whatever fuzz_plugin_table puts there: the registry loads it like any
 * other plugin file, so the fuzzer reaches the core's real loading and validation path.
 * Built next to the fuzzer, never into the plugin folder, so discovery never finds it. */
#include <gpuplug/abi.h>

static const gpuplug_plugin_v1* current_table; /* set by the fuzzer before each load */
static uint32_t last_host_version;

GPUPLUG_PLUGIN_EXPORT void gpuplug_fuzz_set_table(const gpuplug_plugin_v1* table) {
  current_table = table;
}

GPUPLUG_PLUGIN_EXPORT uint32_t gpuplug_fuzz_last_host_version(void) { return last_host_version; }

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  last_host_version = host_abi_version;
  return current_table;
}
