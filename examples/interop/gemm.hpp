// SPDX-License-Identifier: Apache-2.0
// gpuplug's gemm_f32 and the vendor's BLAS on the same buffers and stream, checked and timed.
#pragma once

#include <cstdint>
#include <gpuplug/backend.hpp>

namespace interop {

struct GemmShape {
  std::uint32_t m = 256;
  std::uint32_t n = 256;
  std::uint32_t k = 256;
};

/// Runs C = A * B through gpuplug's gemm module and through the vendor BLAS of `gpu` on one
/// gpuplug stream, compares the two results element by element, and prints the speed of each
/// (median of `reps` runs). Returns 0 when they agree, 1 when they differ, and 0 with a
/// "skipped" line when the backend's vendor has no BLAS here. Throws gpuplug::Error or
/// std::runtime_error on a failing call.
int compare_gemm(gpuplug::GpuBackend& gpu, GemmShape shape, unsigned reps);

}  // namespace interop
