/* SPDX-License-Identifier: Apache-2.0
 * The real host plugin with three of the injected mistakes `gpuplug check --isolate` must survive:
 * launch dereferences a null pointer (a crash in every case that launches a kernel),
 * memset_d8 says so on stderr and ends the process with _exit(7) (an exit without a result),
 * and event_synchronize never returns and ignores SIGTERM (a hang in the cases that wait on an
 * event). Everything else
 * is the host plugin's, so the other cases pass. Name "broken_host"; built into the hostile folder,
 * so discovery never finds it: tests name it with --plugin. */
#include <dlfcn.h>
#include <gpuplug/abi.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "../forward_host.h"

static gpuplug_plugin_v1 table;

static gpuplug_status_t crashing_launch(gpuplug_instance_t inst, uint64_t function,
                                        gpuplug_dim3_t grid, gpuplug_dim3_t block,
                                        uint32_t shared_bytes, uint64_t stream, void** params) {
  (void)inst, (void)function, (void)grid, (void)block, (void)shared_bytes, (void)stream,
      (void)params;
  volatile int* nowhere = NULL;
  *nowhere = 42; /* the point: SIGSEGV */
  return GPUPLUG_STATUS_SUCCESS;
}

static gpuplug_status_t exiting_memset(gpuplug_instance_t inst, uint64_t dst, uint8_t value,
                                       uint64_t bytes, uint64_t stream) {
  (void)inst, (void)dst, (void)value, (void)bytes, (void)stream;
  static const char note[] = "broken_host: memset_d8 gives up\n";
  (void)!write(STDERR_FILENO, note, sizeof note - 1);
  _exit(7);
}

static gpuplug_status_t hanging_event_synchronize(gpuplug_instance_t inst, uint64_t event) {
  (void)inst, (void)event;
  /* Deaf to SIGTERM as well, as a wedged driver call can be: only SIGKILL ends it, which is what
   * the checker's grace period must come to. */
  signal(SIGTERM, SIG_IGN);
  for (;;) pause();
  return GPUPLUG_STATUS_SUCCESS;
}

/* The host plugin's answer to each version asked for (ABI-4, which `gpuplug check`'s abi_answer
 * lint checks for 1.0, 1.1 and 1.99), rebuilt on every call: the core copies the table it gets. */
GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  if (forward_host(host_abi_version, "broken_host", &table, NULL) == NULL) return NULL;
  table.launch = crashing_launch;
  table.memset_d8 = exiting_memset;
  if (table.struct_size >= offsetof(gpuplug_plugin_v1, event_synchronize) + sizeof(void*))
    table.event_synchronize = hanging_event_synchronize;
  return &table;
}
