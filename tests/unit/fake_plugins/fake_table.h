/* SPDX-License-Identifier: Apache-2.0
 * A complete, do-nothing v1 table for the fake plugins the loader tests build. */
#ifndef GPUPLUG_FAKE_TABLE_H
#define GPUPLUG_FAKE_TABLE_H

#include <gpuplug/abi.h>
#include <string.h>

/* Every instance slot refuses: the fakes exist to be listed and refused, never used. */
static gpuplug_status_t fake_describe(uint32_t ordinal, gpuplug_device_info_t* out) {
  (void)ordinal;
  (void)out;
  return GPUPLUG_STATUS_UNAVAILABLE;
}
static gpuplug_status_t fake_create(uint32_t ordinal, const gpuplug_option_t* options,
                                    uint32_t count, const gpuplug_host_services_t* services,
                                    gpuplug_instance_t* out, char* error, size_t error_size) {
  (void)ordinal, (void)options, (void)count, (void)services;
  *out = NULL;
  if (error_size > 0) {
    strncpy(error, "fake plugin: no device", error_size - 1);
    error[error_size - 1] = '\0';
  }
  return GPUPLUG_STATUS_UNAVAILABLE;
}
static void fake_destroy(gpuplug_instance_t inst) { (void)inst; }
static size_t fake_last_error(gpuplug_instance_t inst, char* buf, size_t size) {
  (void)inst;
  if (size > 0) buf[0] = '\0';
  return 0;
}
/* The instance slots: every one refuses with UNSUPPORTED. */
#define FAKE_REFUSED GPUPLUG_STATUS_UNSUPPORTED
static gpuplug_status_t fake_alloc(gpuplug_instance_t i, uint64_t b, const char* s, uint64_t* o) {
  return FAKE_REFUSED;
}
static gpuplug_status_t fake_free(gpuplug_instance_t i, uint64_t p) { return FAKE_REFUSED; }
static gpuplug_status_t fake_memory_info(gpuplug_instance_t i, uint64_t* f, uint64_t* t) {
  return FAKE_REFUSED;
}
static gpuplug_status_t fake_device_info(gpuplug_instance_t i, gpuplug_device_info_t* o) {
  return FAKE_REFUSED;
}
static gpuplug_status_t fake_copy_h2d(gpuplug_instance_t i, uint64_t d, const void* s, uint64_t b) {
  return FAKE_REFUSED;
}
static gpuplug_status_t fake_copy_d2h(gpuplug_instance_t i, void* d, uint64_t s, uint64_t b) {
  return FAKE_REFUSED;
}
static gpuplug_status_t fake_copy_d2d(gpuplug_instance_t i, uint64_t d, uint64_t s, uint64_t b) {
  return FAKE_REFUSED;
}
static gpuplug_status_t fake_memset(gpuplug_instance_t i, uint64_t d, uint8_t v, uint64_t b,
                                    uint64_t s) {
  return FAKE_REFUSED;
}
static gpuplug_status_t fake_stream_create(gpuplug_instance_t i, uint64_t* o) {
  return FAKE_REFUSED;
}
static gpuplug_status_t fake_stream_op(gpuplug_instance_t i, uint64_t s) { return FAKE_REFUSED; }
static gpuplug_status_t fake_synchronize(gpuplug_instance_t i) { return FAKE_REFUSED; }
static gpuplug_status_t fake_load_module(gpuplug_instance_t i, const char* n, const void* im,
                                         uint64_t s) {
  return FAKE_REFUSED;
}
static gpuplug_status_t fake_has_module(gpuplug_instance_t i, const char* n, int32_t* o) {
  return FAKE_REFUSED;
}
static gpuplug_status_t fake_get_function(gpuplug_instance_t i, const char* m, const char* f,
                                          uint64_t* o) {
  return FAKE_REFUSED;
}
static gpuplug_status_t fake_get_global(gpuplug_instance_t i, const char* m, const char* s,
                                        uint64_t* a, uint64_t* z) {
  return FAKE_REFUSED;
}
static gpuplug_status_t fake_launch(gpuplug_instance_t i, uint64_t f, gpuplug_dim3_t g,
                                    gpuplug_dim3_t b, uint32_t sh, uint64_t s, void** p) {
  return FAKE_REFUSED;
}
static gpuplug_status_t fake_ledger_stats(gpuplug_instance_t i, gpuplug_ledger_stats_t* o) {
  return FAKE_REFUSED;
}
static gpuplug_status_t fake_sweep(gpuplug_instance_t i, gpuplug_ledger_stats_t* o) {
  return FAKE_REFUSED;
}

/* Fills every required slot; the caller sets identity and probe. Optional slots stay null. */
static void fake_fill_table(gpuplug_plugin_v1* t) {
  memset(t, 0, sizeof *t);
  t->struct_size = sizeof *t;
  t->abi_version = GPUPLUG_ABI_VERSION;
  t->vendor = "gpuplug tests";
  t->version = "0.0.0-fake";
  t->describe_device = fake_describe;
  t->create = fake_create;
  t->destroy = fake_destroy;
  t->last_error = fake_last_error;
  t->alloc = fake_alloc;
  t->free = fake_free;
  t->memory_info = fake_memory_info;
  t->device_info = fake_device_info;
  t->copy_h2d = fake_copy_h2d;
  t->copy_d2h = fake_copy_d2h;
  t->copy_d2d = fake_copy_d2d;
  t->memset_d8 = fake_memset;
  t->stream_create = fake_stream_create;
  t->stream_destroy = fake_stream_op;
  t->stream_synchronize = fake_stream_op;
  t->synchronize = fake_synchronize;
  t->load_module = fake_load_module;
  t->has_module = fake_has_module;
  t->get_function = fake_get_function;
  t->get_global = fake_get_global;
  t->launch = fake_launch;
  t->ledger_stats = fake_ledger_stats;
  t->sweep_unreleased = fake_sweep;
}

static gpuplug_status_t fake_probe_no_device(gpuplug_probe_result_t* out) {
  out->reason = GPUPLUG_PROBE_NO_DEVICE;
  out->device_count = 0;
  strncpy(out->message, "no device (fake)", sizeof out->message - 1);
  return GPUPLUG_STATUS_SUCCESS;
}

/* The table a fake plugin's entry point returns: every required slot filled, with `name` and
 * `probe`; the caller adjusts what its failure needs before returning it. One per plugin. */
static inline gpuplug_plugin_v1* fake_named_table(
    const char* name, gpuplug_status_t (*probe)(gpuplug_probe_result_t*)) {
  static gpuplug_plugin_v1 table;
  fake_fill_table(&table);
  table.name = name;
  table.probe = probe;
  return &table;
}

#endif /* GPUPLUG_FAKE_TABLE_H */
