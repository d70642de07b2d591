// SPDX-License-Identifier: Apache-2.0
// Host kernel module "gemm": row-major f32 GEMM, and a variant that rounds A through E4M3 first.
#include "e4m3.h"
#include <gpuplug/host_kernel.hpp>

using namespace gpuplug::host_kernels;

namespace {

// A block computes kRows rows x kNTile columns of C. Launch rule (every backend):
// grid = (ceil(N / n_tile), ceil(M / 16)), block = (16, 16).
constexpr std::uint32_t kRows = 16;
constexpr std::uint32_t kNTile = 64;

// i-k-j order: the inner loop runs along a row of B and of C, contiguous, so it vectorizes;
// each C row tile is accumulated in registers/stack and stored once. Accumulation is f32 in
// ascending k, like the reference.
template <bool kCastA>
void gemm_block(const gpuplug_host_block_t* block, void* const* params) noexcept {
  const std::uint64_t M = arg<std::uint32_t>(params, 0);
  const std::uint64_t N = arg<std::uint32_t>(params, 1);
  const std::uint64_t K = arg<std::uint32_t>(params, 2);
  const float* A = ptr<const float>(params, 3);
  const float* B = ptr<const float>(params, 4);
  float* C = ptr<float>(params, 5);

  const std::uint64_t row0 = static_cast<std::uint64_t>(block->block_idx.y) * kRows;
  const std::uint64_t col0 = static_cast<std::uint64_t>(block->block_idx.x) * kNTile;
  if (row0 >= M || col0 >= N) return;  // blocks past the edge of C do nothing
  const std::uint64_t row_end = row0 + kRows < M ? row0 + kRows : M;
  const std::uint64_t cols = N - col0 < kNTile ? N - col0 : kNTile;

  float acc[kNTile];
  for (std::uint64_t i = row0; i < row_end; ++i) {
    for (std::uint64_t j = 0; j < cols; ++j) acc[j] = 0.0f;
    const float* a_row = A + i * K;
    for (std::uint64_t k = 0; k < K; ++k) {
      float a = a_row[k];
      if constexpr (kCastA) a = gpuplug_e4m3_to_f32(gpuplug_f32_to_e4m3(a));
      const float* b_row = B + k * N + col0;
      for (std::uint64_t j = 0; j < cols; ++j) acc[j] += a * b_row[j];
    }
    float* c_row = C + i * N + col0;
    for (std::uint64_t j = 0; j < cols; ++j) c_row[j] = acc[j];
  }
}

}  // namespace

// gemm_f32(uint32 M, uint32 N, uint32 K, const float* A, const float* B, float* C): C = A * B.
GPUPLUG_HOST_KERNEL(gemm_f32) { gemm_block<false>(block, params); }
extern "C" GPUPLUG_PLUGIN_EXPORT const std::uint32_t gemm_f32_n_tile = kNTile;

// gemm_a_e4m3(same arguments): A's elements rounded through E4M3 (no scale), B and the
// accumulation in f32.
GPUPLUG_HOST_KERNEL(gemm_a_e4m3) { gemm_block<true>(block, params); }
extern "C" GPUPLUG_PLUGIN_EXPORT const std::uint32_t gemm_a_e4m3_n_tile = kNTile;
extern "C" GPUPLUG_PLUGIN_EXPORT const std::uint32_t gemm_a_e4m3_a_e4m3 = 1;

// The argument sizes, for plugins that copy arguments (<gpuplug/kernel_args.h>).
GPUPLUG_HOST_KERNEL_ARGS(gemm_f32, 6, {4, 4, 4, 8, 8, 8});
GPUPLUG_HOST_KERNEL_ARGS(gemm_a_e4m3, 6, {4, 4, 4, 8, 8, 8});
