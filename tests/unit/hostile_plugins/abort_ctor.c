/* SPDX-License-Identifier: Apache-2.0
 * Hostile plugin: a static constructor aborts while the library is being loaded (crashed). */
#include <stdlib.h>

#include "../fake_plugins/fake_table.h"

__attribute__((constructor)) static void abort_on_load(void) { abort(); }

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  return NULL;
}
