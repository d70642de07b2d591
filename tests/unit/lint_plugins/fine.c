/* SPDX-License-Identifier: Apache-2.0
 * Lint plugin "lint_fine": the host plugin under another name with no mistake, built the way the
 * others are: every lint passes, so a failing lint elsewhere is that plugin's mistake and not the
 * way this folder builds them. */
#include "../forward_host.h"

static gpuplug_plugin_v1 table;

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  return forward_host(host_abi_version, "lint_fine", &table, NULL);
}
