/* SPDX-License-Identifier: Apache-2.0
 * The gpuplug plugin ABI: the one C header a vendor plugin must include. */
#ifndef GPUPLUG_ABI_H
#define GPUPLUG_ABI_H

/*
 * Rules of this boundary (see docs/plugin-authors.md for the long form):
 *  - Only C types cross it: no exceptions, no C++ objects, no ownership of
 *    memory allocated on the other side (strings are copied into caller buffers).
 *  - Every operation returns a gpuplug_status_t. After a failure the plugin keeps
 *    a message for the calling thread, read with `last_error`.
 *  - Versions are negotiated, Vulkan-style: the host passes the highest ABI
 *    version it speaks to gpuplug_plugin_entry; the plugin answers with a table
 *    whose abi_version is the highest version both share. The host refuses a
 *    null table, a struct_size below GPUPLUG_PLUGIN_V1_MIN_SIZE, and a major
 *    version other than its own. Later minor versions only append slots, and the
 *    host never reads past struct_size.
 *  - Slots marked (optional) may be null; the core checks them in one place and
 *    uses the stated default.
 *  - Slots appended after the first release are all optional: load_module_file,
 *    the events and inspect_module of ABI 1.1, then the memory snapshot,
 *    interop handle and peer copy slots of ABI 1.2. A plugin built before them
 *    publishes a struct_size that ends before them (GPUPLUG_PLUGIN_V1_0_SIZE,
 *    GPUPLUG_PLUGIN_V1_1_SIZE); the host reads them as null and uses their
 *    defaults, and never reads a table past the slots of the minor it declares. Fields appended to gpuplug_device_info_t
 *    follow the same rule through its struct_size. The numbered compatibility
 *    rules (ABI-1 ...) are in docs/architecture.md.
 *  - Device pointers, functions and streams are opaque 64-bit values; 0 is null
 *    (stream 0 is the backend's default stream, ordered with every blocking stream
 *    the way CUDA's legacy default stream is; see GPUPLUG_STREAM_NON_BLOCKING).
 *  - Thread-safety: every slot may be called concurrently from many threads on
 *    the same instance, except `destroy`, which must be the last call on it.
 */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI versions (abi_version): major in the high 16 bits, minor in the low 16. The field
 * accessors are GPUPLUG_ABI_MAJOR(v)/GPUPLUG_ABI_MINOR(v); GPUPLUG_VERSION_MAJOR/MINOR/PATCH
 * are the library's version, numbers usable in #if (gpuplug/version.hpp), not these. */
#define GPUPLUG_MAKE_VERSION(major, minor) ((((uint32_t)(major)) << 16) | ((uint32_t)(minor) & 0xFFFFu))
#define GPUPLUG_ABI_MAJOR(v) (((uint32_t)(v)) >> 16)
#define GPUPLUG_ABI_MINOR(v) (((uint32_t)(v)) & 0xFFFFu)

#define GPUPLUG_ABI_VERSION_MAJOR 1
/* ABI 1.3 is released (CHANGELOG.md): like every released minor it never changes, and
 * tests/abi/v1_3/gpuplug/abi.h is its frozen copy. A later minor only appends. */
#define GPUPLUG_ABI_VERSION_MINOR 3
/* Deprecated (removed at the next major): 1 while ABI 1.3 was provisional, 0 since its release. */
#define GPUPLUG_ABI_1_3_PROVISIONAL 0
#define GPUPLUG_ABI_VERSION GPUPLUG_MAKE_VERSION(GPUPLUG_ABI_VERSION_MAJOR, GPUPLUG_ABI_VERSION_MINOR)

/* The one exported symbol, resolved with boost::dll::shared_library::get. */
#define GPUPLUG_PLUGIN_ENTRY_SYMBOL "gpuplug_plugin_entry"

#if defined(_WIN32)
#define GPUPLUG_PLUGIN_EXPORT __declspec(dllexport)
#else
#define GPUPLUG_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* ---- status codes ------------------------------------------------------- */
typedef int32_t gpuplug_status_t;
#define GPUPLUG_STATUS_SUCCESS 0
#define GPUPLUG_STATUS_INVALID_ARGUMENT 1 /* bad pointer, size, option, unknown/double free */
#define GPUPLUG_STATUS_OUT_OF_MEMORY 2    /* device (or managed) memory exhausted, or past device_memory_limit */
#define GPUPLUG_STATUS_NOT_FOUND 3        /* unknown module, function or symbol */
#define GPUPLUG_STATUS_UNSUPPORTED 4      /* operation not offered by this device or plugin */
#define GPUPLUG_STATUS_UNAVAILABLE 5      /* driver missing, too old, or no such device */
#define GPUPLUG_STATUS_INVALID_IMAGE 6    /* a module image the backend cannot load */
#define GPUPLUG_STATUS_LAUNCH_FAILED 7    /* the launch was rejected or the kernel faulted */
#define GPUPLUG_STATUS_DEVICE_ERROR 8     /* any other vendor runtime error */
#define GPUPLUG_STATUS_INTERNAL 9         /* a bug or an exception caught at the edge */
/* ABI 1.3: a stream capture was invalidated (an operation a capture cannot record: a synchronize
 * of the capturing stream or of the device, work on stream 0 while a blocking stream captures,
 * an unsafe call of the capture's mode); the capture stays poisoned until stream_abort_capture. CUDA's status 901. */
#define GPUPLUG_STATUS_CAPTURE_INVALIDATED 10

/* ---- probe -------------------------------------------------------------- */
/* Why a backend is (un)available here. Loader-side failures (not a shared
 * object, missing entry, ABI mismatch, ...) are the core's, not the plugin's. */
