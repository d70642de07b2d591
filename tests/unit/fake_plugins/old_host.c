/* SPDX-License-Identifier: Apache-2.0
 * The real host plugin as a plugin built before load_module_file was appended to the table: its
 * table, published with struct_size = GPUPLUG_PLUGIN_V1_MIN_SIZE and the name "host_v1_0". The
 * copy keeps the real load_module_file pointer past struct_size on purpose: a host must not read
 * it, so module files reach this plugin as bytes (the core's default). Built into a folder of its
 * own, never the fake or the real plugin folder, so discovery never finds it. */
#include <dlfcn.h>
#include <gpuplug/abi.h>
#include <string.h>

static gpuplug_plugin_v1 old_table;
static int old_table_ready;

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  if (!old_table_ready) {
    /* Never closed: the table's slots point into it. */
    void* real = dlopen(GPUPLUG_HOST_PLUGIN_FILE, RTLD_NOW | RTLD_LOCAL);
    if (real == NULL) return NULL;
    gpuplug_plugin_entry_fn entry = (gpuplug_plugin_entry_fn)dlsym(real, GPUPLUG_PLUGIN_ENTRY_SYMBOL);
    if (entry == NULL) return NULL;
    const gpuplug_plugin_v1* t = entry(host_abi_version);
    if (t == NULL || t->struct_size < sizeof old_table) return NULL;
    memcpy(&old_table, t, sizeof old_table);
    old_table.struct_size = (uint32_t)GPUPLUG_PLUGIN_V1_MIN_SIZE;
    old_table.name = "host_v1_0";
    old_table_ready = 1;
  }
  return &old_table;
}
