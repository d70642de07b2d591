/* SPDX-License-Identifier: Apache-2.0
 * OCP FP8 E4M3 (E4M3FN) conversions shared by the host, CUDA and HIP kernels, so every backend
 * rounds bit-for-bit alike: round to nearest even, saturating to +-448, any NaN to the canonical
 * 0x7F; the encoder equals NVIDIA's cuda_fp8.h (__NV_SATFINITE, __NV_E4M3) on every f32. */
#ifndef GPUPLUG_KERNELS_E4M3_H
#define GPUPLUG_KERNELS_E4M3_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define GPUPLUG_HD __host__ __device__ inline
#else
#define GPUPLUG_HD static inline
#endif

/* E4M3: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; S.1111.111 is NaN.
 * Largest finite 448 (0x7E), smallest normal 2^-6, smallest subnormal 2^-9. */
#define GPUPLUG_E4M3_MAX 448.0f
#define GPUPLUG_E4M3_NAN 0x7Fu

/* Rounds `value >> shift` to nearest even; shift in [1, 31]. */
GPUPLUG_HD uint32_t gpuplug_rne_shift(uint32_t value, uint32_t shift) {
  uint32_t q = value >> shift;
  uint32_t rem = value & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) q += 1u;
  return q;
}

GPUPLUG_HD uint8_t gpuplug_f32_to_e4m3(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  uint8_t sign = (uint8_t)((bits >> 24) & 0x80u);
  uint32_t mag = bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return GPUPLUG_E4M3_NAN; /* any NaN: 0x7F, as cuda_fp8.h and PTX's cvt */
  if (mag >= 0x43E00000u) return (uint8_t)(sign | 0x7Eu); /* >= 448 and inf saturate */
  int exp = (int)(mag >> 23) - 127;
  if (mag < 0x00800000u) return sign; /* f32 zero and subnormals are far below 2^-10 */
  uint32_t mant = (mag & 0x7FFFFFu) | 0x800000u;
  if (exp < -6) {
    /* E4M3 subnormal: the value in units of 2^-9 is mant * 2^(exp - 14). */
    uint32_t shift = (uint32_t)(14 - exp);
    if (shift > 31u) return sign;
    return (uint8_t)(sign | gpuplug_rne_shift(mant, shift)); /* 8 carries into the smallest normal */
  }
  /* Normal: exponent field exp+7, mantissa rounded from 23 to 3 bits; a carry bumps the exponent. */
  uint32_t v = ((uint32_t)(exp + 7) << 3) + gpuplug_rne_shift(mant, 20u) - 8u;
  if (v > 0x7Eu) v = 0x7Eu;
  return (uint8_t)(sign | v);
}

/* Built from integer operations only, the sign included: PTX leaves the result of `neg` on a NaN
 * unspecified, and the two NaN codes must decode to 0x7FC00000 and 0xFFC00000 on every backend
 * (0x80 to -0.0, 0x80000000), whatever the float mode (flush-to-zero, fast math). */
GPUPLUG_HD float gpuplug_e4m3_to_f32(uint8_t b) {
  uint32_t e = (b >> 3) & 0xFu;
  uint32_t m = b & 0x7u;
  uint32_t bits;
  if (e == 0xFu && m == 0x7u) {
    bits = 0x7FC00000u; /* the quiet NaN */
  } else if (e == 0u) {
    /* m * 2^-9 (a normal f32, or +0): leading bit p of m gives 2^(p - 9), the rest the mantissa */
    uint32_t p = m >= 4u ? 2u : (m >= 2u ? 1u : 0u);
    bits = m == 0u ? 0u : ((118u + p) << 23) | ((m << (23u - p)) & 0x7FFFFFu);
  } else {
    /* (1 + m/8) * 2^(e - 7): f32 exponent field e - 7 + 127, mantissa m in its top 3 bits */
    bits = ((e + 120u) << 23) | (m << 20);
  }
  bits |= (uint32_t)(b & 0x80u) << 24;
  float out;
  memcpy(&out, &bits, sizeof out);
  return out;
}

#endif /* GPUPLUG_KERNELS_E4M3_H */
