/* SPDX-License-Identifier: Apache-2.0
 * A fake libcuda.so.1 for the CUDA plugin: one driver failure, or one device that runs a small
 * workload without a GPU, per GPUPLUG_FAKE_CUDA value.
 */

/*
 * The tests put this library's folder on LD_LIBRARY_PATH so the plugin's dlopen("libcuda.so.1")
 * finds it, and pick the mode with GPUPLUG_FAKE_CUDA (the plugin loads the driver once per
 * process, so each value is its own test process):
 *   too_old         cuDriverGetVersion says CUDA 12.4 (12040)
 *   no_device       cuInit fails with CUDA_ERROR_NO_DEVICE (100)
 *   init_error      cuInit fails with CUDA_ERROR_UNKNOWN (999)
 *   missing_symbol  cuGetProcAddress does not know cuLaunchKernel
 *   zero_devices    everything loads, cuDeviceGetCount reports 0
 *   device          one fake device ("Fake CUDA GPU", sm_90, 16 GiB) with what the plugin calls
 *                   for a small workload; every call but the device queries needs the primary
 *                   context current, as the real driver does (CUDA_ERROR_INVALID_CONTEXT):
 *     contexts      primary contexts (retains counted) and a per-thread context stack, so tests
 *                   can check that the plugin retains each primary context once and leaves the
 *                   thread's context alone;
 *     memory        cuMemAlloc, cuMemAllocManaged and cuMemFree backed by host memory (device
 *                   addresses from 0x200000000000, never reused; managed ones are their host
 *                   address, so the host may touch them), cuMemGetInfo's free bytes the total
 *                   minus what is live, cuPointerGetAttribute's device ordinal, range start and size;
 *     copies        cuMemcpyHtoD/DtoH/DtoD, their Async forms, cuMemcpy2DAsync and
 *                   cuMemsetD8(Async), done when called; a device range that is not inside one
 *                   live allocation (an unknown or freed pointer, or a copy past the end) is
 *                   CUDA_ERROR_INVALID_VALUE, as is a 2D copy's pitch below its width;
 *     streams       cuStreamCreate/Destroy/Synchronize: work is complete when it is queued, so
 *                   a stream is a handle whose liveness every call taking one checks
 *                   (CUDA_ERROR_INVALID_HANDLE once destroyed); CU_STREAM_NON_BLOCKING is kept
 *                   (legacy-stream work does not invalidate a non-blocking stream's capture);
 *     events        cuEvent* and cuStreamWaitEvent on the default or any live stream, a
 *                   recorded event complete at once, its time the monotonic clock at
 *                   cuEventRecord, and a destroyed or foreign event an error;
 *     modules       cuModuleLoadData(Ex) of the images the plugin loads (the build's fatbins,
 *                   a cubin, or PTX text): the kernels and globals are the symbols of the
 *                   image's sm_90 cubin (each global an allocation holding its initial bytes,
 *                   freed at cuModuleUnload), or PTX's .entry names; cuModuleGetFunction/
 *                   GetGlobal find those names or return CUDA_ERROR_NOT_FOUND;
 *                   cuModuleGetFunctionCount/EnumerateFunctions and cuFuncGetName list them;
 *     launch        cuLaunchKernel checks that the function belongs to a live module, that no
 *                   grid or block dimension is 0 (and the block is at most 1024 threads) and
 *                   the stream, then counts the launch: no kernel code ever runs, so results
 *                   are whatever the copies left
 *     host memory   cuMemHostAlloc (flags PORTABLE 0x1 and DEVICEMAP 0x2 only) returns host
 *                   memory that is NOT zeroed (filled with 0xCD, as real page-locked memory holds
 *                   whatever it held), cuMemFreeHost takes only its start; with DEVICEMAP,
 *                   cuMemHostGetDevicePointer (flags 0) gives a device address in the device
 *                   range, not the host address (as on a driver without unified addressing), so
 *                   a plugin that mixes the two up is caught; copies, memset and
 *                   cuPointerGetAttribute take that device address like an allocation's;
 *   device_no_events  as device, but cuGetProcAddress knows no cuEvent* / cuStreamWaitEvent (an
 *                   old driver or a shim): the plugin must load and report events unsupported
 * In the other modes it never pretends to have a device: entry points other than the few above
 * return CUDA_ERROR_NOT_SUPPORTED and are never called in these modes. In every mode, entry
 * points it does not know return CUDA_ERROR_NOT_SUPPORTED.
 *
 * State: what a driver keeps, per process as libcuda does: the primary context's retain count,
 * and its allocations, streams and modules in tables guarded by one mutex (events are objects of
 * their own). Nothing is freed at exit; a test that releases everything leaves the tables empty.
 *
 * For the tests (dlsym on the already-loaded fake): gpuplug_fake_cuda_primary_retains() counts
 * cuDevicePrimaryCtxRetain calls, gpuplug_fake_cuda_primary_refcount() is the retain count now;
 * gpuplug_fake_cuda_live_events(), _live_streams() and _live_allocations() count what is live
 * (module globals included), gpuplug_fake_cuda_launches() the launches that passed the checks,
 * gpuplug_fake_cuda_copies_2d() the cuMemcpy2DAsync calls that copied;
 * cuCtxGetCurrent and cuCtxSetCurrent are exported under their own names, as libcuda does, so a
 * test can play an application with its own context (any non-null pointer will do).
 */

