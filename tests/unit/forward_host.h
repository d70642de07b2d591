/* SPDX-License-Identifier: Apache-2.0
 * The cheap way to a working plugin for the test plugins with one mistake each (lint_plugins,
 * mistake_plugins, hostile_plugins/broken_host.c): forward to the real host plugin, whose path
 * the build passes as GPUPLUG_HOST_PLUGIN_FILE, and keep its table but for the name and the slots
 * the mistake replaces. Each plugin then carries exactly one mistake of its own. */
#ifndef GPUPLUG_TEST_FORWARD_HOST_H
#define GPUPLUG_TEST_FORWARD_HOST_H

#include <dlfcn.h>
#include <gpuplug/abi.h>
#include <stddef.h>
#include <string.h>

/* The host plugin's answer to `host_abi_version`, copied into `table` under `name`; NULL when the
 * host plugin cannot be loaded or answers NULL. `host`, when not NULL, gets the host plugin's own
 * table (for slots that forward to it). The host plugin is never closed: the table's slots point
 * into it. Each call answers anew and rewrites `table` (the core copies a table when it loads a
 * plugin; `gpuplug check`'s abi_answer lint asks for several versions in turn, ABI-4). */
static const gpuplug_plugin_v1* forward_host(uint32_t host_abi_version, const char* name,
                                             gpuplug_plugin_v1* table,
                                             const gpuplug_plugin_v1** host) {
  void* real = dlopen(GPUPLUG_HOST_PLUGIN_FILE, RTLD_NOW | RTLD_LOCAL);
  if (real == NULL) return NULL;
  gpuplug_plugin_entry_fn entry = (gpuplug_plugin_entry_fn)dlsym(real, GPUPLUG_PLUGIN_ENTRY_SYMBOL);
  if (entry == NULL) return NULL;
  const gpuplug_plugin_v1* t = entry(host_abi_version);
  if (t == NULL || t->struct_size > sizeof *table) return NULL;
  memset(table, 0, sizeof *table);
  memcpy(table, t, t->struct_size);
  table->name = name;
  if (host != NULL) *host = t;
  return table;
}

#endif /* GPUPLUG_TEST_FORWARD_HOST_H */
