/* SPDX-License-Identifier: Apache-2.0
 * count_layer: a third-party gpuplug layer in plain C (docs/layers.md, "Writing a layer"). It
 * counts the allocations, frees and launches of one backend and logs the counts when the backend
 * is destroyed; every other call goes straight to the plugin through the core's forwarders,
 * because this layer leaves those slots null. Built as a shared library that exports
 * gpuplug_layer_entry; an application adds it with PluginRegistry::add_layer_file and enables it
 * with the option layers=count. */
#include <gpuplug/layer.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct count_instance {
  gpuplug_layer_next_t next; /* first, as layer.h asks: the core's forwarders read it */
  gpuplug_layer_services_t services;
  atomic_uint_fast64_t allocs, frees, launches;
} count_instance;

static count_instance* self(gpuplug_instance_t inst) { return (count_instance*)inst; }

static gpuplug_status_t count_alloc(gpuplug_instance_t inst, uint64_t bytes, const char* site,
                                    uint64_t* out) {
  count_instance* c = self(inst);
  atomic_fetch_add_explicit(&c->allocs, 1, memory_order_relaxed);
  return c->next.table->alloc(c->next.instance, bytes, site, out);
}

static gpuplug_status_t count_free(gpuplug_instance_t inst, uint64_t ptr) {
  count_instance* c = self(inst);
  atomic_fetch_add_explicit(&c->frees, 1, memory_order_relaxed);
  return c->next.table->free(c->next.instance, ptr);
}

static gpuplug_status_t count_launch(gpuplug_instance_t inst, uint64_t function, gpuplug_dim3_t grid,
                                     gpuplug_dim3_t block, uint32_t shared_bytes, uint64_t stream,
                                     void** params) {
  count_instance* c = self(inst);
  /* A layer may refuse a call before the plugin sees it, with a message of its own. */
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) {
    c->services.set_error(c->services.user, "count: refused a launch with an empty grid");
    return GPUPLUG_STATUS_INVALID_ARGUMENT;
  }
  atomic_fetch_add_explicit(&c->launches, 1, memory_order_relaxed);
  return c->next.table->launch(c->next.instance, function, grid, block, shared_bytes, stream, params);
}

static void count_destroy(gpuplug_instance_t inst) {
  count_instance* c = self(inst);
  char line[160];
  snprintf(line, sizeof line, "count: %llu allocs, %llu frees, %llu launches",
           (unsigned long long)atomic_load(&c->allocs), (unsigned long long)atomic_load(&c->frees),
           (unsigned long long)atomic_load(&c->launches));
  c->services.log(c->services.user, GPUPLUG_LOG_INFO, line);
  free(c); /* the layer's own instance only: the core destroys the level below */
}

static gpuplug_status_t count_create(const gpuplug_layer_next_t* next, const char* plugin_name,
                                     uint32_t ordinal, const gpuplug_option_t* options,
                                     uint32_t option_count, const gpuplug_layer_services_t* services,
                                     gpuplug_instance_t* out, char* error, size_t error_size) {
  (void)plugin_name, (void)ordinal, (void)options, (void)option_count;
  count_instance* c = calloc(1, sizeof *c);
  if (c == NULL) {
    snprintf(error, error_size, "out of memory");
    return GPUPLUG_STATUS_OUT_OF_MEMORY;
  }
  c->next = *next;
  c->services = *services;
  *out = (gpuplug_instance_t)c;
  return GPUPLUG_STATUS_SUCCESS;
}

/* Only the slots the layer intercepts are set; null ones reach the plugin unchanged. */
static const gpuplug_plugin_v1 count_slots = {
    .struct_size = sizeof(gpuplug_plugin_v1),
    .abi_version = GPUPLUG_ABI_VERSION,
    .destroy = count_destroy,
    .alloc = count_alloc,
    .free = count_free,
    .launch = count_launch,
};

static const gpuplug_layer_v1 count_layer = {
    .struct_size = sizeof(gpuplug_layer_v1),
    .layer_version = GPUPLUG_LAYER_VERSION,
    .name = "count",
    .summary = "counts allocations, frees and launches (an example layer in C)",
    .option_keys = NULL,
    .create = count_create,
    .table = &count_slots,
};

GPUPLUG_PLUGIN_EXPORT const gpuplug_layer_v1* gpuplug_layer_entry(uint32_t layer_version) {
  return layer_version == GPUPLUG_LAYER_VERSION ? &count_layer : NULL;
}