#include <pthread.h>
#include <stdint.h>
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
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "operation would result in a merge of separate capture sequences"},
    {903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "capture was not ended in the same stream as it began"},
    {904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
     "capturing stream has unjoined work"},
    {905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
     "dependency created on uncaptured work in another stream"},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {907, "CUDA_ERROR_CAPTURED_EVENT", "operation not permitted on an event last recorded in a capturing stream"},
    {908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
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

/* The modes with the fake device. */
static int device_mode(void) {
  return mode_is("device") || mode_is("device_no_events") || mode_is("device_no_graphs");
}

static fake_result device_get_count(int* count) {
  *count = device_mode() ? 1 : 0;
  return FAKE_SUCCESS;
}

/* ---- the "device" mode ---------------------------------------------------------------------- */
#define FAKE_ERROR_INVALID_VALUE 1
#define FAKE_ERROR_INVALID_CONTEXT 201
#define FAKE_ERROR_INVALID_DEVICE 101
#define FAKE_ERROR_INVALID_HANDLE 400
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
  return current_context() == &primary_context_object &&
                 __atomic_load_n(&primary_refcount, __ATOMIC_SEQ_CST) > 0
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
/* ---- memory, streams and modules: the driver's tables, behind one lock ----------------------
 * What a driver keeps per context (here the one primary context): its allocations, streams and
 * modules. Work is done when it is queued (a copy or memset runs inside the call), so a stream
 * is only a handle whose liveness is checked. Allocations are backed by host memory; device
 * addresses are handed out from FAKE_DEVICE_BASE upwards, never reused and with a gap between
 * allocations, so a pointer past an allocation's end or into a freed one belongs to nothing and
 * is refused. Managed allocations use their host address, so the host can touch them as it can
 * real managed memory. Every lookup scans a small array: the tests keep few objects live. */
#define FAKE_ERROR_OUT_OF_MEMORY 2
#define FAKE_ERROR_INVALID_IMAGE 200
#define FAKE_ERROR_INVALID_PTX 218
#define FAKE_DEVICE_BASE 0x200000000000ull /* above a process's heap and below its mmap area */
#define FAKE_DEVICE_ALIGN 256ull
#define FAKE_STREAM_LEGACY ((void*)0x1)     /* CU_STREAM_LEGACY */
#define FAKE_STREAM_PER_THREAD ((void*)0x2) /* CU_STREAM_PER_THREAD */

struct fake_module;
struct fake_allocation {
  unsigned long long base; /* the CUdeviceptr */
  size_t size;
  unsigned char* bytes; /* the host memory behind it */
  int managed;
  const struct fake_module* module; /* a module's global: made at load, freed at unload */
  int host_memory; /* cuMemHostAlloc's DEVICEMAP memory at its device address: bytes not owned */
};
/* One cuMemHostAlloc allocation. */
struct fake_host_allocation {
  unsigned char* host;
  size_t size;
  unsigned long long device; /* 0 without CU_MEMHOSTALLOC_DEVICEMAP */
};
struct fake_function {
  char* name;
  struct fake_module* module;
};
struct fake_global {
  char* name;
  unsigned long long address; /* an allocation owned by the module */
  size_t size;
};
struct fake_module {
  struct fake_function* functions; /* the image's kernels; a CUfunction points at one */
  unsigned function_count;
  struct fake_global* globals;
  unsigned global_count;
};

static pthread_mutex_t driver_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_allocation* allocations; /* live ones */
static size_t allocation_count, allocation_capacity;
static size_t used_bytes; /* what cuMemGetInfo subtracts from the total */
static unsigned long long next_device_address = FAKE_DEVICE_BASE;
static void** streams; /* live CUstreams */
static size_t stream_count, stream_capacity;
static struct fake_module** modules; /* live CUmodules */
static size_t module_count, module_capacity;
static long long launches; /* successful cuLaunchKernel calls */
static struct fake_host_allocation* host_allocations; /* live cuMemHostAlloc ones */
static size_t host_allocation_count, host_allocation_capacity;

FAKE_EXPORT long long gpuplug_fake_cuda_launches(void) {
  return __atomic_load_n(&launches, __ATOMIC_SEQ_CST);
}
FAKE_EXPORT int gpuplug_fake_cuda_live_allocations(void) {
  pthread_mutex_lock(&driver_lock);
  const int n = (int)allocation_count;
  pthread_mutex_unlock(&driver_lock);
  return n;
}

/* Appends `item` (of `size` bytes) to a growing array; 0 when out of memory. Lock held. */
static int append(void** array, size_t* count, size_t* capacity, const void* item, size_t size) {
  if (*count == *capacity) {
    const size_t grown = *capacity == 0 ? 16 : *capacity * 2;
    void* bigger = realloc(*array, grown * size);
    if (bigger == NULL) return 0;
    *array = bigger;
    *capacity = grown;
  }
  memcpy((char*)*array + *count * size, item, size);
  ++*count;
  return 1;
}
static void remove_at(void* array, size_t* count, size_t index, size_t size) {
  --*count;
  memmove((char*)array + index * size, (char*)array + (index + 1) * size, (*count - index) * size);
}

/* The allocation holding [ptr, ptr + bytes), or NULL. Lock held. */
static struct fake_allocation* find_range(unsigned long long ptr, size_t bytes) {
  for (size_t i = 0; i < allocation_count; ++i) {
    struct fake_allocation* a = &allocations[i];
    if (ptr >= a->base && ptr - a->base < a->size && bytes <= a->size - (ptr - a->base)) return a;
  }
  return NULL;
}
/* Host memory for [ptr, ptr + bytes) of one live allocation, or NULL. Lock held. */
static unsigned char* device_bytes(unsigned long long ptr, size_t bytes) {
  struct fake_allocation* a = find_range(ptr, bytes == 0 ? 1 : bytes);
  return a != NULL ? a->bytes + (ptr - a->base) : NULL;
}

/* A new allocation of `bytes`; its address in *out. Lock held. */
static fake_result allocate(unsigned long long* out, size_t bytes, int managed,
                            const struct fake_module* module) {
  if (bytes > FAKE_TOTAL_MEMORY - used_bytes) return FAKE_ERROR_OUT_OF_MEMORY;
  struct fake_allocation a = {0, bytes, (unsigned char*)calloc(1, bytes == 0 ? 1 : bytes), managed,
                              module};
  if (a.bytes == NULL) return FAKE_ERROR_OUT_OF_MEMORY;
  if (managed) {
    a.base = (unsigned long long)(uintptr_t)a.bytes;
  } else {
    a.base = next_device_address;
    next_device_address += (bytes + 2 * FAKE_DEVICE_ALIGN - 1) / FAKE_DEVICE_ALIGN *
                           FAKE_DEVICE_ALIGN; /* at least one aligned gap after it */
  }
  if (!append((void**)&allocations, &allocation_count, &allocation_capacity, &a, sizeof a)) {
    free(a.bytes);
    return FAKE_ERROR_OUT_OF_MEMORY;
  }
  used_bytes += bytes;
  *out = a.base;
  return FAKE_SUCCESS;
}
static void release_at(size_t index) {
  if (allocations[index].host_memory) { /* cuMemFreeHost's: the host block is freed there */
    remove_at(allocations, &allocation_count, index, sizeof *allocations);
    return;
  }
  used_bytes -= allocations[index].size;
  free(allocations[index].bytes);
  remove_at(allocations, &allocation_count, index, sizeof *allocations);
}

static fake_result unsafe_call(void); /* stream capture's rule for alloc and free, below */

static fake_result mem_alloc_common(unsigned long long* ptr, size_t bytes, int managed) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  if (ptr == NULL || bytes == 0) return FAKE_ERROR_INVALID_VALUE; /* as cuMemAlloc(0) */
  pthread_mutex_lock(&driver_lock);
  fake_result made = unsafe_call();
  if (made == FAKE_SUCCESS) made = allocate(ptr, bytes, managed, NULL);
  pthread_mutex_unlock(&driver_lock);
  return made;
}
static fake_result mem_alloc(unsigned long long* ptr, size_t bytes) {
  return mem_alloc_common(ptr, bytes, 0);
}
static fake_result mem_alloc_managed(unsigned long long* ptr, size_t bytes, unsigned int flags) {
  if (flags != 0x1 && flags != 0x2) return FAKE_ERROR_INVALID_VALUE; /* ATTACH_GLOBAL / _HOST */
  return mem_alloc_common(ptr, bytes, 1);
}
/* Only the address an allocation returned frees it; a module's global is not the caller's. */
static fake_result mem_free(unsigned long long ptr) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  pthread_mutex_lock(&driver_lock);
  fake_result result = unsafe_call();
  if (result == FAKE_SUCCESS) result = FAKE_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < allocation_count && result == FAKE_ERROR_INVALID_VALUE; ++i) {
    if (allocations[i].base == ptr && allocations[i].module == NULL &&
        !allocations[i].host_memory) {
      release_at(i);
      result = FAKE_SUCCESS;
      break;
    }
  }
  pthread_mutex_unlock(&driver_lock);
  return result;
}
/* cuMemHostAlloc(pp, bytes, flags): page-locked host memory, not zeroed. */
static fake_result mem_host_alloc(void** pp, size_t bytes, unsigned int flags) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  if (pp == NULL || bytes == 0 || (flags & ~0x3u) != 0) return FAKE_ERROR_INVALID_VALUE;
  unsigned char* host = (unsigned char*)malloc(bytes);
  if (host == NULL) return FAKE_ERROR_OUT_OF_MEMORY;
  memset(host, 0xCD, bytes);
  struct fake_host_allocation h = {host, bytes, 0};
  pthread_mutex_lock(&driver_lock);
  int ok = 1;
  if (flags & 0x2) { /* CU_MEMHOSTALLOC_DEVICEMAP */
    h.device = next_device_address;
    struct fake_allocation a = {h.device, bytes, host, 0, NULL, 1};
    ok = append((void**)&allocations, &allocation_count, &allocation_capacity, &a, sizeof a);
    if (ok) next_device_address += (bytes + 2 * FAKE_DEVICE_ALIGN - 1) / FAKE_DEVICE_ALIGN * FAKE_DEVICE_ALIGN;
  }
  if (ok && !append((void**)&host_allocations, &host_allocation_count, &host_allocation_capacity,
                    &h, sizeof h)) {
    if (h.device != 0) --allocation_count; /* the entry appended just above */
    ok = 0;
  }
  pthread_mutex_unlock(&driver_lock);
  if (!ok) {
    free(host);
    return FAKE_ERROR_OUT_OF_MEMORY;
  }
  *pp = host;
  return FAKE_SUCCESS;
}
/* cuMemFreeHost(p): only the start of a cuMemHostAlloc allocation. */
static fake_result mem_free_host(void* p) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  fake_result result = FAKE_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&driver_lock);
  for (size_t i = 0; i < host_allocation_count; ++i) {
    if (host_allocations[i].host != p) continue;
    for (size_t j = 0; j < allocation_count; ++j) {
      if (allocations[j].host_memory && allocations[j].base == host_allocations[i].device) {
        release_at(j);
        break;
      }
    }
    free(host_allocations[i].host);
    remove_at(host_allocations, &host_allocation_count, i, sizeof *host_allocations);
    result = FAKE_SUCCESS;
    break;
  }
  pthread_mutex_unlock(&driver_lock);
  return result;
}
/* cuMemHostGetDevicePointer(out, p, flags): the device address of DEVICEMAP memory at p (which
 * may point inside it); flags must be 0. */
static fake_result mem_host_get_device_pointer(unsigned long long* out, void* p,
                                               unsigned int flags) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  if (out == NULL || flags != 0) return FAKE_ERROR_INVALID_VALUE;
  fake_result result = FAKE_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&driver_lock);
  for (size_t i = 0; i < host_allocation_count; ++i) {
    const struct fake_host_allocation* h = &host_allocations[i];
    const unsigned char* c = (const unsigned char*)p;
    if (h->device == 0 || c < h->host || (size_t)(c - h->host) >= h->size) continue;
    *out = h->device + (unsigned long long)(c - h->host);
    result = FAKE_SUCCESS;
    break;
  }
  pthread_mutex_unlock(&driver_lock);
  return result;
}
static fake_result mem_get_info(size_t* free_bytes, size_t* total) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  pthread_mutex_lock(&driver_lock);
  *free_bytes = FAKE_TOTAL_MEMORY - used_bytes;
  pthread_mutex_unlock(&driver_lock);
  *total = FAKE_TOTAL_MEMORY;
  return FAKE_SUCCESS;
}
/* CU_POINTER_ATTRIBUTE_RANGE_START_ADDR (11) and RANGE_SIZE (12) of a live allocation. */
static fake_result pointer_get_attribute(void* data, int attribute, unsigned long long ptr) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9, RANGE_START_ADDR 11, RANGE_SIZE 12 */
  if (data == NULL || (attribute != 9 && attribute != 11 && attribute != 12))
    return FAKE_ERROR_INVALID_VALUE;
  fake_result result = FAKE_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&driver_lock);
  const struct fake_allocation* a = find_range(ptr, 1);
  if (a != NULL) {
    if (attribute == 9) {
      *(int*)data = 0; /* the fake's one device */
    } else if (attribute == 11) {
      *(unsigned long long*)data = a->base;
    } else {
      *(size_t*)data = a->size;
    }
    result = FAKE_SUCCESS;
  }
  pthread_mutex_unlock(&driver_lock);
  return result;
}