typedef int32_t gpuplug_probe_reason_t;
#define GPUPLUG_PROBE_AVAILABLE 0
#define GPUPLUG_PROBE_DRIVER_MISSING 1 /* e.g. "driver missing: libcuda.so.1 not found" */
#define GPUPLUG_PROBE_DRIVER_TOO_OLD 2 /* message names both versions */
#define GPUPLUG_PROBE_NO_DEVICE 3      /* e.g. "no device (hipErrorNoDevice)" */
#define GPUPLUG_PROBE_ERROR 4          /* any other failure while probing */

typedef struct gpuplug_probe_result_t {
  uint32_t struct_size;          /* set by the caller to sizeof(gpuplug_probe_result_t) */
  gpuplug_probe_reason_t reason; /* GPUPLUG_PROBE_AVAILABLE when device_count > 0 */
  uint32_t device_count;
  char message[512];             /* NUL-terminated; why unavailable, or a short summary */
} gpuplug_probe_result_t;

/* What kind of device a plugin drives (ABI 1.1): what `auto` ranks first. A plugin that predates
 * the field reports UNKNOWN, which the core ranks as an accelerator, never above a declared GPU. */
typedef int32_t gpuplug_device_class_t;
#define GPUPLUG_DEVICE_CLASS_UNKNOWN 0
#define GPUPLUG_DEVICE_CLASS_DISCRETE_GPU 1
#define GPUPLUG_DEVICE_CLASS_INTEGRATED_GPU 2
#define GPUPLUG_DEVICE_CLASS_ACCELERATOR 3
#define GPUPLUG_DEVICE_CLASS_CPU 4
#define GPUPLUG_DEVICE_CLASS_EMULATOR 5

typedef struct gpuplug_device_info_t {
  uint32_t struct_size;     /* set by the caller */
  uint32_t ordinal;
  char name[256];           /* "NVIDIA H200", "AMD Instinct MI250X", "host CPU (16 threads)" */
  char uuid[64];            /* canonical text form, "" when the device has none */
  char arch[64];            /* "sm_90", "gfx90a:sramecc+:xnack-", "x86_64" */
  uint64_t total_memory;    /* bytes */
  uint64_t free_memory;     /* bytes, at the time of the query */
  uint32_t compute_units;   /* SMs, CUs or worker threads */
  uint32_t managed_memory;  /* 1 when alloc_managed is supported on this device */
  /* Appended after the first release (struct_size 416 before it, 424 with it): the host reads
   * it only when the struct_size the plugin wrote back covers it, so an older plugin reads as 0.
   * 1 when the host may touch managed memory while kernels run on the device (CUDA/HIP
   * "concurrent managed access"); 0: synchronize before touching managed memory from the host
   * (see docs/architecture.md). */
  uint32_t concurrent_managed_access;

  /* ---- ABI 1.1 (struct_size GPUPLUG_DEVICE_INFO_V1_1_SIZE): identity and capabilities. Read only
   * when the struct_size the plugin wrote back covers them; an older plugin reads as "unknown". */
  uint32_t has_pci;         /* 1 when the pci_* fields below are meaningful */
  uint32_t pci_domain;      /* domain:bus:device.function, as "0000:c1:00.0" */
  uint32_t pci_bus;
  uint32_t pci_device;
  uint32_t pci_function;
  uint32_t pci_vendor_id;   /* 0x10de NVIDIA, 0x1002 AMD; 0 when none */
  uint32_t pci_device_id;   /* 0 when none */
  uint32_t warp_size;       /* threads per warp / wavefront; the host backend: 1 */
  uint64_t max_shared_memory_per_block; /* bytes a launch may ask as shared_bytes */
  char driver_version[64];  /* "13.0" (cuDriverGetVersion), "6.2.41133" (hipDriverGetVersion), kernel release on host */
  char runtime_version[64]; /* the runtime the plugin uses ("" when it calls the driver only) */
  gpuplug_device_class_t device_class; /* GPUPLUG_DEVICE_CLASS_*; 0 (unknown) from older plugins */
  uint32_t reserved0;       /* zero */
  uint64_t peak_gflops;     /* peak single-precision throughput when the plugin knows it, else 0 */
} gpuplug_device_info_t;

/* The size of gpuplug_device_info_t in ABI 1.0 (before concurrent_managed_access). A plugin accepts
 * any struct_size from this up, writes only the fields that fit and sets struct_size to the size
 * it wrote; a host reads only the fields that the written struct_size covers. */
#define GPUPLUG_DEVICE_INFO_V1_0_SIZE (offsetof(gpuplug_device_info_t, concurrent_managed_access))
/* Every field of ABI 1.0, concurrent_managed_access included (the 1.0 header's sizeof). */
#define GPUPLUG_DEVICE_INFO_V1_0_FULL_SIZE (offsetof(gpuplug_device_info_t, has_pci))
/* The size of gpuplug_device_info_t in ABI 1.1. */
#define GPUPLUG_DEVICE_INFO_V1_1_SIZE (offsetof(gpuplug_device_info_t, peak_gflops) + sizeof(uint64_t))

/* ---- host services ------------------------------------------------------ */
typedef int32_t gpuplug_log_level_t;
#define GPUPLUG_LOG_TRACE 0
#define GPUPLUG_LOG_DEBUG 1
#define GPUPLUG_LOG_INFO 2
#define GPUPLUG_LOG_WARNING 3
#define GPUPLUG_LOG_ERROR 4

/* Handed to create(); valid until destroy() returns. The core routes log into
 * Boost.Log with the backend's name, so plugins need no logging library. */
typedef struct gpuplug_host_services_t {
  uint32_t struct_size;
  void* user;
  void (*log)(void* user, gpuplug_log_level_t level, const char* message); /* thread-safe */
} gpuplug_host_services_t;

/* One key=value option for create(); both strings NUL-terminated. Every plugin
 * honours "device_memory_limit" (bytes, K/M/G suffixes) and "modules_dir"; from ABI 1.2 also
 * "memory_history" (how many alloc/free events the ledger keeps for snapshots; 0 = none). */
typedef struct gpuplug_option_t {
  const char* key;
  const char* value;
} gpuplug_option_t;

