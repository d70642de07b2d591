// SPDX-License-Identifier: Apache-2.0
// A vendor's single-precision GEMM on memory gpuplug allocated, on one of gpuplug's streams.
#pragma once

#include <cstdint>
#include <functional>
#include <gpuplug/backend.hpp>
#include <string>

namespace interop {

/// C = A * B, row-major (A is M x K, B is K x N, C is M x N), as gpuplug's gemm_f32 computes it.
/// The pointers are native (GpuBackend::native_pointer).
using Sgemm = std::function<void(std::uint32_t M, std::uint32_t N, std::uint32_t K, const float* A,
                                 const float* B, float* C)>;

struct VendorBlas {
  std::string name;  // the library and its version, e.g. "cuBLAS 130100"
  /// Queues the GEMM on the stream the library was made for (cuBLAS), or runs it before
  /// returning (OpenBLAS on host memory). Throws std::runtime_error naming the call on failure.
  Sgemm sgemm;
};

/// The BLAS of `gpu`'s vendor, bound to `stream` (a gpuplug Stream; its native handle goes to
/// the library). Returns false and says why in `why_not` when there is none here: a vendor this
/// build has no BLAS for, or a library that cannot start.
bool make_vendor_blas(gpuplug::GpuBackend& gpu, gpuplug::Stream stream, VendorBlas& out,
                      std::string& why_not);

// One per library, each in its own file and compiled only when the library was found.
bool make_openblas(VendorBlas& out, std::string& why_not);
bool make_cublas(gpuplug::GpuBackend& gpu, gpuplug::Stream stream, VendorBlas& out,
                 std::string& why_not);

}  // namespace interop