/* ---- streams ---- */
/* NULL (the legacy default stream), the two special handles, or a live stream. Lock held. */
static int stream_is_live(void* stream) {
  if (stream == NULL || stream == FAKE_STREAM_LEGACY || stream == FAKE_STREAM_PER_THREAD) return 1;
  for (size_t i = 0; i < stream_count; ++i)
    if (streams[i] == stream) return 1;
  return 0;
}
static fake_result check_stream(void* stream) {
  pthread_mutex_lock(&driver_lock);
  const int live = stream_is_live(stream);
  pthread_mutex_unlock(&driver_lock);
  return live ? FAKE_SUCCESS : FAKE_ERROR_INVALID_HANDLE;
}
static fake_result stream_create(void** stream, unsigned int flags) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  if (stream == NULL || flags > 0x1) return FAKE_ERROR_INVALID_VALUE; /* DEFAULT, NON_BLOCKING */
  unsigned char* s = (unsigned char*)malloc(1); /* a unique address; its byte: the flags */
  if (s == NULL) return FAKE_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&driver_lock);
  const int added = append((void**)&streams, &stream_count, &stream_capacity, &s, sizeof s);
  pthread_mutex_unlock(&driver_lock);
  if (!added) {
    free(s);
    return FAKE_ERROR_OUT_OF_MEMORY;
  }
  *s = (unsigned char)flags;
  *stream = s;
  return FAKE_SUCCESS;
}
/* ---- stream capture: what a capturing stream's work becomes ----------------------------------
 * A capture is begun on one stream (its origin) and holds the nodes recorded from its members:
 * the origin, and every stream forked into it by waiting on an event recorded on a member. Each
 * member counts the operations recorded from it (ops) and how many of those another member has
 * waited for (joined_ops); end-capture is CUDA_ERROR_STREAM_CAPTURE_UNJOINED when a forked member
 * has work nobody waited for. Nodes are kept in recording order, which respects every dependency
 * the capture saw, and a replay runs them in that order. Host pointers are recorded, not their
 * bytes: a replay reads and writes host memory as it is then, as the driver's memcpy nodes do. */
#define FAKE_ERROR_ILLEGAL_STATE 401
#define FAKE_ERROR_ILLEGAL_ADDRESS 700
#define FAKE_ERROR_CAPTURE_UNSUPPORTED 900
#define FAKE_ERROR_CAPTURE_INVALIDATED 901
#define FAKE_ERROR_CAPTURE_MERGE 902
#define FAKE_ERROR_CAPTURE_UNMATCHED 903
#define FAKE_ERROR_CAPTURE_UNJOINED 904
#define FAKE_ERROR_CAPTURE_ISOLATION 905
#define FAKE_ERROR_CAPTURE_IMPLICIT 906
#define FAKE_ERROR_CAPTURED_EVENT 907
#define FAKE_ERROR_CAPTURE_WRONG_THREAD 908
enum { FAKE_CAPTURE_GLOBAL = 0, FAKE_CAPTURE_THREAD_LOCAL = 1, FAKE_CAPTURE_RELAXED = 2 };

enum copy_kind { HTOD, DTOH, DTOD };
/* cuMemcpy2DAsync's CUDA_MEMCPY2D as cuda.h lays it out. */
typedef struct fake_memcpy2d {
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void* srcHost;
  unsigned long long srcDevice;
  void* srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void* dstHost;
  unsigned long long dstDevice;
  void* dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
} fake_memcpy2d;

enum node_kind { NODE_COPY, NODE_COPY_2D, NODE_MEMSET, NODE_LAUNCH };
struct fake_node {
  enum node_kind kind;
  enum copy_kind direction;      /* NODE_COPY */
  unsigned long long dst, src;   /* device sides (NODE_COPY, NODE_MEMSET's dst) */
  void* host_dst;                /* NODE_COPY DTOH */
  const void* host_src;          /* NODE_COPY HTOD */
  size_t bytes;                  /* NODE_COPY, NODE_MEMSET */
  unsigned char value;           /* NODE_MEMSET */
  fake_memcpy2d copy_2d;         /* NODE_COPY_2D */
  const void* function;          /* NODE_LAUNCH */
};
struct fake_nodes {
  struct fake_node* at;
  size_t count, capacity;
};
struct fake_capture {
  unsigned long long id; /* unique over the process, from 1 */
  int mode;
  pthread_t thread; /* that began it */
  int invalidated;
  void* origin;
  struct fake_nodes nodes;
};
struct fake_member {
  void* stream;
  struct fake_capture* capture;
  size_t ops, joined_ops;
};
static struct fake_member* members; /* every capturing stream; guarded by driver_lock */
static size_t member_count, member_capacity;
static unsigned long long next_capture_id = 1;

static int is_legacy(const void* stream) { return stream == NULL || stream == FAKE_STREAM_LEGACY; }
/* The member entry of `stream`, or NULL when it does not capture. Lock held. */
static struct fake_member* member_of(const void* stream) {
  for (size_t i = 0; i < member_count; ++i)
    if (members[i].stream == stream) return &members[i];
  return NULL;
}
/* Whether a capturing stream is ordered with the legacy stream: every stream but one created with
 * CU_STREAM_NON_BLOCKING (a created stream's byte holds its flags). */
static int is_blocking(const void* stream) {
  if (stream == FAKE_STREAM_PER_THREAD) return 1;
  return (*(const unsigned char*)stream & 0x1) == 0;
}
static void invalidate_all(void) {
  for (size_t i = 0; i < member_count; ++i) members[i].capture->invalidated = 1;
}
/* Invalidates the captures the legacy stream would wait for; whether there was one. */
static int invalidate_blocking(void) {
  int any = 0;
  for (size_t i = 0; i < member_count; ++i) {
    if (!is_blocking(members[i].stream)) continue;
    members[i].capture->invalidated = 1;
    any = 1;
  }
  return any;
}
static int any_blocking_member(void) {
  for (size_t i = 0; i < member_count; ++i)
    if (is_blocking(members[i].stream)) return 1;
  return 0;
}
/* Whether work on `stream` runs (NULL returned, *result SUCCESS), is recorded into the capture of
 * the returned member (*result SUCCESS), or is refused (*result the error). The legacy stream
 * would wait for every capturing (blocking) stream: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, which
 * invalidates their captures. A member of an invalidated capture: ..._INVALIDATED. Lock held. */
static struct fake_member* capture_gate(const void* stream, fake_result* result) {
  *result = FAKE_SUCCESS;
  if (is_legacy(stream)) {
    if (invalidate_blocking()) *result = FAKE_ERROR_CAPTURE_IMPLICIT;
    return NULL;
  }
  struct fake_member* m = member_of(stream);
  if (m != NULL && m->capture->invalidated) *result = FAKE_ERROR_CAPTURE_INVALIDATED;
  return m;
}
static fake_result record_node(struct fake_member* m, const struct fake_node* n) {
  struct fake_nodes* nodes = &m->capture->nodes;
  if (!append((void**)&nodes->at, &nodes->count, &nodes->capacity, n, sizeof *n))
    return FAKE_ERROR_OUT_OF_MEMORY;
  ++m->ops;
  return FAKE_SUCCESS;
}
/* A "potentially unsafe" call (cuMemAlloc, cuMemFree, ...): refused with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating the captures that refuse it, while a
 * GLOBAL capture is active on any thread or a THREAD_LOCAL one begun by this thread. Lock held. */
static fake_result unsafe_call(void) {
  fake_result result = FAKE_SUCCESS;
  for (size_t i = 0; i < member_count; ++i) {
    struct fake_capture* c = members[i].capture;
    if (c->mode == FAKE_CAPTURE_GLOBAL ||
        (c->mode == FAKE_CAPTURE_THREAD_LOCAL && pthread_equal(c->thread, pthread_self()))) {
      c->invalidated = 1;
      result = FAKE_ERROR_CAPTURE_UNSUPPORTED;
    }
  }
  return result;
}
/* Ends capture `c`: its members leave it and it is freed (its nodes too unless taken). Lock held. */
static void end_capture_members(struct fake_capture* c) {
  for (size_t i = member_count; i-- > 0;)
    if (members[i].capture == c) remove_at(members, &member_count, i, sizeof *members);
  free(c->nodes.at);
  free(c);
}