/* ---- device work -------------------------------------------------------- */
typedef struct gpuplug_dim3_t {
  uint32_t x, y, z;
} gpuplug_dim3_t;

typedef int32_t gpuplug_alloc_kind_t;
#define GPUPLUG_ALLOC_DEVICE 0
#define GPUPLUG_ALLOC_MANAGED 1
/* ABI 1.2 (interop handles): memory made by someone else and wrapped by import_memory. On the
 * ledger (counted in live_bytes/live_count, range-checked) but never freed by the plugin, and
 * never counted against device_memory_limit. */
#define GPUPLUG_ALLOC_EXTERNAL 2
/* ABI 1.3 (mapped host memory): page-locked host memory mapped into the device's address space,
 * made by alloc_host_mapped. On the ledger at its device address (counted in live_count and in
 * live_pinned_bytes, range-checked, swept), never in live_bytes nor against
 * device_memory_limit. */
#define GPUPLUG_ALLOC_PINNED 3
/* ABI 1.3 (arenas): long-lived device memory made by alloc_arena. On the ledger (counted in
 * live_count and arena_bytes, range-checked, against device_memory_limit), never in live_bytes
 * nor the peaks; freed by free_arena only. */
#define GPUPLUG_ALLOC_ARENA 4

/* Allocation ledger counters for one instance. */
typedef struct gpuplug_ledger_stats_t {
  uint32_t struct_size;
  uint32_t reserved;
  uint64_t live_bytes;         /* device + managed */
  uint64_t live_count;
  uint64_t peak_bytes;
  uint64_t live_managed_bytes;
  uint64_t total_allocs;       /* successful allocations since create */
  uint64_t total_frees;
  /* ---- ABI 1.3 (struct_size GPUPLUG_LEDGER_STATS_V1_3_SIZE): appended. A plugin writes only the
   * fields the caller's struct_size covers and sets struct_size to what it wrote; the host reads
   * these fields only when that covers them (an older plugin leaves it as the host zeroed it). */
  uint64_t live_pinned_bytes;  /* mapped host memory (GPUPLUG_ALLOC_PINNED), not in live_bytes */
  uint64_t arena_bytes;        /* arenas (GPUPLUG_ALLOC_ARENA), not in live_bytes */
} gpuplug_ledger_stats_t;

/* The size of gpuplug_ledger_stats_t before ABI 1.3 (up to total_frees): the least a plugin
 * accepts. */
#define GPUPLUG_LEDGER_STATS_V1_0_SIZE (offsetof(gpuplug_ledger_stats_t, live_pinned_bytes))
/* The size of gpuplug_ledger_stats_t in ABI 1.3. */
#define GPUPLUG_LEDGER_STATS_V1_3_SIZE \
  (offsetof(gpuplug_ledger_stats_t, arena_bytes) + sizeof(uint64_t))

/* What inspect_module (ABI 1.1) found in a module image for one device: which of the targets the
 * image carries would load there, and the kernels it defines. Every string NUL-terminated,
 * truncated to fit; a list that does not fit ends with "...". */
typedef struct gpuplug_module_inspection_t {
  uint32_t struct_size;  /* set by the caller to sizeof(gpuplug_module_inspection_t) */
  int32_t loadable;      /* 1 when one of the targets loads on the device */
  char format[64];       /* "fatbin", "cubin", "ptx", "offload bundle", "code object", "ELF shared object" */
  char target[128];      /* the target that loads: "sm_90 (SASS)", "compute_90 (PTX, JIT)", "gfx942", "x86_64" */
  char targets[1024];    /* every target in the image, space-separated */
  char reason[512];      /* loadable == 0: why none loads ("no sm_90 SASS and no PTX at or below compute_90") */
  char functions[4096];  /* the kernels, '\n'-separated */
  char symbols[2048];    /* the other published globals, '\n'-separated, each "name" or, for a 4-byte
                          * global whose initial value the image holds, "name=value" (unsigned
                          * decimal, e.g. "gemm_f32_n_tile=64") */
} gpuplug_module_inspection_t;

/* What native_handles (ABI 1.2, interop handles) returns: the handles a vendor library needs to
 * work beside the plugin. The pointers are the vendor's own types, cast to void*. */
typedef struct gpuplug_native_handles_t {
  uint32_t struct_size; /* set by the caller to sizeof(gpuplug_native_handles_t) */
  int32_t device;       /* the ordinal the vendor runtime uses (CUdevice, hipDevice_t); host: 0 */
  void* context;        /* CUcontext (the primary context the instance uses); null elsewhere */
  void* stream;         /* CUstream / hipStream_t of the stream asked for (null: the runtime's
                         * default stream); host: the executor's queue id */
  char vendor[32];      /* "cuda", "hip", "host": the runtime's family, NUL-terminated */
} gpuplug_native_handles_t;

typedef struct gpuplug_instance_s* gpuplug_instance_t; /* one backend: a device with its own state */

