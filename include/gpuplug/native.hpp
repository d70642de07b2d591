// SPDX-License-Identifier: Apache-2.0
// NativeHandles: what a vendor library needs to work beside a backend (ABI 1.2, interop handles).
// The lifetimes of the handles are in docs/interop.md, "Native handles and import".
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

#include <cstdint>
#include <string>

GPUPLUG_API_BEGIN
namespace gpuplug {

/// The vendor runtime's view of a backend and one of its streams (GpuBackend::native).
/// The pointers are the runtime's own handle types cast to void*: CUcontext / CUstream on CUDA,
/// hipStream_t on HIP. gpuplug keeps ownership of every handle it returns here.
struct NativeHandles {
  std::string vendor;       // "cuda", "hip", "host" (the plugin's runtime family, not its file name)
  std::int32_t device = 0;  // the ordinal the vendor runtime uses (CUdevice, hipDevice_t)
  void* context = nullptr;  // CUcontext (the primary context the backend uses); null elsewhere
  void* stream = nullptr;   // CUstream / hipStream_t of the Stream asked for (null = the
                            // runtime's default stream); host: the executor queue id
};

}  // namespace gpuplug
GPUPLUG_API_END