static fake_result stream_destroy(void* stream) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  fake_result result = FAKE_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&driver_lock);
  for (size_t i = 0; i < stream_count; ++i) {
    if (streams[i] == stream) {
      /* A capturing stream leaves its capture, invalidating it; without its origin it is gone. */
      struct fake_member* m = member_of(stream);
      if (m != NULL && m->capture->origin == stream) {
        end_capture_members(m->capture);
      } else if (m != NULL) {
        m->capture->invalidated = 1;
        remove_at(members, &member_count, (size_t)(m - members), sizeof *members);
      }
      remove_at(streams, &stream_count, i, sizeof *streams);
      free(stream);
      result = FAKE_SUCCESS;
      break;
    }
  }
  pthread_mutex_unlock(&driver_lock);
  return result;
}
/* A synchronize would wait for work a capture only records: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
 * and the capture is invalidated (..._INVALIDATED once it is). */
static fake_result stream_synchronize(void* stream) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  fake_result result = FAKE_SUCCESS;
  pthread_mutex_lock(&driver_lock);
  struct fake_member* m = NULL;
  if (!stream_is_live(stream)) {
    result = FAKE_ERROR_INVALID_HANDLE;
  } else if ((m = capture_gate(stream, &result)) != NULL && result == FAKE_SUCCESS) {
    m->capture->invalidated = 1;
    result = FAKE_ERROR_CAPTURE_UNSUPPORTED;
  }
  pthread_mutex_unlock(&driver_lock);
  return result;
}
static fake_result ctx_synchronize(void) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  pthread_mutex_lock(&driver_lock);
  const int capturing = member_count > 0;
  invalidate_all();
  pthread_mutex_unlock(&driver_lock);
  return capturing ? FAKE_ERROR_CAPTURE_UNSUPPORTED : FAKE_SUCCESS;
}
FAKE_EXPORT int gpuplug_fake_cuda_live_streams(void) {
  pthread_mutex_lock(&driver_lock);
  const int n = (int)stream_count;
  pthread_mutex_unlock(&driver_lock);
  return n;
}

/* ---- copies and memset: done when called (or recorded while capturing), on host memory,
 * inside live allocations ---- */
/* The copy a node or a call describes: done when `run`, else only checked. Lock held. */
static fake_result copy_now(const struct fake_node* n, int run) {
  if (n->bytes == 0) return FAKE_SUCCESS;
  unsigned char* to = n->direction == DTOH ? (unsigned char*)n->host_dst : device_bytes(n->dst, n->bytes);
  const unsigned char* from =
      n->direction == HTOD ? (const unsigned char*)n->host_src : device_bytes(n->src, n->bytes);
  if (to == NULL || from == NULL) return FAKE_ERROR_INVALID_VALUE; /* unknown, or past the end */
  if (run) memmove(to, from, n->bytes);
  return FAKE_SUCCESS;
}
/* Runs `n` on the device (no stream or capture checks): the work a call or a replay does.
 * Lock held. */
static fake_result run_node(const struct fake_node* n);
/* Work `n` queued on `stream`: run, recorded into the stream's capture (after the checks a
 * driver makes when it records it), or refused. Lock held. */
static fake_result queue_node(const struct fake_node* n, fake_result (*check)(const struct fake_node*, int),
                              void* stream) {
  if (!stream_is_live(stream)) return FAKE_ERROR_INVALID_HANDLE;
  fake_result result;
  struct fake_member* m = capture_gate(stream, &result);
  if (result != FAKE_SUCCESS) return result;
  if (m == NULL) return run_node(n);
  result = check(n, 0);
  return result != FAKE_SUCCESS ? result : record_node(m, n);
}
static fake_result copy(enum copy_kind kind, unsigned long long dst, unsigned long long src,
                        void* host_dst, const void* host_src, size_t bytes, void* stream) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  struct fake_node n;
  memset(&n, 0, sizeof n);
  n.kind = NODE_COPY;
  n.direction = kind;
  n.dst = dst;
  n.src = src;
  n.host_dst = host_dst;
  n.host_src = host_src;
  n.bytes = bytes;
  pthread_mutex_lock(&driver_lock);
  const fake_result result = queue_node(&n, copy_now, stream);
  pthread_mutex_unlock(&driver_lock);
  return result;
}
static fake_result memcpy_htod(unsigned long long dst, const void* src, size_t bytes) {
  return copy(HTOD, dst, 0, NULL, src, bytes, NULL);
}
static fake_result memcpy_dtoh(void* dst, unsigned long long src, size_t bytes) {
  return copy(DTOH, 0, src, dst, NULL, bytes, NULL);
}
static fake_result memcpy_dtod(unsigned long long dst, unsigned long long src, size_t bytes) {
  return copy(DTOD, dst, src, NULL, NULL, bytes, NULL);
}
static fake_result memcpy_htod_async(unsigned long long dst, const void* src, size_t bytes,
                                     void* stream) {
  return copy(HTOD, dst, 0, NULL, src, bytes, stream);
}
static fake_result memcpy_dtoh_async(void* dst, unsigned long long src, size_t bytes,
                                     void* stream) {
  return copy(DTOH, 0, src, dst, NULL, bytes, stream);
}
static fake_result memcpy_dtod_async(unsigned long long dst, unsigned long long src, size_t bytes,
                                     void* stream) {
  return copy(DTOD, dst, src, NULL, NULL, bytes, stream);
}
/* cuMemcpy2DAsync: CUDA_MEMCPY2D (memory types HOST 1, DEVICE 2, ARRAY 3,
 * UNIFIED 4). Row r of WidthInBytes bytes is read at src + (srcY + r) * srcPitch + srcXInBytes and
 * written likewise. As the driver does: a pitch below WidthInBytes, an array or unknown memory type,
 * or a row not inside one live allocation is CUDA_ERROR_INVALID_VALUE, checked for every row
 * before any is copied; width or height 0 copies nothing. */
enum { FAKE_MEMORYTYPE_HOST = 1, FAKE_MEMORYTYPE_DEVICE = 2, FAKE_MEMORYTYPE_UNIFIED = 4 };
/* Row `r` of one side, as host memory: a host pointer, or the bytes of a live allocation (NULL
 * when the row is not inside one). Lock held. */
static unsigned char* row_bytes(int type, const void* host, unsigned long long device, size_t x,
                                size_t y, size_t pitch, size_t width, size_t r) {
  const size_t offset = (y + r) * pitch + x;
  if (type == FAKE_MEMORYTYPE_HOST) return host == NULL ? NULL : (unsigned char*)host + offset;
  return device_bytes(device + offset, width);
}
static long long copies_2d; /* cuMemcpy2DAsync calls that copied */
FAKE_EXPORT long long gpuplug_fake_cuda_copies_2d(void) {
  return __atomic_load_n(&copies_2d, __ATOMIC_SEQ_CST);
}
/* The rows of a 2D copy node: all checked, then copied when `run`. Lock held. */
static fake_result copy_2d_now(const struct fake_node* n, int run) {
  const fake_memcpy2d* m = &n->copy_2d;
  if (m->WidthInBytes == 0 || m->Height == 0) return FAKE_SUCCESS;
  for (size_t row = 0; row < m->Height; ++row) {
    if (row_bytes(m->srcMemoryType, m->srcHost, m->srcDevice, m->srcXInBytes, m->srcY,
                  m->srcPitch, m->WidthInBytes, row) == NULL ||
        row_bytes(m->dstMemoryType, m->dstHost, m->dstDevice, m->dstXInBytes, m->dstY,
                  m->dstPitch, m->WidthInBytes, row) == NULL)
      return FAKE_ERROR_INVALID_VALUE;
  }
  if (!run) return FAKE_SUCCESS;
  for (size_t row = 0; row < m->Height; ++row)
    memmove(row_bytes(m->dstMemoryType, m->dstHost, m->dstDevice, m->dstXInBytes, m->dstY,
                      m->dstPitch, m->WidthInBytes, row),
            row_bytes(m->srcMemoryType, m->srcHost, m->srcDevice, m->srcXInBytes, m->srcY,
                      m->srcPitch, m->WidthInBytes, row),
            m->WidthInBytes);
  __atomic_add_fetch(&copies_2d, 1, __ATOMIC_SEQ_CST);
  return FAKE_SUCCESS;
}
static fake_result memcpy_2d_async(const fake_memcpy2d* m, void* stream) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  if (m == NULL) return FAKE_ERROR_INVALID_VALUE;
  const int known_src = m->srcMemoryType == FAKE_MEMORYTYPE_HOST ||
                        m->srcMemoryType == FAKE_MEMORYTYPE_DEVICE ||
                        m->srcMemoryType == FAKE_MEMORYTYPE_UNIFIED;
  const int known_dst = m->dstMemoryType == FAKE_MEMORYTYPE_HOST ||
                        m->dstMemoryType == FAKE_MEMORYTYPE_DEVICE ||
                        m->dstMemoryType == FAKE_MEMORYTYPE_UNIFIED;
  if (!known_src || !known_dst) return FAKE_ERROR_INVALID_VALUE;
  if (m->WidthInBytes == 0 || m->Height == 0) return check_stream(stream);
  if (m->srcPitch < m->WidthInBytes || m->dstPitch < m->WidthInBytes)
    return FAKE_ERROR_INVALID_VALUE;
  struct fake_node n;
  memset(&n, 0, sizeof n);
  n.kind = NODE_COPY_2D;
  n.copy_2d = *m;
  pthread_mutex_lock(&driver_lock);
  const fake_result result = queue_node(&n, copy_2d_now, stream);
  pthread_mutex_unlock(&driver_lock);
  return result;
}
static fake_result memset_now(const struct fake_node* n, int run) {
  if (n->bytes == 0) return FAKE_SUCCESS; /* nothing to set, as with a copy of 0 bytes */
  unsigned char* to = device_bytes(n->dst, n->bytes);
  if (to == NULL) return FAKE_ERROR_INVALID_VALUE;
  if (run) memset(to, n->value, n->bytes);
  return FAKE_SUCCESS;
}
static fake_result memset_d8_async(unsigned long long dst, unsigned char value, size_t bytes,
                                   void* stream) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  struct fake_node n;
  memset(&n, 0, sizeof n);
  n.kind = NODE_MEMSET;
  n.dst = dst;
  n.value = value;
  n.bytes = bytes;
  pthread_mutex_lock(&driver_lock);
  const fake_result result = queue_node(&n, memset_now, stream);
  pthread_mutex_unlock(&driver_lock);
  return result;
}
static fake_result memset_d8(unsigned long long dst, unsigned char value, size_t bytes) {
  return memset_d8_async(dst, value, bytes, NULL);
}

