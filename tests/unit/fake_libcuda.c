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
 * It never pretends to have a device: entry points other than the few above return
 * CUDA_ERROR_NOT_SUPPORTED and are never called in these modes.
 */

#include <stdlib.h>
#include <string.h>

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

static fake_result get_error_name(fake_result error, const char** name) {
  switch (error) {
    case FAKE_ERROR_NO_DEVICE:
      *name = "CUDA_ERROR_NO_DEVICE";
      return FAKE_SUCCESS;
    case FAKE_ERROR_UNKNOWN:
      *name = "CUDA_ERROR_UNKNOWN";
      return FAKE_SUCCESS;
    default:
      *name = NULL;
      return 1; /* CUDA_ERROR_INVALID_VALUE */
  }
}

static fake_result get_error_string(fake_result error, const char** text) {
  switch (error) {
    case FAKE_ERROR_NO_DEVICE:
      *text = "no CUDA-capable device is detected";
      return FAKE_SUCCESS;
    case FAKE_ERROR_UNKNOWN:
      *text = "unknown error";
      return FAKE_SUCCESS;
    default:
      *text = NULL;
      return 1;
  }
}

static fake_result device_get_count(int* count) {
  *count = 0;
  return FAKE_SUCCESS;
}

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
  }
  if (status != NULL) *status = 0; /* CU_GET_PROC_ADDRESS_SUCCESS */
  return FAKE_SUCCESS;
}