/* The v1 plugin table. Slots are grouped by object; new slots go at the end. */
typedef struct gpuplug_plugin_v1 {
  uint32_t struct_size; /* sizeof the table the plugin built */
  uint32_t abi_version; /* negotiated: GPUPLUG_MAKE_VERSION(major, minor) */

  /* identity: static strings owned by the plugin, valid while it is loaded */
  const char* name;     /* selector name: "cuda", "hip", "host"; [a-z0-9_]+ */
  const char* vendor;   /* "NVIDIA", "AMD", "gpuplug" */
  const char* version;  /* the plugin's own version string */

  /* plugin-level: no instance needed */
  gpuplug_status_t (*probe)(gpuplug_probe_result_t* out); /* never fails for "no driver": reports it */
  gpuplug_status_t (*describe_device)(uint32_t ordinal, gpuplug_device_info_t* out); /* for listing */
  gpuplug_status_t (*create)(uint32_t ordinal, const gpuplug_option_t* options, uint32_t option_count,
                             const gpuplug_host_services_t* services, gpuplug_instance_t* out,
                             char* error, size_t error_size); /* on failure writes why to error */
  void (*destroy)(gpuplug_instance_t inst); /* unloads modules, sweeps the ledger (warns); never fails */
  size_t (*last_error)(gpuplug_instance_t inst, char* buf, size_t size); /* this thread's last failure; returns its length */

  /* memory, every allocation through the instance's ledger; site is a call-site tag (may be null) */
  gpuplug_status_t (*alloc)(gpuplug_instance_t inst, uint64_t bytes, const char* site, uint64_t* out);
  gpuplug_status_t (*alloc_managed)(gpuplug_instance_t inst, uint64_t bytes, const char* site,
                                    uint64_t* out); /* (optional) defaults to UNSUPPORTED */
  gpuplug_status_t (*free)(gpuplug_instance_t inst, uint64_t ptr); /* 0 is a no-op; unknown = INVALID_ARGUMENT */
  gpuplug_status_t (*memory_info)(gpuplug_instance_t inst, uint64_t* free_bytes, uint64_t* total_bytes);
  gpuplug_status_t (*device_info)(gpuplug_instance_t inst, gpuplug_device_info_t* out);

  /* copies: synchronous ones return when the data is in place */
  gpuplug_status_t (*copy_h2d)(gpuplug_instance_t inst, uint64_t dst, const void* src, uint64_t bytes);
  gpuplug_status_t (*copy_d2h)(gpuplug_instance_t inst, void* dst, uint64_t src, uint64_t bytes);
  gpuplug_status_t (*copy_d2d)(gpuplug_instance_t inst, uint64_t dst, uint64_t src, uint64_t bytes);
  gpuplug_status_t (*copy_h2d_async)(gpuplug_instance_t inst, uint64_t dst, const void* src, uint64_t bytes,
                                     uint64_t stream); /* (optional) defaults to sync stream + copy_h2d */
  gpuplug_status_t (*copy_d2h_async)(gpuplug_instance_t inst, void* dst, uint64_t src, uint64_t bytes,
                                     uint64_t stream); /* (optional) defaults to sync stream + copy_d2h */
  gpuplug_status_t (*copy_d2d_async)(gpuplug_instance_t inst, uint64_t dst, uint64_t src, uint64_t bytes,
                                     uint64_t stream); /* (optional) defaults to sync stream + copy_d2d */
  gpuplug_status_t (*memset_d8)(gpuplug_instance_t inst, uint64_t dst, uint8_t value, uint64_t bytes,
                                uint64_t stream); /* ordered on stream (0 = default); async */

  /* streams and synchronisation */
  gpuplug_status_t (*stream_create)(gpuplug_instance_t inst, uint64_t* out);
  gpuplug_status_t (*stream_destroy)(gpuplug_instance_t inst, uint64_t stream); /* waits for its work */
  gpuplug_status_t (*stream_synchronize)(gpuplug_instance_t inst, uint64_t stream);
  gpuplug_status_t (*synchronize)(gpuplug_instance_t inst); /* waits for every stream */

  /* modules: registered by name in the instance's ModuleRegistry */
  gpuplug_status_t (*load_module)(gpuplug_instance_t inst, const char* name, const void* image,
                                  uint64_t size); /* a name already loaded = INVALID_ARGUMENT */
  gpuplug_status_t (*unload_module)(gpuplug_instance_t inst, const char* name); /* (optional) defaults to UNSUPPORTED */
  gpuplug_status_t (*has_module)(gpuplug_instance_t inst, const char* name, int32_t* out); /* looks in modules_dir too */
  gpuplug_status_t (*get_function)(gpuplug_instance_t inst, const char* module, const char* func,
                                   uint64_t* out); /* NOT_FOUND names the module's functions */
  gpuplug_status_t (*get_global)(gpuplug_instance_t inst, const char* module, const char* symbol,
                                 uint64_t* address, uint64_t* size); /* device address and byte size */

  /* params: one pointer per kernel argument, as cuLaunchKernel takes them. params and the values
   * it points to are valid only during the call: the caller may overwrite them as soon as launch
   * returns, so a plugin that runs the launch later (queued behind its stream, on another thread)
   * copies the values before returning. The sample kernels publish their argument sizes for that
   * as `<func>_args` (<gpuplug/kernel_args.h>, docs/kernels.md). A stream that was never created
   * or was destroyed is INVALID_ARGUMENT, as for the copies and memset_d8. */
  gpuplug_status_t (*launch)(gpuplug_instance_t inst, uint64_t function, gpuplug_dim3_t grid,
                             gpuplug_dim3_t block, uint32_t shared_bytes, uint64_t stream, void** params);

  /* the allocation ledger */
  gpuplug_status_t (*ledger_stats)(gpuplug_instance_t inst, gpuplug_ledger_stats_t* out);
  size_t (*ledger_report)(gpuplug_instance_t inst, uint32_t top_n, char* buf,
                          size_t size); /* (optional) live allocations by call site; returns full length */
  gpuplug_status_t (*sweep_unreleased)(gpuplug_instance_t inst,
                                       gpuplug_ledger_stats_t* swept); /* frees every live allocation, logs a warning */

  /* ---- ABI 1.1: optional, read only from a table that declares 1.1 or later and whose
   * struct_size covers them. */

  /* Loads the module file at `path` (NUL-terminated; the core passes an absolute, normalized
   * path) under `name`, as load_module does (a name already loaded = INVALID_ARGUMENT). A plugin
   * that loads modules by path keeps what the path gives them: a host module's $ORIGIN, so RUNPATH
   * $ORIGIN finds a library next to it; a dependency not found is NOT_FOUND naming it.
   * (optional) defaults to the core reading the file + load_module (the module has no $ORIGIN). */
  gpuplug_status_t (*load_module_file)(gpuplug_instance_t inst, const char* name, const char* path);

  /* ABI 1.1 events. All optional: a null slot is UNSUPPORTED ("events are not supported by
   * the <name> plugin"), which is what a host sees of a 1.0 plugin. An event is an opaque 64-bit
   * value of one instance, never 0. A foreign, destroyed or never-created event is
   * INVALID_ARGUMENT naming the event and the operation; stream arguments as for the other slots
   * (0 is the default stream). */
  gpuplug_status_t (*event_create)(gpuplug_instance_t inst, uint64_t* out);
  /* Destroys an event; work it was recorded after may still be queued (it completes normally). */
  gpuplug_status_t (*event_destroy)(gpuplug_instance_t inst, uint64_t event);
  /* Captures the work queued on `stream` so far; recording again replaces the capture. */
  gpuplug_status_t (*event_record)(gpuplug_instance_t inst, uint64_t event, uint64_t stream);
  /* Work queued on `stream` after this call waits until `event`'s capture completes; the host
   * does not wait. An event never recorded is already complete (as in CUDA). */
  gpuplug_status_t (*stream_wait_event)(gpuplug_instance_t inst, uint64_t stream, uint64_t event);
  /* Blocks the host until the event's capture completes; a failure pending on it is reported. */
  gpuplug_status_t (*event_synchronize)(gpuplug_instance_t inst, uint64_t event);
  /* *ready = 1 when the capture has completed, 0 when not; never blocks. */
  gpuplug_status_t (*event_query)(gpuplug_instance_t inst, uint64_t event, int32_t* ready);
  /* Milliseconds between two completed events of this instance; INVALID_ARGUMENT naming the
   * event when one was never recorded, UNAVAILABLE ("not ready") when one has not completed. */
  gpuplug_status_t (*event_elapsed_ms)(gpuplug_instance_t inst, uint64_t start, uint64_t end, float* ms);

  /* ---- ABI 1.1: kernel-binary preflight (plugin-level, no instance). Says which of `image`'s
   * targets would load on device `ordinal` and what it defines, without loading it. An image the
   * plugin cannot parse is INVALID_IMAGE with the reason in out->reason. (optional) defaults to
   * UNSUPPORTED. */
  gpuplug_status_t (*inspect_module)(uint32_t ordinal, const void* image, uint64_t size,
                                     gpuplug_module_inspection_t* out);

  /* ---- ABI 1.2: memory snapshots (docs/memory.md). All optional. */
  /* The ledger as JSON text (schema 1 of share/gpuplug/memory.schema.json, its ledger part: owner,
   * totals, sites with their peaks, live allocations, the memory_history ring), NUL-terminated and
   * truncated to fit; returns the full length (0 on failure). The core caps the length and parses
   * the text as untrusted. (optional) defaults to a snapshot from ledger_stats, marked partial. */
  size_t (*ledger_snapshot)(gpuplug_instance_t inst, char* buf, size_t size);
  /* Sets the ledger's peak, and each call site's, to what is live now. (optional) defaults to
   * UNSUPPORTED. */
  gpuplug_status_t (*ledger_reset_peak)(gpuplug_instance_t inst);
  /* Opens a scope: the ledger tracks how high live bytes rise above their value now, every
   * thread's allocations included, until the scope ends. *scope is never 0. (optional) defaults
   * to UNSUPPORTED. */
  gpuplug_status_t (*ledger_scope_begin)(gpuplug_instance_t inst, uint64_t* scope);
  /* Ends a scope: *peak_bytes is the highest live bytes rose above the start, *net_bytes live bytes
   * now minus at the start. A scope not open is INVALID_ARGUMENT. (optional) defaults to
   * UNSUPPORTED. */
  gpuplug_status_t (*ledger_scope_end)(gpuplug_instance_t inst, uint64_t scope, uint64_t* peak_bytes,
                                       int64_t* net_bytes);

  /* ---- ABI 1.2: interop handles. All optional: a null slot is UNSUPPORTED. The
   * lifetimes of what they hand out are in docs/interop.md. */
  /* The native handles of `stream` (0: the default stream; a stream not live is
   * INVALID_ARGUMENT). out->struct_size is set by the caller; the plugin writes what fits. */
  gpuplug_status_t (*native_handles)(gpuplug_instance_t inst, uint64_t stream,
                                     gpuplug_native_handles_t* out);
  /* The address a vendor library takes for device pointer `ptr` (which may point inside an
   * allocation, an imported range or a module global). A pointer the instance does not know is
   * INVALID_ARGUMENT naming it. */
  gpuplug_status_t (*native_pointer)(gpuplug_instance_t inst, uint64_t ptr, void** out);
  /* Wraps `bytes` of memory at `native` that someone else allocated on this device: on the ledger
   * as GPUPLUG_ALLOC_EXTERNAL under `site` (may be null), range-checked like any allocation,
   * never freed. `free` of *out forgets it (the memory stays the owner's); so does the sweep of
   * destroy and sweep_unreleased. Memory of another device (or, on a GPU, host memory the driver
   * does not map to this device) is INVALID_ARGUMENT naming the pointer and both devices; a range
   * that overlaps a live allocation of the instance is INVALID_ARGUMENT. */
  gpuplug_status_t (*import_memory)(gpuplug_instance_t inst, void* native, uint64_t bytes,
                                    const char* site, uint64_t* out);
  /* Wraps a native stream (CUstream, hipStream_t; host: a queue id of this instance) as a stream
   * of the instance. stream_destroy of *out waits for the work queued on it and forgets it,
   * never destroying the native stream; so does destroy. */
  gpuplug_status_t (*import_stream)(gpuplug_instance_t inst, void* native_stream, uint64_t* out);
  /* ---- ABI 1.2: peer copies. All optional; docs/interop.md. */
  /* Queues a copy of `bytes` from `src` on instance `src_inst` to `dst` on `dst_inst` on
   * dst_inst's `stream` (0: its default stream): the vendor's own peer copy (cuMemcpyPeerAsync,
   * hipMemcpyPeerAsync; host: memcpy). Both instances are this plugin's, made by its create:
   * `dst_inst` is the one the slot is called on (a layer's, when layers are stacked), `src_inst`
   * always the plugin's own (layers pass it through unchanged). Both ranges are checked against
   * their instance's memory (INVALID_ARGUMENT naming the side). The copy is ordered after the
   * work queued on `stream`; work queued on `stream` after it waits for it. The core has waited
   * for the source's queued work before the call; nothing writes `src` until `stream` has done
   * the copy (the application's promise, docs/interop.md). (optional) null, or UNSUPPORTED from the call (a driver without the entry
   * point): the core stages the copy through host memory. */
  gpuplug_status_t (*copy_peer_async)(gpuplug_instance_t dst_inst, uint64_t dst,
                                      gpuplug_instance_t src_inst, uint64_t src, uint64_t bytes,
                                      uint64_t stream);
  /* Page-locked host memory of `bytes` (> 0) that every instance of this plugin copies from and
   * to at full speed (cuMemHostAlloc with CU_MEMHOSTALLOC_PORTABLE, hipHostMalloc; host: aligned
   * memory); *out is not on the ledger. Freed with host_free_pinned of the same instance, which
   * the core calls before destroying it. OUT_OF_MEMORY when none is left. (optional, as a pair
   * with host_free_pinned) null, or UNSUPPORTED from the call: the core stages through
   * pageable memory. */
  gpuplug_status_t (*host_alloc_pinned)(gpuplug_instance_t inst, uint64_t bytes, void** out);
  /* Frees what host_alloc_pinned of this instance returned; null is a no-op, any other pointer
   * INVALID_ARGUMENT. */
  gpuplug_status_t (*host_free_pinned)(gpuplug_instance_t inst, void* ptr);

  /* ---- ABI 1.3: what an engine's decode loop needs. All optional, read only from
   * a table that declares 1.3 or later and whose struct_size covers them.
   *
   * From ABI 1.3 on, copy_h2d_async's source may be reused or freed as soon as the call returns,
   * on every stream: a plugin that declares 1.3 copies (stages) pageable bytes before it returns
   * where its copy reads them later, and for pinned memory it handed out, which a DMA engine
   * reads directly, waits for the copy before it returns. A plugin of an older minor made no
   * such promise: for it the core synchronizes the stream after the queued copy. */

  /* Queues the copy of `bytes` from `src` to `dst` on `stream` without staging: the caller keeps
   * `src` unchanged and alive until the stream has done the copy (a later synchronize of it, or
   * an event recorded after it). Checks as copy_h2d_async. (optional) defaults to copy_h2d_async,
   * which stages. */
  gpuplug_status_t (*copy_h2d_async_retained)(gpuplug_instance_t inst, uint64_t dst, const void* src,
                                              uint64_t bytes, uint64_t stream);

  /* ---- ABI 1.3: pitched 2D copies. All optional. Each copies `height` rows of `width_bytes`
   * bytes; row r is read at src + r * src_pitch and written at dst + r * dst_pitch (cuMemcpy2D's
   * layout), ordered on `stream` (0: the default stream) as the 1D async copies are. A pitch
   * below width_bytes is INVALID_ARGUMENT naming the side; width_bytes 0 or height 0 copies
   * nothing (stream and pointers unchecked, as for a zero-byte copy). Every row's device range
   * is checked: the plugin may check the spanned range [p, p + pitch * (height - 1) + width_bytes)
   * against the allocation, which covers every row; arithmetic that wraps is INVALID_ARGUMENT.
   * A refused copy copies nothing. copy_h2d_2d_async's host source may be reused as soon as the
   * call returns, as copy_h2d_async's from 1.3 on (pageable rows staged, a copy from the plugin's
   * own pinned memory waited for); copy_d2h_2d_async's destination must stay valid until the
   * stream is synchronized. (optional) defaults to one copy_*_async per row. */
  gpuplug_status_t (*copy_h2d_2d_async)(gpuplug_instance_t inst, uint64_t dst, uint64_t dst_pitch,
                                        const void* src, uint64_t src_pitch, uint64_t width_bytes,
                                        uint64_t height, uint64_t stream);
  gpuplug_status_t (*copy_d2h_2d_async)(gpuplug_instance_t inst, void* dst, uint64_t dst_pitch,
                                        uint64_t src, uint64_t src_pitch, uint64_t width_bytes,
                                        uint64_t height, uint64_t stream);
  gpuplug_status_t (*copy_d2d_2d_async)(gpuplug_instance_t inst, uint64_t dst, uint64_t dst_pitch,
                                        uint64_t src, uint64_t src_pitch, uint64_t width_bytes,
                                        uint64_t height, uint64_t stream);
  /* ---- ABI 1.3: mapped host memory (docs/memory.md). Optional, as a group: a table without
   * all three has none, and the core refuses them with UNSUPPORTED naming the plugin. */
  /* `bytes` (> 0) of zeroed, page-locked host memory at *host that kernels of this instance read
   * and write at *device (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP | PORTABLE and
   * cuMemHostGetDevicePointer; hipHostMalloc with hipHostMallocMapped | Portable and
   * hipHostGetDevicePointer; host: the same address). On the ledger at *device as
   * GPUPLUG_ALLOC_PINNED under `site` (may be null): in live_count and live_pinned_bytes, not in
   * live_bytes nor against device_memory_limit; copies, memset_d8 and launches may name device
   * addresses inside it. OUT_OF_MEMORY when the driver has none left. */
  gpuplug_status_t (*alloc_host_mapped)(gpuplug_instance_t inst, uint64_t bytes, const char* site,
                                        void** host, uint64_t* device);
  /* Frees what alloc_host_mapped of this instance returned, named by its host pointer: off the
   * ledger, then the driver's free. Null is a no-op; any other pointer is INVALID_ARGUMENT naming
   * it. sweep_unreleased and destroy free what is left (with their warning). */
  gpuplug_status_t (*free_host_mapped)(gpuplug_instance_t inst, void* host);
  /* The device address of host pointer `host`, which may point inside a live mapped allocation of
   * this instance (the same offset from its device address); any other pointer is
   * INVALID_ARGUMENT naming it. */
  gpuplug_status_t (*host_ptr_to_device)(gpuplug_instance_t inst, const void* host, uint64_t* device);
  /* The host address of device pointer `ptr` (which may point inside an allocation) of managed or
   * mapped memory: for mapped memory the host pointer alloc_host_mapped returned (plus the
   * offset), for managed memory the same address on CUDA, HIP and host. Device memory is
   * INVALID_ARGUMENT ("device memory has no host address") naming the pointer, as is a pointer
   * the instance does not know. (optional) defaults to the core returning `ptr` itself when the
   * ledger snapshot says it lies in managed memory, INVALID_ARGUMENT otherwise. */
  gpuplug_status_t (*host_address)(gpuplug_instance_t inst, uint64_t ptr, void** out);
  /* ---- ABI 1.3 graphs: stream capture and replay (CUDA graphs). Optional, together: a plugin
   * offers all six or none; none is UNSUPPORTED ("graphs are not supported by the <name>
   * plugin"). A graph is an opaque 64-bit value of one instance, never 0; a foreign, destroyed or
   * never-made graph is INVALID_ARGUMENT naming it. Stream arguments as for the other slots; the
   * default stream 0 cannot capture.
   *
   * While `stream` captures, the work queued on it (copies, memsets, launches, event record and
   * wait) is recorded, not run. A stream that waits on an event recorded on a capturing stream
   * joins that capture (a fork); the origin joins it back by waiting on an event recorded on the
   * forked stream after its work. A capture is invalidated (CAPTURE_INVALIDATED) by what it
   * cannot record: a synchronize of a capturing stream or of the device, work on stream 0 while
   * a blocking stream is part of the capture (the legacy default stream would wait for it; a
   * non-blocking one it does not wait for), a wait on an event recorded
   * outside the capture, and the unsafe calls of its mode (GPUPLUG_CAPTURE_MODE_*). An
   * invalidated capture is poisoned: every later operation on its streams fails the same way
   * until stream_abort_capture, and stream_end_capture fails. Streams not capturing are not
   * affected.
   *
   * A graph lives until graph_destroy or the instance's destroy, independent of the streams it
   * was captured on. Replay reads device memory, and the host memory recorded at capture, as they
   * are at replay, except the sources of copy_h2d_async, whose bytes are copied at capture time
   * (replay uploads what they held then); copy_h2d_async_retained's source is read at replay. */
#define GPUPLUG_CAPTURE_MODE_GLOBAL 0       /* alloc/free of the device from any thread invalidates */
#define GPUPLUG_CAPTURE_MODE_THREAD_LOCAL 1 /* alloc/free from the capturing thread invalidates */
#define GPUPLUG_CAPTURE_MODE_RELAXED 2      /* no call is refused for the capture's sake */
  /* Starts capturing `stream` (not 0) in `mode`, a GPUPLUG_CAPTURE_MODE_*; INVALID_ARGUMENT for an
   * unknown mode or a stream that already captures (or has joined a capture). */
  gpuplug_status_t (*stream_begin_capture)(gpuplug_instance_t inst, uint64_t stream, int32_t mode);
  /* Ends the capture `stream` began and instantiates what it recorded: *graph, a replayable graph.
   * CAPTURE_INVALIDATED (the capture is discarded, the stream runs work again) when it was
   * invalidated or a forked stream was not joined back (named); INVALID_ARGUMENT when `stream`
   * began no capture. */
  gpuplug_status_t (*stream_end_capture)(gpuplug_instance_t inst, uint64_t stream, uint64_t* graph);
  /* Queues the graph's operations on `stream`, in an order valid for every dependency recorded,
   * after the work queued on it before; any stream of the instance, any number of times. Work
   * another thread queues on the same stream meanwhile is ordered with them as it comes. */
  gpuplug_status_t (*graph_launch)(gpuplug_instance_t inst, uint64_t graph, uint64_t stream);
  /* Destroys a graph; replays of it already queued complete normally. */
  gpuplug_status_t (*graph_destroy)(gpuplug_instance_t inst, uint64_t graph);
  /* Ends the capture of `stream` (its origin's, for a forked stream) and discards it, so that the
   * stream runs work again; SUCCESS when none is active. */
  gpuplug_status_t (*stream_abort_capture)(gpuplug_instance_t inst, uint64_t stream);
  /* *capturing = 1 while `stream` captures (also when the capture is invalidated, until it ends),
   * else 0. */
  gpuplug_status_t (*stream_is_capturing)(gpuplug_instance_t inst, uint64_t stream,
                                          int32_t* capturing);
  /* ---- ABI 1.3: stream flags (docs/plugin-authors.md, "Stream flags"). */
#define GPUPLUG_STREAM_BLOCKING 0u     /* ordered with stream 0, as stream_create's streams are */
#define GPUPLUG_STREAM_NON_BLOCKING 1u /* work on stream 0 neither waits for it nor is waited for */
  /* A new stream with `flags` (one of GPUPLUG_STREAM_*; any other value is INVALID_ARGUMENT
   * naming it). A non-blocking stream is not ordered with the legacy default stream 0: work
   * queued on 0 (synchronous copies included) does not wait for it, and its work does not wait
   * for work on 0 (CU_STREAM_NON_BLOCKING, hipStreamNonBlocking); synchronize of the device
   * still waits for it. (optional) defaults to stream_create: a blocking stream, which orders
   * more than a non-blocking one promises and so is a correct one, only slower to overlap. */
  gpuplug_status_t (*stream_create_with_flags)(gpuplug_instance_t inst, uint32_t flags,
                                               uint64_t* out);
  /* ---- ABI 1.3: arenas, long-lived device memory such as a model's weights (docs/memory.md).
   * Optional, together: a table without both has neither, and the core refuses them with
   * UNSUPPORTED naming the plugin. */
  /* `bytes` of device memory, as alloc, on the ledger as GPUPLUG_ALLOC_ARENA under `site`: in
   * live_count and arena_bytes, never in live_bytes nor the peaks (the figure a budget for
   * transient memory uses), but against device_memory_limit (it is device memory). Copies,
   * memsets and launches name it like any allocation. */
  gpuplug_status_t (*alloc_arena)(gpuplug_instance_t inst, uint64_t bytes, const char* site,
                                  uint64_t* out);
  /* Frees an arena of this instance, named by the pointer alloc_arena returned. Null is a no-op;
   * any other pointer, an allocation that is not an arena included, is INVALID_ARGUMENT naming
   * it (free refuses an arena the same way). sweep_unreleased and destroy free what is left and
   * name every arena among it, with its site and bytes. */
  gpuplug_status_t (*free_arena)(gpuplug_instance_t inst, uint64_t ptr);
} gpuplug_plugin_v1;

