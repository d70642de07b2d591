/* SPDX-License-Identifier: Apache-2.0
 * Lint plugin "lint_runpath_dot": the host plugin under another name whose DT_RUNPATH starts with
 * ".", so its dependencies are searched for in the current directory of whatever process loads
 * it: lint runpath must name the element. The build links it with an absolute placeholder
 * element (CMakeLists.txt); tests/scripts/check_lints.sh writes "." over it in a temporary copy. */
#include "../forward_host.h"

static gpuplug_plugin_v1 table;

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  return forward_host(host_abi_version, "lint_runpath_dot", &table, NULL);
}