/* ---- modules ----
 * An image is what the plugin loads (plugins/cuda/image.cpp has checked its bounds): a fatbin
 * (the build's are uncompressed: kernels/cuda/CMakeLists.txt), a cubin, or PTX text. The fake
 * reads the cubin for sm_90 (the fake device's), else the fatbin's first uncompressed cubin: its
 * kernels are its STT_FUNC symbols, its globals its STT_OBJECT symbols, each made
 * an allocation at load holding the symbol's initial bytes (zeros for .bss-like sections), as a
 * driver does. PTX (text, or a fatbin holding no cubin) yields its `.entry` kernels and no
 * globals. Nothing is executed. */
static unsigned long long read_u(const unsigned char* p, size_t bytes) {
  unsigned long long v = 0;
  for (size_t i = bytes; i-- > 0;) v = v << 8 | p[i]; /* little endian, any alignment */
  return v;
}
static char* copy_name(const char* name, size_t length) {
  char* s = (char*)malloc(length + 1);
  if (s != NULL) {
    memcpy(s, name, length);
    s[length] = '\0';
  }
  return s;
}
static int add_function(struct fake_module* m, const char* name, size_t length) {
  struct fake_function* grown =
      (struct fake_function*)realloc(m->functions, (m->function_count + 1) * sizeof *m->functions);
  if (grown == NULL) return 0;
  m->functions = grown;
  grown[m->function_count].name = copy_name(name, length);
  grown[m->function_count].module = m;
  if (grown[m->function_count].name == NULL) return 0;
  ++m->function_count;
  return 1;
}
/* A global `name` of `size` bytes starting as `init` (init_bytes of them; the rest zeros). Lock
 * held. */
static int add_global(struct fake_module* m, const char* name, size_t length, size_t size,
                      const unsigned char* init, size_t init_bytes) {
  struct fake_global* grown =
      (struct fake_global*)realloc(m->globals, (m->global_count + 1) * sizeof *m->globals);
  if (grown == NULL) return 0;
  m->globals = grown;
  struct fake_global* g = &grown[m->global_count];
  g->size = size;
  g->name = copy_name(name, length);
  if (g->name == NULL) return 0;
  if (allocate(&g->address, size, 0, m) != FAKE_SUCCESS) {
    free(g->name);
    return 0;
  }
  if (init_bytes > 0) memcpy(find_range(g->address, 1)->bytes, init, init_bytes);
  ++m->global_count;
  return 1;
}
/* Frees the module and its globals' memory. Lock held. */
static void free_module(struct fake_module* m) {
  for (size_t i = allocation_count; i-- > 0;)
    if (allocations[i].module == m) release_at(i);
  for (unsigned i = 0; i < m->function_count; ++i) free(m->functions[i].name);
  for (unsigned i = 0; i < m->global_count; ++i) free(m->globals[i].name);
  free(m->functions);
  free(m->globals);
  free(m);
}

/* The kernels and globals of an ELF cubin of `size` bytes; 0 when it is not one. Lock held. */
static int read_cubin(struct fake_module* m, const unsigned char* elf, size_t size) {
  if (size < 64 ||
      memcmp(elf,
             "\x7f"
             "ELF",
             4) != 0 ||
      elf[4] != 2)
    return 0;
  const unsigned long long shoff = read_u(elf + 40, 8);
  const unsigned long long shentsize = read_u(elf + 58, 2);
  const unsigned long long shnum = read_u(elf + 60, 2);
  if (shentsize < 64 || shoff > size || shnum * shentsize > size - shoff) return 0;
  for (unsigned long long i = 0; i < shnum; ++i) {
    const unsigned char* sh = elf + shoff + i * shentsize;
    if (read_u(sh + 4, 4) != 2) continue; /* SHT_SYMTAB */
    const unsigned long long link = read_u(sh + 40, 4);
    const unsigned long long sym_at = read_u(sh + 24, 8), sym_bytes = read_u(sh + 32, 8);
    if (link >= shnum || sym_at > size || sym_bytes > size - sym_at) return 0;
    const unsigned char* strtab_sh = elf + shoff + link * shentsize;
    const unsigned long long str_at = read_u(strtab_sh + 24, 8);
    const unsigned long long str_bytes = read_u(strtab_sh + 32, 8);
    if (str_at > size || str_bytes > size - str_at) return 0;
    const char* strtab = (const char*)elf + str_at;
    for (unsigned long long at = 0; at + 24 <= sym_bytes; at += 24) {
      const unsigned char* sym = elf + sym_at + at; /* Elf64_Sym */
      const unsigned long long name_at = read_u(sym, 4);
      const unsigned type = sym[4] & 0xF, bind = sym[4] >> 4,
                     section = (unsigned)read_u(sym + 6, 2);
      /* Kernels are global; nvcc makes extern "C" __device__ variables local symbols. Symbols
       * outside any section (the reserved shared memory) and section names are neither. */
      if (bind > 2 || (type != 1 && type != 2) || section == 0 || section >= shnum ||
          name_at >= str_bytes || strtab[name_at] == '.' || strtab[name_at] == '\0')
        continue;
      const char* name = strtab + name_at;
      const size_t length = strnlen(name, str_bytes - name_at);
      if (type == 2) { /* STT_FUNC */
        if (!add_function(m, name, length)) return 0;
        continue;
      }
      /* STT_OBJECT: its bytes are at st_value in its section, unless the section has none. */
      const unsigned long long value = read_u(sym + 8, 8), bytes = read_u(sym + 16, 8);
      const unsigned char* init = NULL;
      size_t init_bytes = 0;
      {
        const unsigned char* home = elf + shoff + section * shentsize;
        const unsigned long long home_at = read_u(home + 24, 8), home_bytes = read_u(home + 32, 8);
        if (read_u(home + 4, 4) != 8 /* SHT_NOBITS */ && home_at <= size &&
            home_bytes <= size - home_at && value <= home_bytes && bytes <= home_bytes - value) {
          init = elf + home_at + value;
          init_bytes = (size_t)bytes;
        }
      }
      if (!add_global(m, name, length, (size_t)bytes, init, init_bytes)) return 0;
    }
  }
  return 1;
}
/* The `.entry NAME(` kernels of PTX text (`bytes` of it, or up to its NUL). */
static int read_ptx(struct fake_module* m, const char* text, size_t bytes) {
  const size_t length = strnlen(text, bytes);
  int version = 0;
  for (size_t i = 0; i < length; ++i) {
    if (length - i > 8 && memcmp(text + i, ".version", 8) == 0) version = 1;
    if (length - i <= 7 || memcmp(text + i, ".entry ", 7) != 0) continue;
    size_t start = i + 7, end = start;
    while (end < length && text[end] != '(' && text[end] != ' ' && text[end] != '\n') ++end;
    if (end > start && !add_function(m, text + start, end - start)) return 0;
  }
  return version; /* text without a .version line is not PTX */
}
/* A fatbin: its sm_90 cubin, else its first plain cubin, else its first plain PTX. */
static int read_fatbin(struct fake_module* m, const unsigned char* image) {
  const unsigned long long header = read_u(image + 6, 2), body = read_u(image + 8, 8);
  const unsigned char *cubin = NULL, *ptx = NULL;
  unsigned long long cubin_bytes = 0, ptx_bytes = 0;
  for (unsigned long long at = header; at + 48 <= header + body;) {
    const unsigned char* entry = image + at;
    const unsigned long long kind = read_u(entry, 2), size = read_u(entry + 4, 4);
    const unsigned long long payload = read_u(entry + 8, 8);
    const int compressed = (read_u(entry + 40, 8) & 0xA000) != 0 || read_u(entry + 16, 4) != 0;
    if (size < 48) break;
    if (!compressed && kind == 2 && (cubin == NULL || read_u(entry + 28, 4) == 90)) {
      cubin = entry + size;
      cubin_bytes = payload;
    } else if (!compressed && kind == 1 && ptx == NULL) {
      ptx = entry + size;
      ptx_bytes = payload;
    }
    at += size + payload;
  }
  if (cubin != NULL) return read_cubin(m, cubin, (size_t)cubin_bytes);
  return ptx != NULL && read_ptx(m, (const char*)ptx, (size_t)ptx_bytes);
}