/* The smallest table a v1 host accepts: everything up to and including sweep_unreleased (the
 * table of the first release). A plugin built before a slot was appended publishes this smaller
 * struct_size and keeps loading; the host then uses the slot's default. */
#define GPUPLUG_PLUGIN_V1_MIN_SIZE (offsetof(gpuplug_plugin_v1, sweep_unreleased) + sizeof(void*))
/* The table of ABI 1.0 as it shipped (the 1.0 header's sizeof, up to sweep_unreleased): what a
 * later plugin answers to a host that speaks 1.0, and the most a host reads of a table that
 * declares 1.0, whatever its struct_size says. */
#define GPUPLUG_PLUGIN_V1_0_SIZE (offsetof(gpuplug_plugin_v1, sweep_unreleased) + sizeof(void*))
/* The table of ABI 1.1: what a 1.2 plugin answers to a host that speaks 1.1. */
#define GPUPLUG_PLUGIN_V1_1_SIZE (offsetof(gpuplug_plugin_v1, inspect_module) + sizeof(void*))
/* The table of ABI 1.2. */
#define GPUPLUG_PLUGIN_V1_2_SIZE (offsetof(gpuplug_plugin_v1, host_free_pinned) + sizeof(void*))
/* The table of ABI 1.3. */
#define GPUPLUG_PLUGIN_V1_3_SIZE (offsetof(gpuplug_plugin_v1, free_arena) + sizeof(void*))

