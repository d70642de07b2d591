/* SPDX-License-Identifier: Apache-2.0
 * Fake plugin: a fine shared object with no gpuplug_plugin_entry (missing_entry_symbol). */
#include <gpuplug/abi.h>

GPUPLUG_PLUGIN_EXPORT int gpuplug_not_the_entry(void) { return 1; }
