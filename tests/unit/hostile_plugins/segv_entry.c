/* SPDX-License-Identifier: Apache-2.0
 * Hostile plugin: its entry point dereferences null. Discovery must survive it (crashed). */
#include "../fake_plugins/fake_table.h"

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  volatile int* volatile nowhere = NULL;
  *nowhere = (int)host_abi_version;
  return NULL;
}
