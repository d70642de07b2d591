/* SPDX-License-Identifier: Apache-2.0
 * A fake libcuda.so.1 for the CUDA plugin's loader tests: one failure per GPUPLUG_FAKE_CUDA value.
 */

/*
 * The tests put this library's folder on LD_LIBRARY_PATH so the plugin's dlopen("libcuda.so.1")
 * finds it, and pick the failure with GPUPLUG_FAKE_CUDA (the plugin loads the driver once per
 * process, so each value is its own test process):
 *   too_old         cuDriverGetVersion says CUDA 12.4 (12040)
 *   no_device       cuInit fails with CUDA_ERROR_NO_DEVICE (100)
 *   init_error      cuInit fails with CUDA_ERROR_UNKNOWN (999)
 *   missing_symbol  cuGetProcAddress does not know cuLaunchKernel
 *   zero_devices    everything loads, cuDeviceGetCount reports 0
 *   device          one fake device ("Fake CUDA GPU", sm_90), enough for create, destroy,
 *                   device_info, memory_info and synchronize: primary contexts (retains
 *                   counted) and a per-thread context stack, so tests can check that the plugin
 *                   retains each primary context once and leaves the thread's context alone;
 *                   and events on the default stream (the fake has no other): cuEvent* and
 *                   cuStreamWaitEvent, each needing the primary context current, a recorded
 *                   event complete at once (work is done when it is queued here), its time the
 *                   monotonic clock at cuEventRecord, and a destroyed or foreign event an error
 *   device_no_events  as device, but cuGetProcAddress knows no cuEvent* / cuStreamWaitEvent (an
 *                   old driver or a shim): the plugin must load and report events unsupported
 * In the other modes it never pretends to have a device: entry points other than the few above
 * return CUDA_ERROR_NOT_SUPPORTED and are never called in these modes. In every mode, entry
 * points it does not know return CUDA_ERROR_NOT_SUPPORTED.
 *
 * For the tests (dlsym on the already-loaded fake): gpuplug_fake_cuda_primary_retains() counts
 * cuDevicePrimaryCtxRetain calls, gpuplug_fake_cuda_primary_refcount() is the retain count now;
 * cuCtxGetCurrent and cuCtxSetCurrent are exported under their own names, as libcuda does, so a
 * test can play an application with its own context (any non-null pointer will do).
 */

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int fake_result;
#define FAKE_SUCCESS 0
#define FAKE_ERROR_NO_DEVICE 100
#define FAKE_ERROR_NOT_FOUND 500
#define FAKE_ERROR_NOT_SUPPORTED 801
#define FAKE_ERROR_UNKNOWN 999

#define FAKE_EXPORT __attribute__((visibility("default")))

static int mode_is(const char* m) {
  const char* v = getenv("GPUPLUG_FAKE_CUDA");
  return v != NULL && strcmp(v, m) == 0;
}

FAKE_EXPORT fake_result cuDriverGetVersion(int* version) {
  *version = mode_is("too_old") ? 12040 : 13000;
  return FAKE_SUCCESS;
}

FAKE_EXPORT fake_result cuInit(unsigned int flags) {
  (void)flags;
  if (mode_is("no_device")) return FAKE_ERROR_NO_DEVICE;
  if (mode_is("init_error")) return FAKE_ERROR_UNKNOWN;
  return FAKE_SUCCESS;
}