/* Writes `why` into the caller's CU_JIT_ERROR_LOG_BUFFER (5), if it gave one with its size (6). */
static void jit_log(unsigned int count, const int* keys, void** values, const char* why) {
  char* buffer = NULL;
  size_t size = 0;
  for (unsigned int i = 0; keys != NULL && values != NULL && i < count; ++i) {
    if (keys[i] == 5) buffer = (char*)values[i];
    if (keys[i] == 6) size = (size_t)(uintptr_t)values[i];
  }
  if (buffer != NULL && size > 0) {
    strncpy(buffer, why, size - 1);
    buffer[size - 1] = '\0';
  }
}
static fake_result module_load_data_ex(void** module, const void* image, unsigned int count,
                                       int* keys, void** values) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  if (module == NULL || image == NULL) return FAKE_ERROR_INVALID_VALUE;
  struct fake_module* m = (struct fake_module*)calloc(1, sizeof *m);
  if (m == NULL) return FAKE_ERROR_OUT_OF_MEMORY;
  const unsigned char* bytes = (const unsigned char*)image;
  pthread_mutex_lock(&driver_lock);
  int ok;
  fake_result failure = FAKE_ERROR_INVALID_IMAGE;
  /* Neither magic holds a NUL, so a shorter string is text and its 4 bytes are not read. */
  const int magic = strnlen((const char*)image, 4) == 4;
  if (magic && read_u(bytes, 4) == 0xBA55ED50ull) {
    ok = read_fatbin(m, bytes);
  } else if (magic && memcmp(bytes,
                             "\x7f"
                             "ELF",
                             4) == 0) {
    /* A cubin's size: through its section headers and the furthest section they name. */
    const unsigned long long shoff = read_u(bytes + 40, 8);
    unsigned long long size = shoff + read_u(bytes + 58, 2) * read_u(bytes + 60, 2);
    for (unsigned long long i = 0; i < read_u(bytes + 60, 2); ++i) {
      const unsigned char* sh = bytes + shoff + i * read_u(bytes + 58, 2);
      const unsigned long long end = read_u(sh + 24, 8) + read_u(sh + 32, 8);
      if (read_u(sh + 4, 4) != 8 && end > size) size = end;
    }
    ok = read_cubin(m, bytes, (size_t)size);
  } else {
    ok = read_ptx(m, (const char*)image, (size_t)-1);
    failure = FAKE_ERROR_INVALID_PTX;
  }
  if (ok && !append((void**)&modules, &module_count, &module_capacity, &m, sizeof m)) {
    ok = 0;
    failure = FAKE_ERROR_OUT_OF_MEMORY;
  }
  if (!ok) free_module(m);
  pthread_mutex_unlock(&driver_lock);
  if (!ok) {
    jit_log(count, keys, values, "fake libcuda: the image holds no cubin or PTX it can read");
    return failure;
  }
  *module = m;
  return FAKE_SUCCESS;
}
static fake_result module_load_data(void** module, const void* image) {
  return module_load_data_ex(module, image, 0, NULL, NULL);
}
/* The index of live module `m`, or -1. Lock held. */
static long find_module(const void* m) {
  for (size_t i = 0; i < module_count; ++i)
    if (modules[i] == m) return (long)i;
  return -1;
}
static fake_result module_unload(void* module) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  pthread_mutex_lock(&driver_lock);
  const long i = find_module(module);
  if (i >= 0) {
    remove_at(modules, &module_count, (size_t)i, sizeof *modules);
    free_module((struct fake_module*)module);
  }
  pthread_mutex_unlock(&driver_lock);
  return i >= 0 ? FAKE_SUCCESS : FAKE_ERROR_INVALID_HANDLE;
}
static fake_result module_get_function(void** function, void* module, const char* name) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  if (function == NULL || name == NULL) return FAKE_ERROR_INVALID_VALUE;
  fake_result result = FAKE_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&driver_lock);
  if (find_module(module) >= 0) {
    struct fake_module* m = (struct fake_module*)module;
    result = FAKE_ERROR_NOT_FOUND;
    for (unsigned i = 0; i < m->function_count; ++i) {
      if (strcmp(m->functions[i].name, name) == 0) {
        *function = &m->functions[i];
        result = FAKE_SUCCESS;
        break;
      }
    }
  }
  pthread_mutex_unlock(&driver_lock);
  return result;
}
static fake_result module_get_global(unsigned long long* address, size_t* bytes, void* module,
                                     const char* name) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  if (name == NULL) return FAKE_ERROR_INVALID_VALUE;
  fake_result result = FAKE_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&driver_lock);
  if (find_module(module) >= 0) {
    const struct fake_module* m = (const struct fake_module*)module;
    result = FAKE_ERROR_NOT_FOUND;
    for (unsigned i = 0; i < m->global_count; ++i) {
      if (strcmp(m->globals[i].name, name) == 0) {
        if (address != NULL) *address = m->globals[i].address;
        if (bytes != NULL) *bytes = m->globals[i].size;
        result = FAKE_SUCCESS;
        break;
      }
    }
  }
  pthread_mutex_unlock(&driver_lock);
  return result;
}
static fake_result module_get_function_count(unsigned int* count, void* module) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  pthread_mutex_lock(&driver_lock);
  const long i = find_module(module);
  if (i >= 0) *count = modules[i]->function_count;
  pthread_mutex_unlock(&driver_lock);
  return i >= 0 ? FAKE_SUCCESS : FAKE_ERROR_INVALID_HANDLE;
}
static fake_result module_enumerate_functions(void** functions, unsigned int count, void* module) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  fake_result result = FAKE_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&driver_lock);
  const long i = find_module(module);
  if (i >= 0 && count < modules[i]->function_count) {
    result = FAKE_ERROR_INVALID_VALUE;
  } else if (i >= 0) {
    for (unsigned f = 0; f < modules[i]->function_count; ++f)
      functions[f] = &modules[i]->functions[f];
    result = FAKE_SUCCESS;
  }
  pthread_mutex_unlock(&driver_lock);
  return result;
}
/* Whether `f` is a kernel of a live module. Lock held. */
static struct fake_function* live_function(const void* f) {
  for (size_t i = 0; i < module_count; ++i) {
    struct fake_module* m = modules[i];
    for (unsigned k = 0; k < m->function_count; ++k)
      if (&m->functions[k] == f) return &m->functions[k];
  }
  return NULL;
}
static fake_result func_get_name(const char** name, void* function) {
  pthread_mutex_lock(&driver_lock);
  const struct fake_function* f = live_function(function);
  if (f != NULL) *name = f->name;
  pthread_mutex_unlock(&driver_lock);
  return f != NULL ? FAKE_SUCCESS : FAKE_ERROR_INVALID_HANDLE;
}

/* ---- launch: checked and counted, never run ---- */
static fake_result launch_now(const struct fake_node* n, int run) {
  if (live_function(n->function) == NULL) return FAKE_ERROR_INVALID_HANDLE;
  if (run) __atomic_add_fetch(&launches, 1, __ATOMIC_SEQ_CST);
  return FAKE_SUCCESS;
}
static fake_result run_node(const struct fake_node* n) {
  switch (n->kind) {
    case NODE_COPY: return copy_now(n, 1);
    case NODE_COPY_2D: return copy_2d_now(n, 1);
    case NODE_MEMSET: return memset_now(n, 1);
    case NODE_LAUNCH: return launch_now(n, 1);
  }
  return FAKE_ERROR_INVALID_VALUE;
}
static fake_result launch_kernel(void* function, unsigned int gx, unsigned int gy, unsigned int gz,
                                 unsigned int bx, unsigned int by, unsigned int bz,
                                 unsigned int shared, void* stream, void** params, void** extra) {
  (void)params;
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 ||
      (unsigned long long)bx * by * bz > 1024 || shared > 232448 || extra != NULL)
    return FAKE_ERROR_INVALID_VALUE;
  struct fake_node n;
  memset(&n, 0, sizeof n);
  n.kind = NODE_LAUNCH;
  n.function = function;
  pthread_mutex_lock(&driver_lock);
  const fake_result result = queue_node(&n, launch_now, stream);
  pthread_mutex_unlock(&driver_lock);
  return result;
}
/* Events. A live event carries a magic value; the plugin must never pass a destroyed one (its
 * SDK refuses it first), which ASan would report here as a use after free. */
