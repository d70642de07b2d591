// SPDX-License-Identifier: Apache-2.0
// The CUDA driver loader: dlopen libcuda.so.1, check its version, resolve entry points, cuInit.
#include "driver.hpp"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <type_traits>

#include "failure.hpp"

#ifndef GPUPLUG_CUDA_KERNEL_TOOLKIT_VERSION
#error "plugins/cuda/CMakeLists.txt defines GPUPLUG_CUDA_KERNEL_TOOLKIT_VERSION from nvcc --version"
#endif

namespace gpuplug::cuda {
namespace {

constexpr const char* kLibrary = "libcuda.so.1";

// The primary contexts this plugin holds, one slot per device ordinal (see
// retained_primary_context). Constant-initialised and trivially destructible: no code at load
// or at exit. A slot, once set, is never cleared.
struct PrimaryContextTable {
  static constexpr std::uint32_t kMaxDevices = 1024;
  std::mutex mutex;
  CUcontext contexts[kMaxDevices] = {};
};
static_assert(std::is_trivially_destructible_v<PrimaryContextTable>,
              "plugins keep no static objects with destructors");
constinit PrimaryContextTable g_primary_contexts{};

// The bootstrap entry points, resolved with dlsym because they predate cuGetProcAddress (or are
// how it is reached). These raw names are ABI-stable exports of every libcuda.
using DriverGetVersionFn = CUresult (*)(int*);
using InitFn = CUresult (*)(unsigned int);
using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);

void set_message(DriverApi& api, gpuplug_probe_reason_t reason, const char* format, ...)
    __attribute__((format(printf, 3, 4)));

void set_message(DriverApi& api, gpuplug_probe_reason_t reason, const char* format, ...) {
  api.reason = reason;
  va_list args;
  va_start(args, format);
  std::vsnprintf(api.message, sizeof api.message, format, args);
  va_end(args);
}

// "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)" into buf, using the driver's own
// names when they are resolved already, else the number.
void error_text(const DriverApi& api, CUresult result, char* buf, std::size_t size) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.get_error_name != nullptr) api.get_error_name(result, &name);
  if (api.get_error_string != nullptr) api.get_error_string(result, &text);
  if (name != nullptr && text != nullptr) {
    std::snprintf(buf, size, "%s (%s)", name, text);
  } else {
    std::snprintf(buf, size, "CUresult %d", static_cast<int>(result));
  }
}

DriverApi load() noexcept {
  DriverApi api;
  // dlerror's state is per thread in glibc, and this runs once, under the static's guard.
  dlerror();  // NOLINT(concurrency-mt-unsafe): clears a stale message
  // RTLD_LOCAL: the driver's symbols must not leak into the process's global namespace.
  void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();  // NOLINT(concurrency-mt-unsafe): see above
    set_message(api, GPUPLUG_PROBE_DRIVER_MISSING, "driver missing: %s not found (%s)", kLibrary,
                why != nullptr ? why : "no reason given");
    return api;
  }
  // From here on the handle is deliberately kept for the life of the process (see driver.hpp).
  auto driver_get_version = reinterpret_cast<DriverGetVersionFn>(dlsym(lib, "cuDriverGetVersion"));
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto get_proc_address = reinterpret_cast<GetProcAddressFn>(dlsym(lib, "cuGetProcAddress_v2"));
  if (driver_get_version == nullptr || init == nullptr) {
    set_message(api, GPUPLUG_PROBE_ERROR, "%s is not a usable CUDA driver: it lacks %s", kLibrary,
                driver_get_version == nullptr ? "cuDriverGetVersion" : "cuInit");
    return api;
  }
  // cuDriverGetVersion needs no cuInit, so an old driver is named even where cuInit would fail.
  if (driver_get_version(&api.driver_version) != CUDA_SUCCESS) api.driver_version = 0;
  const int needed = minimum_driver_version();
  if (api.driver_version < needed || get_proc_address == nullptr) {
    set_message(api, GPUPLUG_PROBE_DRIVER_TOO_OLD,
                "driver too old: the installed CUDA driver supports CUDA %s (%d); the kernels were "
                "built with CUDA %s and need a driver for CUDA %s (%d) or newer",
                version_text(api.driver_version).c_str(), api.driver_version,
                version_text(kernel_toolkit_version()).c_str(), version_text(needed).c_str(),
                needed);
    return api;
  }

  // The rest through cuGetProcAddress at the header's CUDA_VERSION, so each name resolves to the
  // ABI version whose prototype decltype() gave the member. LEGACY_STREAM: stream 0 is the
  // legacy default stream, as the gpuplug ABI specifies.
  const char* missing = nullptr;
  auto resolve = [&](const char* symbol, bool required) -> void* {
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void* fn = nullptr;
    if (get_proc_address(symbol, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) !=
            CUDA_SUCCESS ||
        found != CU_GET_PROC_ADDRESS_SUCCESS) {
      fn = nullptr;
    }
    if (fn == nullptr && required && missing == nullptr) missing = symbol;
    return fn;
  };
