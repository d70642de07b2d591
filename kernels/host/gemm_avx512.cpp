// SPDX-License-Identifier: Apache-2.0
// The gemm block kernel for AVX-512 (F): a 16 x 16 register tile, one zmm of C per row, A and B
// packed per block. Compiled with a target attribute, not a flag, so the rest of the
// module stays baseline x86-64; gemm.cpp calls it only where the CPU has AVX-512F and FMA.
#include "gemm_block.hpp"

#if defined(GPUPLUG_HOST_GEMM_X86)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which -Wmaybe-uninitialized
// reports at every use; nothing here reads an undefined lane.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#define GPUPLUG_GEMM_TARGET __attribute__((target("avx512f,avx2,fma")))

namespace {

/// kMR rows x 16 columns of C in zmm registers; per k, one load of packed B and kMR broadcasts
/// of packed A, folded into the FMAs; C's loads and stores masked at the right edge.
struct MicroAvx512 {
  static constexpr int kMR = 16;
  static constexpr std::uint64_t kNR = 16;
  static constexpr std::uint64_t kKC = 256;
  static constexpr bool kPack16 = true;  // pack16 below packs A

  /// Packs 16 full rows of A (lda apart) for kc steps into ap, k-major: 16 x 16 blocks
  /// transposed in registers, the last kc % 16 steps one by one.
  GPUPLUG_GEMM_TARGET static void pack16(const float* a, std::uint64_t lda, std::uint64_t kc,
                                         float* ap) noexcept {
    std::uint64_t k0 = 0;
    for (; k0 + 16 <= kc; k0 += 16) {
      __m512 r[16], t[16], u[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(a + i * lda + k0);
      // t: rows 2i, 2i+1 interleaved per 128-bit lane (lo: k 0-1, hi: k 2-3 of the lane).
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
      }
      // u[4i + j], lane L: rows 4i..4i+3 at k = 4L + j.
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
      }
      // Column k = 4L + j gathers lane L of u[j], u[4 + j], u[8 + j], u[12 + j].
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m512 x_lo = _mm512_shuffle_f32x4(u[j], u[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512 x_hi = _mm512_shuffle_f32x4(u[j], u[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512 y_lo = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512 y_hi = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(3, 2, 3, 2));
        float* out = ap + (k0 + j) * 16;
        _mm512_store_ps(out + 0 * 64, _mm512_shuffle_f32x4(x_lo, y_lo, _MM_SHUFFLE(2, 0, 2, 0)));
        _mm512_store_ps(out + 1 * 64, _mm512_shuffle_f32x4(x_lo, y_lo, _MM_SHUFFLE(3, 1, 3, 1)));
        _mm512_store_ps(out + 2 * 64, _mm512_shuffle_f32x4(x_hi, y_hi, _MM_SHUFFLE(2, 0, 2, 0)));
        _mm512_store_ps(out + 3 * 64, _mm512_shuffle_f32x4(x_hi, y_hi, _MM_SHUFFLE(3, 1, 3, 1)));
      }
    }
    for (; k0 < kc; ++k0)
      for (int i = 0; i < 16; ++i) ap[k0 * 16 + i] = a[i * lda + k0];
  }

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