#define FAKE_EVENT_MAGIC 0x45564e54
struct fake_event {
  int magic;
  int recorded;
  long long at_ns;
  /* Recorded on a capturing stream: the capture's id, the stream and its recorded operations
   * then (a wait on the event depends on those); capture_id 0 otherwise. Guarded by driver_lock. */
  unsigned long long capture_id;
  const void* capture_stream;
  size_t capture_ops;
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
/* On a capturing stream the record is captured (the event marks the stream's point in the
 * capture, for forks and joins), not done. */
static fake_result event_record(void* e, void* stream) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  struct fake_event* ev = live_event(e);
  if (ev == NULL) return FAKE_ERROR_INVALID_HANDLE;
  fake_result result = FAKE_SUCCESS;
  pthread_mutex_lock(&driver_lock);
  struct fake_member* m = NULL;
  if (!stream_is_live(stream)) {
    result = FAKE_ERROR_INVALID_HANDLE;
  } else if ((m = capture_gate(stream, &result)) != NULL && result == FAKE_SUCCESS) {
    ev->capture_id = m->capture->id;
    ev->capture_stream = stream;
    ev->capture_ops = m->ops;
  } else if (result == FAKE_SUCCESS) {
    ev->capture_id = 0;
    __atomic_store_n(&ev->at_ns, now_ns(), __ATOMIC_SEQ_CST);
    __atomic_store_n(&ev->recorded, 1, __ATOMIC_SEQ_CST);
  }
  pthread_mutex_unlock(&driver_lock);
  return result;
}
static fake_result event_check(void* e) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  return live_event(e) != NULL ? FAKE_SUCCESS : FAKE_ERROR_INVALID_HANDLE;
}
/* The member the event was last recorded on in a capture still active, or NULL. Lock held. */
static struct fake_member* capturing_recorder(const struct fake_event* ev) {
  if (ev->capture_id == 0) return NULL;
  struct fake_member* m = member_of(ev->capture_stream);
  return m != NULL && m->capture->id == ev->capture_id ? m : NULL;
}
/* An event last recorded in an active capture has no completion to wait for or ask about. */
static fake_result event_done(void* e) {
  const fake_result r = event_check(e);
  if (r != FAKE_SUCCESS) return r;
  pthread_mutex_lock(&driver_lock);
  const int captured = capturing_recorder(live_event(e)) != NULL;
  pthread_mutex_unlock(&driver_lock);
  return captured ? FAKE_ERROR_CAPTURED_EVENT : FAKE_SUCCESS;
}
static fake_result event_synchronize(void* e) { return event_done(e); }
static fake_result event_query(void* e) { return event_done(e); }
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
/* A wait on an event recorded in an active capture forks a stream that does not capture into
 * it, or (from another member) joins the recorder's work up to the record back; a capturing
 * stream waiting on an event from outside its capture would cross its boundary
 * (CUDA_ERROR_STREAM_CAPTURE_ISOLATION), on one from another capture would merge the two
 * (..._MERGE): both invalidate. */
static fake_result stream_wait_event(void* stream, void* e, unsigned int flags) {
  const fake_result r = event_check(e);
  if (r != FAKE_SUCCESS) return r;
  if (flags != 0) return FAKE_ERROR_INVALID_VALUE;
  const struct fake_event* ev = live_event(e);
  fake_result result = FAKE_SUCCESS;
  pthread_mutex_lock(&driver_lock);
  struct fake_member* m = NULL;
  if (!stream_is_live(stream)) {
    result = FAKE_ERROR_INVALID_HANDLE;
  } else if ((m = capture_gate(stream, &result)), result == FAKE_SUCCESS) {
    struct fake_member* recorder = capturing_recorder(ev);
    if (recorder == NULL) {
      if (m != NULL) {
        m->capture->invalidated = 1;
        result = FAKE_ERROR_CAPTURE_ISOLATION;
      }
    } else if (m == NULL) {
      const struct fake_member forked = {stream, recorder->capture, 0, 0};
      if (!append((void**)&members, &member_count, &member_capacity, &forked, sizeof forked))
        result = FAKE_ERROR_OUT_OF_MEMORY;
    } else if (m->capture != recorder->capture) {
      m->capture->invalidated = recorder->capture->invalidated = 1;
      result = FAKE_ERROR_CAPTURE_MERGE;
    } else if (recorder != m && ev->capture_ops > recorder->joined_ops) {
      recorder->joined_ops = ev->capture_ops;
    }
  }
  pthread_mutex_unlock(&driver_lock);
  return result;
}

/* ---- capture and graphs ----
 * A CUgraph (what end-capture returns) and a CUgraphExec (what instantiate makes of one) are
 * both a fake_graph holding its own copy of the nodes, told apart by their magic. */
#define FAKE_GRAPH_MAGIC 0x47524148
#define FAKE_EXEC_MAGIC 0x45584543
struct fake_graph {
  int magic;
  struct fake_nodes nodes;
};
static int live_graphs, live_graph_execs;
static long long graph_launches; /* replays run (not those recorded into a capture) */
FAKE_EXPORT int gpuplug_fake_cuda_live_graphs(void) {
  return __atomic_load_n(&live_graphs, __ATOMIC_SEQ_CST);
}
FAKE_EXPORT int gpuplug_fake_cuda_live_graph_execs(void) {
  return __atomic_load_n(&live_graph_execs, __ATOMIC_SEQ_CST);
}
FAKE_EXPORT long long gpuplug_fake_cuda_graph_launches(void) {
  return __atomic_load_n(&graph_launches, __ATOMIC_SEQ_CST);
}
static struct fake_graph* live_graph(void* g, int magic) {
  struct fake_graph* graph = (struct fake_graph*)g;
  return graph != NULL && graph->magic == magic ? graph : NULL;
}
static struct fake_graph* make_graph(int magic, const struct fake_nodes* nodes) {
  struct fake_graph* g = (struct fake_graph*)calloc(1, sizeof *g);
  if (g == NULL) return NULL;
  if (nodes->count > 0) {
    g->nodes.at = (struct fake_node*)malloc(nodes->count * sizeof *nodes->at);
    if (g->nodes.at == NULL) {
      free(g);
      return NULL;
    }
    memcpy(g->nodes.at, nodes->at, nodes->count * sizeof *nodes->at);
  }
  g->nodes.count = g->nodes.capacity = nodes->count;
  g->magic = magic;
  __atomic_add_fetch(magic == FAKE_GRAPH_MAGIC ? &live_graphs : &live_graph_execs, 1,
                     __ATOMIC_SEQ_CST);
  return g;
}
static void free_graph(struct fake_graph* g) {
  __atomic_sub_fetch(g->magic == FAKE_GRAPH_MAGIC ? &live_graphs : &live_graph_execs, 1,
                     __ATOMIC_SEQ_CST);
  g->magic = 0;
  free(g->nodes.at);
  free(g);
}
/* cuStreamBeginCapture_v2(stream, mode): not on the legacy stream, nor on one that captures. */
static fake_result stream_begin_capture(void* stream, int mode) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  if (mode < FAKE_CAPTURE_GLOBAL || mode > FAKE_CAPTURE_RELAXED) return FAKE_ERROR_INVALID_VALUE;
  fake_result result = FAKE_SUCCESS;
  pthread_mutex_lock(&driver_lock);
  if (is_legacy(stream) || stream == FAKE_STREAM_PER_THREAD) {
    result = FAKE_ERROR_CAPTURE_UNSUPPORTED;
  } else if (!stream_is_live(stream)) {
    result = FAKE_ERROR_INVALID_HANDLE;
  } else if (member_of(stream) != NULL) {
    result = FAKE_ERROR_ILLEGAL_STATE;
  } else {
    struct fake_capture* c = (struct fake_capture*)calloc(1, sizeof *c);
    const struct fake_member origin = {stream, c, 0, 0};
    if (c == NULL || !append((void**)&members, &member_count, &member_capacity, &origin,
                             sizeof origin)) {
      free(c);
      result = FAKE_ERROR_OUT_OF_MEMORY;
    } else {
      c->id = next_capture_id++;
      c->mode = mode;
      c->thread = pthread_self();
      c->origin = stream;
    }
  }
  pthread_mutex_unlock(&driver_lock);
  return result;
}
/* cuStreamEndCapture(stream, graph): only on the origin (..._UNMATCHED), from the thread that
 * began it unless RELAXED (..._WRONG_THREAD); both leave the capture going. Otherwise the capture
 * ends, every member leaving it: a graph, or NULL with ..._INVALIDATED (it was invalidated) or
 * ..._UNJOINED (a forked stream's work was not waited for). */