/* The errors this fake can return, with the driver's words for them. */
static const struct {
  fake_result code;
  const char* name;
  const char* text;
} known_errors[] = {
    {FAKE_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {FAKE_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

/* cuGetErrorName (want_name) or cuGetErrorString: CUDA_ERROR_INVALID_VALUE for other codes. */
static fake_result describe_error(fake_result error, int want_name, const char** out) {
  for (size_t i = 0; i < sizeof known_errors / sizeof known_errors[0]; ++i) {
    if (known_errors[i].code == error) {
      *out = want_name ? known_errors[i].name : known_errors[i].text;
      return FAKE_SUCCESS;
    }
  }
  *out = NULL;
  return 1; /* CUDA_ERROR_INVALID_VALUE */
}

static fake_result get_error_name(fake_result error, const char** name) {
  return describe_error(error, 1, name);
}

static fake_result get_error_string(fake_result error, const char** text) {
  return describe_error(error, 0, text);
}

static fake_result device_get_count(int* count) {
  *count = mode_is("device") || mode_is("device_no_events") ? 1 : 0;
  return FAKE_SUCCESS;
}

/* ---- the "device" mode ---------------------------------------------------------------------- */
#define FAKE_ERROR_INVALID_VALUE 1
#define FAKE_ERROR_INVALID_CONTEXT 201
#define FAKE_ERROR_INVALID_DEVICE 101
#define FAKE_CONTEXT_STACK 16
#define FAKE_TOTAL_MEMORY (16ull << 30)

static char primary_context_object; /* its address is the device's primary context */
static int primary_retains;         /* cuDevicePrimaryCtxRetain calls, ever */
static int primary_refcount;        /* retains minus releases */
static __thread void* context_stack[FAKE_CONTEXT_STACK];
static __thread int context_depth;

FAKE_EXPORT int gpuplug_fake_cuda_primary_retains(void) {
  return __atomic_load_n(&primary_retains, __ATOMIC_SEQ_CST);
}
FAKE_EXPORT int gpuplug_fake_cuda_primary_refcount(void) {
  return __atomic_load_n(&primary_refcount, __ATOMIC_SEQ_CST);
}

static void* current_context(void) {
  return context_depth > 0 ? context_stack[context_depth - 1] : NULL;
}
/* Operations that need a context: the primary one must be current. */
static fake_result need_primary(void) {
  return current_context() == &primary_context_object && primary_refcount > 0
             ? FAKE_SUCCESS
             : FAKE_ERROR_INVALID_CONTEXT;
}

FAKE_EXPORT fake_result cuCtxGetCurrent(void** ctx) {
  *ctx = current_context();
  return FAKE_SUCCESS;
}
/* The driver's rule: replaces the top of the stack; NULL pops it (or does nothing). */
FAKE_EXPORT fake_result cuCtxSetCurrent(void* ctx) {
  if (ctx == NULL) {
    if (context_depth > 0) --context_depth;
  } else if (context_depth == 0) {
    context_stack[context_depth++] = ctx;
  } else {
    context_stack[context_depth - 1] = ctx;
  }
  return FAKE_SUCCESS;
}
static fake_result ctx_push_current(void* ctx) {
  if (ctx == NULL || context_depth == FAKE_CONTEXT_STACK) return FAKE_ERROR_INVALID_VALUE;
  context_stack[context_depth++] = ctx;
  return FAKE_SUCCESS;
}
static fake_result ctx_pop_current(void** ctx) {
  if (context_depth == 0) return FAKE_ERROR_INVALID_CONTEXT;
  --context_depth;
  if (ctx != NULL) *ctx = context_stack[context_depth];
  return FAKE_SUCCESS;
}
static fake_result device_get(int* device, int ordinal) {
  if (ordinal != 0) return FAKE_ERROR_INVALID_DEVICE;
  *device = 0;
  return FAKE_SUCCESS;
}
static fake_result device_get_name(char* name, int size, int device) {
  if (device != 0 || size <= 0) return FAKE_ERROR_INVALID_VALUE;
  strncpy(name, "Fake CUDA GPU", (size_t)size - 1);
  name[size - 1] = '\0';
  return FAKE_SUCCESS;
}
static fake_result device_get_uuid(unsigned char* uuid, int device) {
  if (device != 0) return FAKE_ERROR_INVALID_DEVICE;
  for (int i = 0; i < 16; ++i) uuid[i] = (unsigned char)(0xA0 + i);
  return FAKE_SUCCESS;
}
static fake_result device_total_mem(size_t* bytes, int device) {
  if (device != 0) return FAKE_ERROR_INVALID_DEVICE;
  *bytes = FAKE_TOTAL_MEMORY;
  return FAKE_SUCCESS;
}
/* CUdevice_attribute numbers from cuda.h. */
static fake_result device_get_attribute(int* value, int attribute, int device) {
  if (device != 0) return FAKE_ERROR_INVALID_DEVICE;
  /* MULTIPROCESSOR_COUNT 16, COMPUTE_CAPABILITY_MAJOR 75 and MINOR 76 (sm_90), MANAGED_MEMORY 83,
   * CONCURRENT_MANAGED_ACCESS 89; an H100/H200-like identity: WARP_SIZE 10, CLOCK_RATE 13 (kHz),
   * MAX_SHARED_MEMORY_PER_BLOCK 8 and its OPTIN 97, INTEGRATED 18 (no), PCI_DOMAIN_ID 50,
   * PCI_BUS_ID 33 and PCI_DEVICE_ID 34 (0000:c1:00.0); every other attribute 0. */
  switch (attribute) {
    case 16: *value = 132; break;
    case 75: *value = 9; break;
    case 83: case 89: *value = 1; break;
    case 10: *value = 32; break;
    case 13: *value = 1980000; break;
    case 8: *value = 49152; break;
    case 97: *value = 232448; break;
    case 33: *value = 0xc1; break;
    default: *value = 0; break;
  }
  return FAKE_SUCCESS;
}
static fake_result primary_ctx_retain(void** ctx, int device) {
  if (device != 0) return FAKE_ERROR_INVALID_DEVICE;
  __atomic_add_fetch(&primary_retains, 1, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&primary_refcount, 1, __ATOMIC_SEQ_CST);
  *ctx = &primary_context_object;
  return FAKE_SUCCESS;
}
static fake_result primary_ctx_release(int device) {
  if (device != 0) return FAKE_ERROR_INVALID_DEVICE;
  if (__atomic_load_n(&primary_refcount, __ATOMIC_SEQ_CST) <= 0) return FAKE_ERROR_INVALID_CONTEXT;
  __atomic_sub_fetch(&primary_refcount, 1, __ATOMIC_SEQ_CST);
  return FAKE_SUCCESS;
}
static fake_result primary_ctx_get_state(int device, unsigned int* flags, int* active) {
  if (device != 0) return FAKE_ERROR_INVALID_DEVICE;
  *flags = 0;
  *active = __atomic_load_n(&primary_refcount, __ATOMIC_SEQ_CST) > 0;
  return FAKE_SUCCESS;
}
static fake_result mem_get_info(size_t* free_bytes, size_t* total) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  *free_bytes = FAKE_TOTAL_MEMORY / 2;
  *total = FAKE_TOTAL_MEMORY;
  return FAKE_SUCCESS;
}
static fake_result ctx_synchronize(void) { return need_primary(); }
static fake_result stream_synchronize(void* stream) {
  (void)stream;
  return need_primary();
}

/* Events. A live event carries a magic value; the plugin must never pass a destroyed one (its
 * SDK refuses it first), which ASan would report here as a use after free. */
#define FAKE_ERROR_INVALID_HANDLE 400
#define FAKE_EVENT_MAGIC 0x45564e54
struct fake_event {
  int magic;
  int recorded;
  long long at_ns;
};
static int live_events; /* created minus destroyed */
FAKE_EXPORT int gpuplug_fake_cuda_live_events(void) {
  return __atomic_load_n(&live_events, __ATOMIC_SEQ_CST);
}
static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000ll + t.tv_nsec;
}
static struct fake_event* live_event(void* e) {
  struct fake_event* ev = (struct fake_event*)e;
  return ev != NULL && ev->magic == FAKE_EVENT_MAGIC ? ev : NULL;
}
static fake_result event_create(void** e, unsigned int flags) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  if (e == NULL || flags != 0) return FAKE_ERROR_INVALID_VALUE; /* CU_EVENT_DEFAULT: timing */
  struct fake_event* ev = (struct fake_event*)calloc(1, sizeof *ev);
  if (ev == NULL) return FAKE_ERROR_UNKNOWN;
  ev->magic = FAKE_EVENT_MAGIC;
  __atomic_add_fetch(&live_events, 1, __ATOMIC_SEQ_CST);
  *e = ev;
  return FAKE_SUCCESS;
}
static fake_result event_destroy(void* e) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  struct fake_event* ev = live_event(e);
  if (ev == NULL) return FAKE_ERROR_INVALID_HANDLE;
  ev->magic = 0;
  free(ev);
  __atomic_sub_fetch(&live_events, 1, __ATOMIC_SEQ_CST);
  return FAKE_SUCCESS;
}
static fake_result event_record(void* e, void* stream) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  struct fake_event* ev = live_event(e);
  if (ev == NULL || stream != NULL) return FAKE_ERROR_INVALID_HANDLE; /* no streams here */
  __atomic_store_n(&ev->at_ns, now_ns(), __ATOMIC_SEQ_CST);
  __atomic_store_n(&ev->recorded, 1, __ATOMIC_SEQ_CST);
  return FAKE_SUCCESS;
}
static fake_result event_check(void* e) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  return live_event(e) != NULL ? FAKE_SUCCESS : FAKE_ERROR_INVALID_HANDLE;
}
static fake_result event_synchronize(void* e) { return event_check(e); }
static fake_result event_query(void* e) { return event_check(e); }
static fake_result event_elapsed_time(float* ms, void* start, void* end) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  struct fake_event* a = live_event(start);
  struct fake_event* b = live_event(end);
  if (ms == NULL || a == NULL || b == NULL) return FAKE_ERROR_INVALID_HANDLE;
  if (!__atomic_load_n(&a->recorded, __ATOMIC_SEQ_CST) ||
      !__atomic_load_n(&b->recorded, __ATOMIC_SEQ_CST))
    return FAKE_ERROR_INVALID_HANDLE;
  *ms = (float)((double)(__atomic_load_n(&b->at_ns, __ATOMIC_SEQ_CST) -
                         __atomic_load_n(&a->at_ns, __ATOMIC_SEQ_CST)) /
                1e6);
  return FAKE_SUCCESS;
}
static fake_result stream_wait_event(void* stream, void* e, unsigned int flags) {
  const fake_result r = event_check(e);
  if (r != FAKE_SUCCESS) return r;
  return stream == NULL && flags == 0 ? FAKE_SUCCESS : FAKE_ERROR_INVALID_VALUE;
}

