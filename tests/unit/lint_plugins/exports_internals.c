/* SPDX-License-Identifier: Apache-2.0
 * Lint plugin "lint_exports_internals": the host plugin under another name, built with default
 * visibility and no version script, so its helpers and its counter are exported beside the entry
 * point: lint exports must name them. */
#include "../forward_host.h"

/* The mistake: not static, not hidden. */
int lint_entry_calls;
const char* lint_plugin_name(void) { return "lint_exports_internals"; }
gpuplug_plugin_v1 lint_table;

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  ++lint_entry_calls;
  return forward_host(host_abi_version, lint_plugin_name(), &lint_table, NULL);
}
