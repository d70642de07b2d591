// SPDX-License-Identifier: Apache-2.0
// The host "gemm" module's block interface: what one block of gemm_f32 / gemm_a_e4m3 computes,
// and the kernel of each instruction set that computes it (gemm.cpp picks one at load).
#pragma once

#include <cstdint>

namespace gpuplug::host_gemm {

/// Rows of C a block covers (the grid's y tile; the module publishes no `_m_tile`, so callers use
/// 16) and the columns it covers (published as `<func>_n_tile`).
inline constexpr std::uint32_t kRows = 16;
inline constexpr std::uint32_t kNTile = 128;
/// On tall grids one block computes up to kGroup tiles stacked in y (gemm.cpp): BlockJob::rows
/// is then up to kRows * kGroup.
inline constexpr std::uint32_t kGroup = 16;

/// One block's job: C[row0, row0 + rows) x [col0, col0 + cols) = A x B, all row-major with
/// leading dimensions K (A) and N (B, C); `cast_a` rounds every element of A through E4M3 first.
/// rows is 1 to kRows * kGroup, cols 1 to kNTile.
struct BlockJob {
  std::uint64_t N, K;
  const float* A;
  const float* B;
  float* C;
  std::uint64_t row0, col0, rows, cols;
  bool cast_a;
};

/// The kernels. Each accumulates every element of C in f32 over ascending k, starting from 0;
/// avx2 and avx512 round once per step (fused multiply-add), portable as the compiler emits
/// `acc += a * b` for the baseline target. The avx2 and avx512 kernels may run only where the CPU
/// has those features (cpu_has_avx2 / cpu_has_avx512); on other architectures they are absent.
void block_portable(const BlockJob& job) noexcept;
#if defined(__x86_64__) || defined(__i386__)
#define GPUPLUG_HOST_GEMM_X86 1
void block_avx2(const BlockJob& job) noexcept;
void block_avx512(const BlockJob& job) noexcept;
#endif

/// A's element rounded through E4M3 and back (kernels/common/e4m3.h), branch-free so that a
/// packing loop vectorises: equal bit for bit to gpuplug_e4m3_to_f32(gpuplug_f32_to_e4m3(x)).
inline float round_e4m3(float x) noexcept {
  std::uint32_t bits;
  __builtin_memcpy(&bits, &x, sizeof bits);
  const std::uint32_t sign = bits & 0x80000000u;
  const std::uint32_t mag = bits & 0x7FFFFFFFu;
  // Normal E4M3 (|x| >= 2^-6): the f32 mantissa rounded to 3 bits, nearest even; a carry bumps
  // the exponent, and nothing below 448 rounds past it.
  const std::uint32_t normal = (mag + 0x7FFFFu + ((mag >> 20) & 1u)) & 0xFFF00000u;
  // Below 2^-6: a multiple of 2^-9, nearest even, which f32 addition to 2^14 (ulp 2^-9) rounds
  // to; f32 subnormals land on 0.
  float m;
  __builtin_memcpy(&m, &mag, sizeof m);
  const float sub_f = (m + 16384.0f) - 16384.0f;
  std::uint32_t sub;
  __builtin_memcpy(&sub, &sub_f, sizeof sub);
  // Selects by masks, not branches, so that the loop vectorizes without masked instructions;
  // mag < 2^31, so signed compares (AVX2 has no unsigned ones) give the same order.
  const auto smag = static_cast<std::int32_t>(mag);
  const auto all = [](bool b) { return 0u - static_cast<std::uint32_t>(b); };
  const std::uint32_t is_normal = all(smag >= 0x3C800000);
  const std::uint32_t saturate = all(smag >= 0x43E00000);  // 448 and above, infinity included
  const std::uint32_t nan = all(smag > 0x7F800000);         // decodes to the positive quiet NaN
  std::uint32_t r = (normal & is_normal) | (sub & ~is_normal);
  r = ((0x43E00000u & saturate) | (r & ~saturate)) | sign;
  r = (0x7FC00000u & nan) | (r & ~nan);
  float out;
  __builtin_memcpy(&out, &r, sizeof out);
  return out;
}

}  // namespace gpuplug::host_gemm