static const struct {
  const char* symbol;
  void* fn;
} event_entry_points[] = {
    {"cuEventCreate", (void*)&event_create},
    {"cuEventDestroy", (void*)&event_destroy},
    {"cuEventRecord", (void*)&event_record},
    {"cuEventSynchronize", (void*)&event_synchronize},
    {"cuEventQuery", (void*)&event_query},
    {"cuEventElapsedTime", (void*)&event_elapsed_time},
    {"cuStreamWaitEvent", (void*)&stream_wait_event},
};

static const struct {
  const char* symbol;
  void* fn;
} device_mode_entry_points[] = {
    {"cuCtxGetCurrent", (void*)&cuCtxGetCurrent},
    {"cuCtxSetCurrent", (void*)&cuCtxSetCurrent},
    {"cuCtxPushCurrent", (void*)&ctx_push_current},
    {"cuCtxPopCurrent", (void*)&ctx_pop_current},
    {"cuDeviceGet", (void*)&device_get},
    {"cuDeviceGetName", (void*)&device_get_name},
    {"cuDeviceGetUuid", (void*)&device_get_uuid},
    {"cuDeviceTotalMem", (void*)&device_total_mem},
    {"cuDeviceGetAttribute", (void*)&device_get_attribute},
    {"cuDevicePrimaryCtxRetain", (void*)&primary_ctx_retain},
    {"cuDevicePrimaryCtxRelease", (void*)&primary_ctx_release},
    {"cuDevicePrimaryCtxGetState", (void*)&primary_ctx_get_state},
    {"cuMemGetInfo", (void*)&mem_get_info},
    {"cuCtxSynchronize", (void*)&ctx_synchronize},
    {"cuStreamSynchronize", (void*)&stream_synchronize},
};

