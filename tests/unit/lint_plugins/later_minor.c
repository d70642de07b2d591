/* SPDX-License-Identifier: Apache-2.0
 * Lint plugin "lint_later_minor": the host plugin's table declaring ABI 1.5 whatever the host
 * asks, a later minor than any host of this tree: lint abi_answer must name ABI-4 and the
 * versions (and the core refuses it at load). */
#include "../forward_host.h"

static gpuplug_plugin_v1 table;

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  gpuplug_plugin_v1* t =
      (gpuplug_plugin_v1*)forward_host(host_abi_version, "lint_later_minor", &table, NULL);
  if (t != NULL) t->abi_version = GPUPLUG_MAKE_VERSION(1, 5); /* the mistake */
  return t;
}
