/* SPDX-License-Identifier: Apache-2.0
 * Fake plugin whose dependency (libgpuplug-fake-gone.so.1) does not exist: missing_dependency. */
#include <gpuplug/abi.h>
#include <stddef.h>

int gpuplug_fake_gone_value(void);

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  return gpuplug_fake_gone_value() == 42 ? NULL : NULL; /* never reached: the load fails */
}