static fake_result not_supported(void) { return FAKE_ERROR_NOT_SUPPORTED; }

/* cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus) */
FAKE_EXPORT fake_result cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                            unsigned long long flags, int* status) {
  (void)version;
  (void)flags;
  if (mode_is("missing_symbol") && strcmp(symbol, "cuLaunchKernel") == 0) {
    *pfn = NULL;
    if (status != NULL) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return FAKE_ERROR_NOT_FOUND;
  }
  if (strcmp(symbol, "cuGetErrorName") == 0) {
    *pfn = (void*)&get_error_name;
  } else if (strcmp(symbol, "cuGetErrorString") == 0) {
    *pfn = (void*)&get_error_string;
  } else if (strcmp(symbol, "cuDeviceGetCount") == 0) {
    *pfn = (void*)&device_get_count;
  } else {
    *pfn = (void*)&not_supported;
    if (mode_is("device") || mode_is("device_no_events")) {
      for (size_t i = 0; i < sizeof device_mode_entry_points / sizeof device_mode_entry_points[0];
           ++i) {
        if (strcmp(symbol, device_mode_entry_points[i].symbol) == 0)
          *pfn = device_mode_entry_points[i].fn;
      }
    }
    for (size_t i = 0; i < sizeof event_entry_points / sizeof event_entry_points[0]; ++i) {
      if (strcmp(symbol, event_entry_points[i].symbol) != 0) continue;
      if (mode_is("device_no_events")) { /* an old driver: the symbol is not there at all */
        *pfn = NULL;
        if (status != NULL) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
        return FAKE_ERROR_NOT_FOUND;
      }
      if (mode_is("device")) *pfn = event_entry_points[i].fn;
    }
  }
  if (status != NULL) *status = 0; /* CU_GET_PROC_ADDRESS_SUCCESS */
  return FAKE_SUCCESS;
}