#define GPUPLUG_CUDA_RESOLVE_REQUIRED(member, symbol) \
  api.member = reinterpret_cast<decltype(api.member)>(resolve(#symbol, true));
#define GPUPLUG_CUDA_RESOLVE_OPTIONAL(member, symbol) \
  api.member = reinterpret_cast<decltype(api.member)>(resolve(#symbol, false));
  GPUPLUG_CUDA_REQUIRED_ENTRY_POINTS(GPUPLUG_CUDA_RESOLVE_REQUIRED)
  GPUPLUG_CUDA_OPTIONAL_ENTRY_POINTS(GPUPLUG_CUDA_RESOLVE_OPTIONAL)
#undef GPUPLUG_CUDA_RESOLVE_REQUIRED
#undef GPUPLUG_CUDA_RESOLVE_OPTIONAL
  if (missing != nullptr) {
    set_message(api, GPUPLUG_PROBE_ERROR, "%s (CUDA %s) does not provide %s", kLibrary,
                version_text(api.driver_version).c_str(), missing);
    return api;
  }

  char why[256];
  if (const CUresult r = init(0); r != CUDA_SUCCESS) {
    error_text(api, r, why, sizeof why);
    // NO_DEVICE: a driver but no GPU (or none visible, e.g. CUDA_VISIBLE_DEVICES=""). Anything
    // else (e.g. CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: the kernel module and libcuda differ) is a
    // failure whose name and description say what to fix.
    const gpuplug_probe_reason_t reason =
        r == CUDA_ERROR_NO_DEVICE ? GPUPLUG_PROBE_NO_DEVICE : GPUPLUG_PROBE_ERROR;
    const char* what =
        reason == GPUPLUG_PROBE_NO_DEVICE ? "no device" : "driver failed to initialise";
    set_message(api, reason, "%s: cuInit: %s", what, why);
    return api;
  }
  if (const CUresult r = api.device_get_count(&api.device_count); r != CUDA_SUCCESS) {
    error_text(api, r, why, sizeof why);
    api.device_count = 0;
    set_message(api, GPUPLUG_PROBE_ERROR, "cuDeviceGetCount: %s", why);
    return api;
  }
  if (api.device_count <= 0) {
    api.device_count = 0;
    set_message(api, GPUPLUG_PROBE_NO_DEVICE, "no device: the CUDA driver %s reports no device",
                version_text(api.driver_version).c_str());
    return api;
  }
  set_message(api, GPUPLUG_PROBE_AVAILABLE, "CUDA driver %s, %d device%s",
              version_text(api.driver_version).c_str(), api.device_count,
              api.device_count == 1 ? "" : "s");
  return api;
}

}  // namespace

const DriverApi& driver() noexcept {
  // A function-local static: initialised once, thread-safely, on first use; trivially
  // destructible, so nothing runs at exit (see DriverApi).
  static const DriverApi api = load();
  return api;
}

CUcontext retained_primary_context(const DriverApi& api, std::uint32_t ordinal, CUdevice device) {
  PrimaryContextTable& table = g_primary_contexts;
  if (ordinal >= PrimaryContextTable::kMaxDevices)
    sdk::fail(GPUPLUG_STATUS_UNSUPPORTED,
              "CUDA device " + std::to_string(ordinal) + ": gpuplug supports at most " +
                  std::to_string(PrimaryContextTable::kMaxDevices) + " devices per process");
  const std::lock_guard lock(table.mutex);
  CUcontext& slot = table.contexts[ordinal];
  if (slot == nullptr) {
    CUcontext context = nullptr;
    check(api.primary_ctx_retain(&context, device), "cuDevicePrimaryCtxRetain");
    slot = context;
  }
  return slot;
}

CUcontext held_primary_context(std::uint32_t ordinal) noexcept {
  PrimaryContextTable& table = g_primary_contexts;
  if (ordinal >= PrimaryContextTable::kMaxDevices) return nullptr;
  const std::lock_guard lock(table.mutex);
  return table.contexts[ordinal];
}

int kernel_toolkit_version() noexcept { return GPUPLUG_CUDA_KERNEL_TOOLKIT_VERSION; }

int minimum_driver_version() noexcept { return kernel_toolkit_version() / 1000 * 1000; }

std::string version_text(int cuda_version) {
  if (cuda_version <= 0) return "unknown";
  return std::to_string(cuda_version / 1000) + "." + std::to_string(cuda_version % 1000 / 10);
}

std::string describe_error(std::string_view operation, CUresult result) {
  char why[256];
  error_text(driver(), result, why, sizeof why);
  return std::string(operation) + ": " + why;
}

gpuplug_status_t status_of(CUresult result, bool launching) noexcept {
  switch (result) {
    case CUDA_SUCCESS:
      return GPUPLUG_STATUS_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return GPUPLUG_STATUS_OUT_OF_MEMORY;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
      return GPUPLUG_STATUS_INVALID_ARGUMENT;
    case CUDA_ERROR_NOT_FOUND:
      return GPUPLUG_STATUS_NOT_FOUND;
    case CUDA_ERROR_NOT_SUPPORTED:
      return GPUPLUG_STATUS_UNSUPPORTED;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    case CUDA_ERROR_STREAM_CAPTURE_MERGE:
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
    case CUDA_ERROR_CAPTURED_EVENT:
      return GPUPLUG_STATUS_CAPTURE_INVALIDATED;
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
      return GPUPLUG_STATUS_INVALID_ARGUMENT;
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_INVALID_SOURCE:
    case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:
      return GPUPLUG_STATUS_INVALID_IMAGE;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
      return GPUPLUG_STATUS_UNAVAILABLE;
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
      return GPUPLUG_STATUS_LAUNCH_FAILED;
    default:
      return launching ? GPUPLUG_STATUS_LAUNCH_FAILED : GPUPLUG_STATUS_DEVICE_ERROR;
  }
}

void throw_error(CUresult result, std::string_view operation, bool launching) {
  sdk::fail(status_of(result, launching), describe_error(operation, result));
}

}  // namespace gpuplug::cuda
