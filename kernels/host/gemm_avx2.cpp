// SPDX-License-Identifier: Apache-2.0
// The gemm block kernel for AVX2 + FMA: a 6 x 16 register tile (12 ymm of C, 2 of B, 1 of A),
// A and B packed per block. Compiled with a target attribute, not a flag, so the rest
// of the module stays baseline x86-64; gemm.cpp calls it only where the CPU has AVX2 and FMA.
#include "gemm_block.hpp"

#if defined(GPUPLUG_HOST_GEMM_X86)
#include <immintrin.h>

#define GPUPLUG_GEMM_TARGET __attribute__((target("avx2,fma")))

namespace {

/// The first `cols` lanes of a ymm, as a vmaskmovps mask (sign bit set = lane used).
GPUPLUG_GEMM_TARGET inline __m256i lane_mask(int cols) noexcept {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), lane);
}

struct MicroAvx2 {
  static constexpr int kMR = 6;
  static constexpr std::uint64_t kNR = 16;
  static constexpr std::uint64_t kKC = 128;
  static constexpr bool kPack16 = false;

  /// Full strips load and store C plainly (vmaskmovps is slow on some CPUs, a store very); the
  /// right edge through masks, which never touch memory past the last column.
  template <bool kFull>
  GPUPLUG_GEMM_TARGET static __m256 load(const float* p, __m256i mask) noexcept {
    return kFull ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
  }
  template <bool kFull>
  GPUPLUG_GEMM_TARGET static void store(float* p, __m256i mask, __m256 v) noexcept {
    if (kFull)
      _mm256_storeu_ps(p, v);
    else
      _mm256_maskstore_ps(p, mask, v);
  }

  template <bool kFull>
  GPUPLUG_GEMM_TARGET static void tile(std::uint64_t kc, const float* ap, const float* bp,
                                       float* c, std::uint64_t ldc, unsigned rows, unsigned cols,
                                       bool accumulate) noexcept {
    const __m256i mask[2] = {lane_mask(static_cast<int>(cols)),
                             lane_mask(static_cast<int>(cols) - 8)};
    __m256 acc[kMR][2];
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      const bool live = accumulate && static_cast<unsigned>(i) < rows;
      acc[i][0] = live ? load<kFull>(c + i * ldc, mask[0]) : _mm256_setzero_ps();
      acc[i][1] = live ? load<kFull>(c + i * ldc + 8, mask[1]) : _mm256_setzero_ps();
    }
    for (std::uint64_t k = 0; k < kc; ++k) {
      const __m256 b0 = _mm256_load_ps(bp + k * 16);
      const __m256 b1 = _mm256_load_ps(bp + k * 16 + 8);
#pragma GCC unroll 8
      for (int i = 0; i < kMR; ++i) {
        const __m256 a = _mm256_broadcast_ss(ap + i);
        acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
      }
      ap += kMR;
    }
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      if (static_cast<unsigned>(i) >= rows) continue;
      store<kFull>(c + i * ldc, mask[0], acc[i][0]);
      store<kFull>(c + i * ldc + 8, mask[1], acc[i][1]);
    }
  }

  GPUPLUG_GEMM_TARGET static void run(std::uint64_t kc, const float* ap, const float* bp, float* c,
                                      std::uint64_t ldc, unsigned rows, unsigned cols,
                                      bool accumulate) noexcept {
    if (cols == kNR)
      tile<true>(kc, ap, bp, c, ldc, rows, cols, accumulate);
    else
      tile<false>(kc, ap, bp, c, ldc, rows, cols, accumulate);
  }
};

}  // namespace

#include "gemm_driver.inl"

namespace gpuplug::host_gemm {
GPUPLUG_GEMM_TARGET void block_avx2(const BlockJob& job) noexcept { run_block<MicroAvx2>(job); }
}  // namespace gpuplug::host_gemm

#endif
