// SPDX-License-Identifier: Apache-2.0
// The HIP runtime loader: dlopen, entry points, hipInit and the device count, once per process.
#include "driver.hpp"

#include <dlfcn.h>
#include <stdlib.h>  // secure_getenv

#include <array>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string_view>
#include <utility>

#include "failure.hpp"

namespace gpuplug::hip {
namespace {

// Tried in order: the unversioned name (the development symlink, i.e. the system's chosen ROCm),
// then the newest major first, so that a machine with both picks the runtime that knows the
// newest GPUs. All through the loader's search path (LD_LIBRARY_PATH, ld.so.cache, ...).
constexpr std::array<const char*, 4> kLibraryNames = {"libamdhip64.so", "libamdhip64.so.7",
                                                      "libamdhip64.so.6", "libamdhip64.so.5"};
// Then the same names in ROCm's own folders: its installer does not always add them to the
// loader's path. $ROCM_PATH/lib first (read with secure_getenv: ignored in setuid programs),
// then the default prefix.
constexpr const char* kRocmPathVariable = "ROCM_PATH";
constexpr const char* kDefaultRocmLib = "/opt/rocm/lib";

// The one process-wide DriverApi and the flag that builds it. Both are constant-initialized and
// trivially destructible (see DriverApi), so neither runs code at load or at exit.
constinit DriverApi g_driver{};
constinit std::once_flag g_driver_once{};

void set_message(DriverApi& api, gpuplug_probe_reason_t reason, const std::string& message) {
  api.reason = reason;
  std::snprintf(api.message, sizeof api.message, "%s", message.c_str());
}

// "hipInit: hipErrorNoDevice (no ROCm-capable device is detected)", with the names of `api`:
// describe_error's text, usable while `api` is being loaded.
std::string error_text(const DriverApi& api, std::string_view operation, hipError_t error) {
  const char* name = api.get_error_name != nullptr ? api.get_error_name(error) : nullptr;
  const char* text = api.get_error_string != nullptr ? api.get_error_string(error) : nullptr;
  std::string out = std::string(operation) + ": ";
  out += name != nullptr ? name : "hipError_t " + std::to_string(static_cast<int>(error));
  if (text != nullptr && *text != '\0' && (name == nullptr || std::strcmp(name, text) != 0))
    out += std::string(" (") + text + ")";
  return out;
}

// "5.2" for 50221153 (HIP_VERSION = major * 10000000 + minor * 100000 + patch).
std::string version_text(int version) {
  return std::to_string(version / 10000000) + "." + std::to_string(version / 100000 % 100);
}

// Tries every place in order (see kLibraryNames) and returns the first runtime that loads, its
// name or path in api.library. On failure, `places` lists every place looked in and `why` holds
// the most telling dlerror: one about a library itself beats "no such file".
void* open_runtime(DriverApi& api, std::string& places, std::string& why) {
  auto attempt = [&](const std::string& name) -> void* {
    void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) {
      std::snprintf(api.library, sizeof api.library, "%s", name.c_str());
      return library;
    }
    const char* error = dlerror();  // NOLINT(concurrency-mt-unsafe): runs once, under call_once
    std::string text = error != nullptr ? error : name;
    if (why.empty() || (why.find("No such file") != std::string::npos &&
                        text.find("No such file") == std::string::npos))
      why = std::move(text);
    return nullptr;
  };
  for (const char* name : kLibraryNames)
    if (void* library = attempt(name)) return library;
  places = "the loader's path";
  std::string folders[2];
  if (const char* rocm = ::secure_getenv(kRocmPathVariable); rocm != nullptr && *rocm == '/') {
    std::string folder = rocm;
    while (folder.size() > 1 && folder.back() == '/') folder.pop_back();
    folders[0] = folder + "/lib";
  }
  if (folders[0] != kDefaultRocmLib) folders[1] = kDefaultRocmLib;
  for (const std::string& folder : folders) {
    if (folder.empty()) continue;
    places += ", " + folder;
    if (&folder == &folders[0]) places += " ($" + std::string(kRocmPathVariable) + "/lib)";
    for (const char* name : kLibraryNames)
      if (void* library = attempt(folder + "/" + name)) return library;
  }
  return nullptr;
}

void load(DriverApi& api) {
  std::string places;
  std::string why;
  void* library = open_runtime(api, places, why);
  if (library == nullptr) {
    // Every place, so that the fix (install ROCm, set ROCM_PATH, or LD_LIBRARY_PATH) is plain.
    set_message(api, GPUPLUG_PROBE_DRIVER_MISSING,
                "driver missing: libamdhip64.so not found (looked for libamdhip64.so, .so.7, "
                ".so.6 and .so.5 in " +
                    places + "; " + why + ")");
    return;
  }

  // Required entry points: a runtime lacking one is too old for this plugin.
  std::string missing;
#define GPUPLUG_HIP_RESOLVE(member, symbol)                                     \
  api.member = reinterpret_cast<decltype(api.member)>(dlsym(library, #symbol)); \
  if (api.member == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(#symbol);
  GPUPLUG_HIP_REQUIRED_ENTRY_POINTS(GPUPLUG_HIP_RESOLVE)
  GPUPLUG_HIP_RESOLVE(malloc, hipMalloc)
  GPUPLUG_HIP_RESOLVE(malloc_managed, hipMallocManaged)
#undef GPUPLUG_HIP_RESOLVE
#define GPUPLUG_HIP_RESOLVE_OPTIONAL(member, symbol) \
  api.member = reinterpret_cast<decltype(api.member)>(dlsym(library, #symbol));
  GPUPLUG_HIP_OPTIONAL_ENTRY_POINTS(GPUPLUG_HIP_RESOLVE_OPTIONAL)
  GPUPLUG_HIP_RESOLVE_OPTIONAL(host_malloc, hipHostMalloc)
#undef GPUPLUG_HIP_RESOLVE_OPTIONAL
  if (!missing.empty()) {
    set_message(api, GPUPLUG_PROBE_DRIVER_TOO_OLD,
                "driver too old: " + std::string(api.library) + " lacks " + missing +
                    " (gpuplug needs a HIP runtime of ROCm 5.0 or newer)");
    return;
  }
  if (api.runtime_get_version(&api.runtime_version) != hipSuccess) api.runtime_version = 0;
  const std::string runtime = "HIP runtime " +
                              (api.runtime_version > 0 ? version_text(api.runtime_version)
                                                       : std::string("(version unknown)")) +
                              " (" + api.library + ")";

  // Without a GPU, hipInit answers hipErrorInvalidDevice on some releases and hipGetDeviceCount
  // hipErrorNoDevice: the count is the authority, hipInit's result only explains other failures.
  const hipError_t init = api.init(0);
  int count = 0;
  const hipError_t counted = api.get_device_count(&count);
  if (counted == hipErrorNoDevice || (counted == hipSuccess && count <= 0)) {
    set_message(api, GPUPLUG_PROBE_NO_DEVICE, "no AMD GPU (hipErrorNoDevice); " + runtime);
    return;
  }
  if (counted != hipSuccess) {
    set_message(api, GPUPLUG_PROBE_ERROR,
                error_text(api, "hipGetDeviceCount", counted) + "; " + runtime);
    return;
  }
  if (init != hipSuccess) {
    set_message(api, GPUPLUG_PROBE_ERROR, error_text(api, "hipInit", init) + "; " + runtime);
    return;
  }
  api.device_count = count;
  set_message(api, GPUPLUG_PROBE_AVAILABLE,
              runtime + ", " + std::to_string(count) + (count == 1 ? " device" : " devices"));
}

}  // namespace

const DriverApi& driver() noexcept {
  std::call_once(g_driver_once, [] {
    try {
      load(g_driver);
    } catch (...) {  // std::bad_alloc while building a message: report, never throw
      g_driver.reason = GPUPLUG_PROBE_ERROR;
      std::snprintf(g_driver.message, sizeof g_driver.message, "loading the HIP runtime failed");
    }
  });
  return g_driver;
}

std::string describe_error(std::string_view operation, hipError_t result) {
  return error_text(driver(), operation, result);
}

gpuplug_status_t status_of(hipError_t error, bool launching) noexcept {
  switch (error) {
    case hipSuccess:
      return GPUPLUG_STATUS_SUCCESS;
    case hipErrorOutOfMemory:
      return GPUPLUG_STATUS_OUT_OF_MEMORY;
    // A kernel that faulted surfaces at the next synchronizing call, whatever it is.
    case hipErrorIllegalAddress:
    case hipErrorLaunchFailure:
    case hipErrorAssert:
    case hipErrorLaunchTimeOut:
    case hipErrorPriorLaunchFailure:
      return GPUPLUG_STATUS_LAUNCH_FAILED;
    // What ends or poisons a capture, as for CUDA's 900-907 (the same numbers).
    case hipErrorStreamCaptureUnsupported:
    case hipErrorStreamCaptureInvalidated:
    case hipErrorStreamCaptureMerge:
    case hipErrorStreamCaptureUnjoined:
    case hipErrorStreamCaptureIsolation:
    case hipErrorStreamCaptureImplicit:
    case hipErrorCapturedEvent:
      return GPUPLUG_STATUS_CAPTURE_INVALIDATED;
    case hipErrorStreamCaptureUnmatched:
    case hipErrorStreamCaptureWrongThread:
      return GPUPLUG_STATUS_INVALID_ARGUMENT;
    default:
      break;
  }
  if (launching) return GPUPLUG_STATUS_LAUNCH_FAILED;
  switch (error) {
    case hipErrorInvalidValue:
    case hipErrorInvalidDevicePointer:
    case hipErrorInvalidMemcpyDirection:
    case hipErrorInvalidHandle:
    case hipErrorInvalidSymbol:
      return GPUPLUG_STATUS_INVALID_ARGUMENT;
    case hipErrorNotFound:
      return GPUPLUG_STATUS_NOT_FOUND;
    case hipErrorNotSupported:
      return GPUPLUG_STATUS_UNSUPPORTED;
    case hipErrorNoDevice:
    case hipErrorInvalidDevice:
    case hipErrorInsufficientDriver:
    case hipErrorNotInitialized:
    case hipErrorDeinitialized:
      return GPUPLUG_STATUS_UNAVAILABLE;
    case hipErrorInvalidImage:
    case hipErrorNoBinaryForGpu:
    case hipErrorInvalidKernelFile:
    case hipErrorSharedObjectInitFailed:
    case hipErrorSharedObjectSymbolNotFound:
      return GPUPLUG_STATUS_INVALID_IMAGE;
    default:
      return GPUPLUG_STATUS_DEVICE_ERROR;
  }
}

void throw_error(hipError_t result, std::string_view operation, bool launching) {
  sdk::fail(status_of(result, launching), describe_error(operation, result));
}

}  // namespace gpuplug::hip
