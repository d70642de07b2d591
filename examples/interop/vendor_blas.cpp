// SPDX-License-Identifier: Apache-2.0
// Picks the vendor BLAS from the backend's native handles (vendor_blas.hpp).
#include "vendor_blas.hpp"

namespace interop {

bool make_vendor_blas(gpuplug::GpuBackend& gpu, gpuplug::Stream stream, VendorBlas& out,
                      std::string& why_not) {
  // The vendor, not the plugin's name: a renamed or third-party CUDA plugin still gets cuBLAS.
  const std::string vendor = gpu.native(stream).vendor;
  if (vendor == "host") {
#ifdef GPUPLUG_INTEROP_OPENBLAS
    return make_openblas(out, why_not);
#else
    why_not = "this build found no OpenBLAS (install libopenblas-dev and reconfigure)";
    return false;
#endif
  }
  if (vendor == "cuda") {
#ifdef GPUPLUG_INTEROP_CUBLAS
    return make_cublas(gpu, stream, out, why_not);
#else
    why_not = "this build found no cuBLAS (the CUDA toolkit's cublas_v2.h and libcublas)";
    return false;
#endif
  }
  if (vendor == "hip") {
    why_not = "rocBLAS is not part of this example (Debian 12 has no rocBLAS package)";
    return false;
  }
  why_not = "no vendor BLAS is known for vendor '" + vendor + "'";
  return false;
}

}  // namespace interop
