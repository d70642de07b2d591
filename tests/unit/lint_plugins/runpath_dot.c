/* SPDX-License-Identifier: Apache-2.0
 * Lint plugin "lint_runpath_dot": the host plugin under another name, linked with -Wl,-rpath,.
 * (CMakeLists.txt), so its DT_RUNPATH is "." and its dependencies are searched for in the
 * current directory of whatever process loads it: lint runpath must name the element. */
#include "../forward_host.h"

static gpuplug_plugin_v1 table;

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  return forward_host(host_abi_version, "lint_runpath_dot", &table, NULL);
}