/* The entry point every plugin exports (extern "C", default visibility). */
typedef const gpuplug_plugin_v1* (*gpuplug_plugin_entry_fn)(uint32_t host_abi_version);

/* ---- the host backend's kernel calling convention ---------------------- */
/*
 * A host kernel module is an ELF shared object. Each kernel is an exported
 * function of type gpuplug_host_kernel_fn, called once per block of the grid
 * (blocks of one launch may run concurrently on the worker pool); the kernel
 * loops over the block's threads itself. params holds one pointer per argument,
 * exactly as for cuLaunchKernel: a device pointer argument `float* x` arrives as
 * `*(uint64_t*)params[i]`. `shared` points to shared_bytes of memory private to
 * the block, valid for the call. Published metadata is a 4-byte exported object,
 * e.g. `extern "C" GPUPLUG_PLUGIN_EXPORT const uint32_t gemm_f32_n_tile = 64;`.
 *
 * What a host kernel may do:
 *  - throw a C++ exception. The host backend catches it in the block, skips the
 *    blocks of that grid not yet started (blocks already running finish) and
 *    reports LAUNCH_FAILED, naming the kernel (module::function), the block and
 *    the exception (its type and what() for a std::exception, "unknown
 *    exception" otherwise; the text is cut to a bound and escaped). The launch
 *    itself returns SUCCESS, as an asynchronous GPU launch would; the failure is
 *    pending on the launch's stream (stream 0 has its own) and reported once, by
 *    the first of: stream_synchronize of that stream, synchronize (which reports
 *    every stream's), the next launch on that stream (which is then not run), or
 *    stream_destroy of that stream (which destroys it either way). After that
 *    the stream and the device work normally; the data the kernel was writing
 *    is in whatever state it left it.
 *  - call other code of the process and libraries its module depends on. A
 *    module loaded from a module folder or through load_module_file is loaded
 *    by its path, so RUNPATH $ORIGIN finds libraries next to it; a dependency
 *    not found fails the load with NOT_FOUND naming it.
 * What a host kernel must not do:
 *  - longjmp out of the kernel, call exit/abort/pthread_exit, or end or
 *    block the calling thread for good: kernels run on the backend's worker
 *    threads (and the launching thread), whose state the backend relies on;
 *  - let an exception escape through C frames or noexcept functions of its own
 *    (that terminates before the backend can catch it);
 *  - fault (a segmentation fault takes the process down, as on any CPU);
 *  - rely on blocks running in any order, on another block of the grid, or on
 *    the thread that runs it (blocks of one launch run concurrently, so a
 *    kernel must be reentrant: no unsynchronised writes to shared state);
 *  - keep params or shared past its return.
 * A function handle is valid only on the instance whose get_function returned
 * it, while its module is loaded; launch refuses a handle of another host
 * instance with INVALID_ARGUMENT.
 */
typedef struct gpuplug_host_block_t {
  gpuplug_dim3_t grid_dim;
  gpuplug_dim3_t block_dim;
  gpuplug_dim3_t block_idx;
  uint32_t shared_bytes;
  void* shared;
} gpuplug_host_block_t;

typedef void (*gpuplug_host_kernel_fn)(const gpuplug_host_block_t* block, void* const* params);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUPLUG_ABI_H */
