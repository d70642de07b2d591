/* SPDX-License-Identifier: Apache-2.0
 * Lint plugin in libgpuplug-lint_name_mismatch.so whose table says "lint_other_name": lint name
 * must name both. */
#include "../forward_host.h"

static gpuplug_plugin_v1 table;

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  return forward_host(host_abi_version, "lint_other_name", &table, NULL);
}
