/* SPDX-License-Identifier: Apache-2.0
 * The gpuplug layer interface: a table that sits between the core and a plugin and sees every
 * call made on one backend. docs/layers.md has the long form and an example. */
#ifndef GPUPLUG_LAYER_H
#define GPUPLUG_LAYER_H

/*
 * A layer is a gpuplug_plugin_v1 table of its own (abi.h) plus a create function. The core
 * stacks the layers a backend enables (`layers=validate,trace` or GPUPLUG_LAYERS) between itself
 * and the plugin, in the order given: the first layer named sees each call first, the plugin
 * last.
 *
 * Rules:
 *  - Which slots count. Only the instance slots of `table` are used: everything from `destroy`
 *    to the end of the table the layer's struct_size covers. The identity, probe,
 *    describe_device, create and inspect_module slots are the plugin's, whatever the layer puts
 *    there.
 *  - A null slot is not intercepted: the core calls the level below for it. A layer sets only
 *    the slots it wants to see. `destroy` is required.
 *  - A slot the plugin lacks (an optional one, abi.h) stays absent with a layer too: the core
 *    uses abi.h's default for it, and the layer does not see those calls.
 *  - The instance. `create` gets the level below as a gpuplug_layer_next_t. The instance it
 *    returns must begin with a copy of that struct: the core's forwarders for the slots the
 *    layer leaves null read it from there. A slot the layer sets calls
 *    `self->next.table-><slot>(self->next.instance, ...)` to pass the call on, or returns a
 *    failure without calling it.
 *  - Errors. A layer that fails a call itself calls `services->set_error` with its message
 *    before it returns the failure (on the same thread); the core reports that message instead
 *    of the plugin's last_error. A layer that sets an error returns a failure. `last_error` is
 *    best left null.
 *  - Destroy. `destroy` releases the layer's own instance and nothing else: the core then
 *    destroys the level below. Levels are destroyed from the first layer down to the plugin,
 *    after the backend's OpCache is released through all of them.
 *  - Options. The core gives each layer the backend's options whose keys the layer lists in
 *    `option_keys` (and "layers"), and removes those keys before the plugin sees the options.
 *    A key that is absent from the options is read from the environment variable GPUPLUG_<KEY>
 *    (upper case), except in a setuid or setgid process.
 *  - Threads. Every slot may be called from many threads at once, as for a plugin.
 */

#include <gpuplug/abi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUPLUG_LAYER_VERSION 1 /* the version of gpuplug_layer_v1 itself */

/* What the core offers a layer. */
typedef struct gpuplug_layer_services_t {
  uint32_t struct_size;
  void* user;                                                          /* pass back as `user` */
  void (*log)(void* user, gpuplug_log_level_t level, const char* message); /* the backend's log channel */
  void (*set_error)(void* user, const char* message); /* the message of the failure this thread returns next */
} gpuplug_layer_services_t;

/* The level below a layer: the next layer's or the plugin's table and instance. */
typedef struct gpuplug_layer_next_t {
  const gpuplug_plugin_v1* table; /* every instance slot the plugin has is set; valid until destroy */
  gpuplug_instance_t instance;
} gpuplug_layer_next_t;

typedef struct gpuplug_layer_v1 {
  uint32_t struct_size;   /* sizeof(gpuplug_layer_v1) as the layer was built */
  uint32_t layer_version; /* GPUPLUG_LAYER_VERSION */
  const char* name;       /* the name `layers=` uses: [a-z0-9_]+, at most 64 bytes */
  const char* summary;    /* one line for `gpuplug list --layers` and errors */
  const char* const* option_keys; /* null-terminated list of the option keys the layer reads; may be null */
  /* Makes one layer instance above `next` for device `ordinal` of plugin `plugin_name`. On
   * failure returns a status and writes why to `error` (NUL-terminated); the core then destroys
   * the levels below. `options` holds the layer's own keys only; `services` stays valid until
   * the layer's destroy returns. */
  gpuplug_status_t (*create)(const gpuplug_layer_next_t* next, const char* plugin_name, uint32_t ordinal,
                             const gpuplug_option_t* options, uint32_t option_count,
                             const gpuplug_layer_services_t* services, gpuplug_instance_t* out,
                             char* error, size_t error_size);
  /* The slots the layer intercepts (see the rules above). */
  const gpuplug_plugin_v1* table;
} gpuplug_layer_v1;

/* What a shared library that holds a layer exports (PluginRegistry::add_layer_file): its layer,
 * or null when it does not speak `layer_version`. */
#define GPUPLUG_LAYER_ENTRY_SYMBOL "gpuplug_layer_entry"
typedef const gpuplug_layer_v1* (*gpuplug_layer_entry_fn)(uint32_t layer_version);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUPLUG_LAYER_H */
