// SPDX-License-Identifier: Apache-2.0
// OpenBLAS's sgemm on the host backend's memory (vendor_blas.hpp).
#include <cblas.h>

#include <cstddef>
#include <string>

#include "vendor_blas.hpp"

namespace interop {

bool make_openblas(VendorBlas& out, std::string& /*why_not*/) {
  // OpenBLAS takes no stream: the caller has synchronized gpuplug's stream before the call
  // (docs/interop.md, "Stream rules"), and the result is complete when cblas_sgemm returns.
  // openblas_get_config() is "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the name and version.
  const std::string config = openblas_get_config();
  const std::size_t second_space = config.find(' ', config.find(' ') + 1);
  out.name = config.substr(0, second_space);
  out.sgemm = [](std::uint32_t M, std::uint32_t N, std::uint32_t K, const float* A, const float* B,
                 float* C) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(M),
                static_cast<blasint>(N), static_cast<blasint>(K), 1.0f, A, static_cast<blasint>(K), B,
                static_cast<blasint>(N), 0.0f, C, static_cast<blasint>(N));
  };
  return true;
}

}  // namespace interop
