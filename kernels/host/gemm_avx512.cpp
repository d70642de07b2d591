// SPDX-License-Identifier: Apache-2.0
// The gemm block kernel for AVX-512 (F): a 16 x 16 register tile, one zmm of C per row, A and B
// packed per block. Compiled with a target attribute, not a flag, so the rest of the
// module stays baseline x86-64; gemm.cpp calls it only where the CPU has AVX-512F and FMA.
#include "gemm_block.hpp"

#if defined(GPUPLUG_HOST_GEMM_X86)
#include <immintrin.h>

#define GPUPLUG_GEMM_TARGET __attribute__((target("avx512f,avx2,fma")))

namespace {

/// kMR rows x 16 columns of C in zmm registers; per k, one load of packed B and kMR broadcasts
/// of packed A, folded into the FMAs; C's loads and stores masked at the right edge.
struct MicroAvx512 {
  static constexpr int kMR = 16;
  static constexpr std::uint64_t kNR = 16;
  static constexpr std::uint64_t kKC = 256;

  GPUPLUG_GEMM_TARGET static void run(std::uint64_t kc, const float* ap, const float* bp, float* c,
                                      std::uint64_t ldc, unsigned rows, unsigned cols,
                                      bool accumulate) noexcept {
    const auto mask = static_cast<__mmask16>(cols >= 16 ? 0xFFFFu : (1u << cols) - 1u);
    __m512 acc[kMR];
#pragma GCC unroll 16
    for (int i = 0; i < kMR; ++i) {
      acc[i] = accumulate && static_cast<unsigned>(i) < rows
                   ? _mm512_maskz_loadu_ps(mask, c + i * ldc)
                   : _mm512_setzero_ps();
    }
    for (std::uint64_t k = 0; k < kc; ++k) {
      const __m512 b = _mm512_load_ps(bp + k * 16);
#pragma GCC unroll 16
      for (int i = 0; i < kMR; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(ap[i]), b, acc[i]);
      ap += kMR;
    }
#pragma GCC unroll 16
    for (int i = 0; i < kMR; ++i) {
      if (static_cast<unsigned>(i) < rows) _mm512_mask_storeu_ps(c + i * ldc, mask, acc[i]);
    }
  }
};

}  // namespace

#include "gemm_driver.inl"

namespace gpuplug::host_gemm {
GPUPLUG_GEMM_TARGET void block_avx512(const BlockJob& job) noexcept { run_block<MicroAvx512>(job); }
}  // namespace gpuplug::host_gemm

#endif
