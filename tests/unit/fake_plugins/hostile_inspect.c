/* SPDX-License-Identifier: Apache-2.0
 * Fake plugin with one device whose inspect_module (ABI 1.1) writes what a careless or hostile
 * plugin might: every string field full to its last byte with no terminator, a loadable value
 * that is neither 0 nor 1, a "name=value" whose value overflows 32 bits; and, for an image
 * starting with "fail", an error status with an unterminated reason. The core must read each
 * field only up to its size. Built into a folder of its own (tests add it with
 * PluginRegistry::add_plugin_file): an available fake in the shared fake folder would be a
 * candidate for "auto". */
#include "fake_table.h"

static gpuplug_status_t probe_one(gpuplug_probe_result_t* out) {
  out->reason = GPUPLUG_PROBE_AVAILABLE;
  out->device_count = 1;
  strncpy(out->message, "one fake device", sizeof out->message - 1);
  return GPUPLUG_STATUS_SUCCESS;
}

static gpuplug_status_t describe_one(uint32_t ordinal, gpuplug_device_info_t* out) {
  if (ordinal != 0) return GPUPLUG_STATUS_UNAVAILABLE;
  const uint32_t size = out->struct_size;
  memset(out, 0, GPUPLUG_DEVICE_INFO_V1_0_SIZE);
  out->struct_size = (uint32_t)GPUPLUG_DEVICE_INFO_V1_0_SIZE < size ? (uint32_t)GPUPLUG_DEVICE_INFO_V1_0_SIZE : size;
  strncpy(out->name, "hostile inspector", sizeof out->name - 1);
  return GPUPLUG_STATUS_SUCCESS;
}

static gpuplug_status_t inspect_hostile(uint32_t ordinal, const void* image, uint64_t size,
                                        gpuplug_module_inspection_t* out) {
  (void)ordinal;
  memset(out->format, 'F', sizeof out->format);
  memset(out->target, 'T', sizeof out->target);
  memset(out->targets, 'G', sizeof out->targets);
  memset(out->functions, 'K', sizeof out->functions);
  /* "n=99999999999" then no terminator: a value past 32 bits keeps the whole text as the name. */
  memset(out->symbols, 'S', sizeof out->symbols);
  memcpy(out->symbols, "n=99999999999\nm=7\n", 18);
  if (size >= 4 && memcmp(image, "fail", 4) == 0) {
    memset(out->reason, 'R', sizeof out->reason);
    return GPUPLUG_STATUS_INVALID_IMAGE;
  }
  memset(out->reason, 'R', sizeof out->reason);
  out->loadable = 7;
  return GPUPLUG_STATUS_SUCCESS;
}

GPUPLUG_PLUGIN_EXPORT const gpuplug_plugin_v1* gpuplug_plugin_entry(uint32_t host_abi_version) {
  (void)host_abi_version;
  gpuplug_plugin_v1* t = fake_named_table("hostile_inspect", probe_one);
  t->describe_device = describe_one;
  t->inspect_module = inspect_hostile;
  return t;
}