static fake_result stream_end_capture(void* stream, void** graph) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  if (graph == NULL) return FAKE_ERROR_INVALID_VALUE;
  *graph = NULL;
  fake_result result = FAKE_SUCCESS;
  pthread_mutex_lock(&driver_lock);
  struct fake_member* m = member_of(stream);
  if (!stream_is_live(stream)) {
    result = FAKE_ERROR_INVALID_HANDLE;
  } else if (m == NULL) {
    result = FAKE_ERROR_ILLEGAL_STATE;
  } else if (m->capture->origin != stream) {
    result = FAKE_ERROR_CAPTURE_UNMATCHED;
  } else if (m->capture->mode != FAKE_CAPTURE_RELAXED &&
             !pthread_equal(m->capture->thread, pthread_self())) {
    result = FAKE_ERROR_CAPTURE_WRONG_THREAD;
  } else {
    struct fake_capture* c = m->capture;
    result = c->invalidated ? FAKE_ERROR_CAPTURE_INVALIDATED : FAKE_SUCCESS;
    for (size_t i = 0; i < member_count && result == FAKE_SUCCESS; ++i) {
      if (members[i].capture == c && members[i].stream != c->origin &&
          members[i].ops > members[i].joined_ops)
        result = FAKE_ERROR_CAPTURE_UNJOINED;
    }
    if (result == FAKE_SUCCESS) {
      *graph = make_graph(FAKE_GRAPH_MAGIC, &c->nodes);
      if (*graph == NULL) result = FAKE_ERROR_OUT_OF_MEMORY;
    }
    end_capture_members(c);
  }
  pthread_mutex_unlock(&driver_lock);
  return result;
}
/* The capture status (NONE 0, ACTIVE 1, INVALIDATED 2) of a stream; the legacy stream while a
 * blocking stream captures is CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (without invalidating). Lock
 * held. */
static fake_result capture_status(void* stream, int* status, unsigned long long* id) {
  if (status == NULL) return FAKE_ERROR_INVALID_VALUE;
  if (is_legacy(stream) && any_blocking_member()) return FAKE_ERROR_CAPTURE_IMPLICIT;
  if (!stream_is_live(stream)) return FAKE_ERROR_INVALID_HANDLE;
  const struct fake_member* m = member_of(stream);
  *status = m == NULL ? 0 : m->capture->invalidated ? 2 : 1;
  if (id != NULL && m != NULL) *id = m->capture->id;
  return FAKE_SUCCESS;
}
static fake_result stream_is_capturing(void* stream, int* status) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  pthread_mutex_lock(&driver_lock);
  const fake_result result = capture_status(stream, status, NULL);
  pthread_mutex_unlock(&driver_lock);
  return result;
}
/* cuStreamGetCaptureInfo_v3: the status and id; no graph or dependencies are reported. */
static fake_result stream_get_capture_info(void* stream, int* status, unsigned long long* id,
                                           void** graph, const void** dependencies,
                                           const void** edge_data, size_t* count) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  if (graph != NULL) *graph = NULL;
  if (dependencies != NULL) *dependencies = NULL;
  if (edge_data != NULL) *edge_data = NULL;
  if (count != NULL) *count = 0;
  pthread_mutex_lock(&driver_lock);
  const fake_result result = capture_status(stream, status, id);
  pthread_mutex_unlock(&driver_lock);
  return result;
}
static fake_result graph_instantiate(void** exec, void* graph, unsigned long long flags) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  if (exec == NULL || flags != 0) return FAKE_ERROR_INVALID_VALUE;
  const struct fake_graph* g = live_graph(graph, FAKE_GRAPH_MAGIC);
  if (g == NULL) return FAKE_ERROR_INVALID_VALUE;
  *exec = make_graph(FAKE_EXEC_MAGIC, &g->nodes);
  return *exec != NULL ? FAKE_SUCCESS : FAKE_ERROR_OUT_OF_MEMORY;
}
static fake_result graph_destroy(void* graph) {
  struct fake_graph* g = live_graph(graph, FAKE_GRAPH_MAGIC);
  if (g == NULL) return FAKE_ERROR_INVALID_VALUE;
  free_graph(g);
  return FAKE_SUCCESS;
}
static fake_result graph_exec_destroy(void* exec) {
  struct fake_graph* g = live_graph(exec, FAKE_EXEC_MAGIC);
  if (g == NULL) return FAKE_ERROR_INVALID_VALUE;
  free_graph(g);
  return FAKE_SUCCESS;
}
/* cuGraphLaunch(exec, stream): the nodes run in order (a replay: counted), or are recorded into
 * the stream's capture. A node whose memory or kernel has gone since the capture is
 * CUDA_ERROR_ILLEGAL_ADDRESS, as the fault of a real replay surfaces. */
static fake_result graph_launch(void* exec, void* stream) {
  const fake_result r = need_primary();
  if (r != FAKE_SUCCESS) return r;
  const struct fake_graph* g = live_graph(exec, FAKE_EXEC_MAGIC);
  if (g == NULL) return FAKE_ERROR_INVALID_VALUE;
  fake_result result = FAKE_SUCCESS;
  pthread_mutex_lock(&driver_lock);
  struct fake_member* m = NULL;
  if (!stream_is_live(stream)) {
    result = FAKE_ERROR_INVALID_HANDLE;
  } else if ((m = capture_gate(stream, &result)), result != FAKE_SUCCESS) {
    /* refused */
  } else if (m != NULL) {
    for (size_t i = 0; i < g->nodes.count && result == FAKE_SUCCESS; ++i)
      result = record_node(m, &g->nodes.at[i]);
  } else {
    for (size_t i = 0; i < g->nodes.count && result == FAKE_SUCCESS; ++i)
      if (run_node(&g->nodes.at[i]) != FAKE_SUCCESS) result = FAKE_ERROR_ILLEGAL_ADDRESS;
    if (result == FAKE_SUCCESS) __atomic_add_fetch(&graph_launches, 1, __ATOMIC_SEQ_CST);
  }
  pthread_mutex_unlock(&driver_lock);
  return result;
}

static const struct {
  const char* symbol;
  void* fn;
} graph_entry_points[] = {
    {"cuStreamBeginCapture", (void*)&stream_begin_capture},
    {"cuStreamEndCapture", (void*)&stream_end_capture},
    {"cuStreamIsCapturing", (void*)&stream_is_capturing},
    {"cuStreamGetCaptureInfo", (void*)&stream_get_capture_info},
    {"cuGraphInstantiateWithFlags", (void*)&graph_instantiate},
    {"cuGraphDestroy", (void*)&graph_destroy},
    {"cuGraphLaunch", (void*)&graph_launch},
    {"cuGraphExecDestroy", (void*)&graph_exec_destroy},
};

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
    {"cuMemAlloc", (void*)&mem_alloc},
    {"cuMemAllocManaged", (void*)&mem_alloc_managed},
    {"cuMemFree", (void*)&mem_free},
    {"cuMemHostAlloc", (void*)&mem_host_alloc},
    {"cuMemFreeHost", (void*)&mem_free_host},
    {"cuMemHostGetDevicePointer", (void*)&mem_host_get_device_pointer},
    {"cuPointerGetAttribute", (void*)&pointer_get_attribute},
    {"cuMemcpyHtoD", (void*)&memcpy_htod},
    {"cuMemcpyDtoH", (void*)&memcpy_dtoh},
    {"cuMemcpyDtoD", (void*)&memcpy_dtod},
    {"cuMemcpyHtoDAsync", (void*)&memcpy_htod_async},
    {"cuMemcpyDtoHAsync", (void*)&memcpy_dtoh_async},
    {"cuMemcpyDtoDAsync", (void*)&memcpy_dtod_async},
    {"cuMemcpy2DAsync", (void*)&memcpy_2d_async},
    {"cuMemsetD8", (void*)&memset_d8},
    {"cuMemsetD8Async", (void*)&memset_d8_async},
    {"cuCtxSynchronize", (void*)&ctx_synchronize},
    {"cuStreamCreate", (void*)&stream_create},
    {"cuStreamDestroy", (void*)&stream_destroy},
    {"cuStreamSynchronize", (void*)&stream_synchronize},
    {"cuModuleLoadData", (void*)&module_load_data},
    {"cuModuleLoadDataEx", (void*)&module_load_data_ex},
    {"cuModuleUnload", (void*)&module_unload},
    {"cuModuleGetFunction", (void*)&module_get_function},
    {"cuModuleGetGlobal", (void*)&module_get_global},
    {"cuModuleGetFunctionCount", (void*)&module_get_function_count},
    {"cuModuleEnumerateFunctions", (void*)&module_enumerate_functions},
    {"cuFuncGetName", (void*)&func_get_name},
    {"cuLaunchKernel", (void*)&launch_kernel},
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
    if (device_mode()) {
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
      if (device_mode()) *pfn = event_entry_points[i].fn;
    }
    for (size_t i = 0; i < sizeof graph_entry_points / sizeof graph_entry_points[0]; ++i) {
      if (strcmp(symbol, graph_entry_points[i].symbol) != 0) continue;
      if (mode_is("device_no_graphs")) { /* an older driver, or a shim without graphs */
        *pfn = NULL;
        if (status != NULL) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
        return FAKE_ERROR_NOT_FOUND;
      }
      if (device_mode()) *pfn = graph_entry_points[i].fn;
    }
  }
  if (status != NULL) *status = 0; /* CU_GET_PROC_ADDRESS_SUCCESS */
  return FAKE_SUCCESS;
}
