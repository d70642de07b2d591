/* SPDX-License-Identifier: Apache-2.0
 * Fake plugin whose entry point returns null (no ABI shared with the host): entry_returned_null. */
#include <gpuplug/abi.h>
#include <stddef.h>

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  return NULL;
}
