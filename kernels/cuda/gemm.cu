// SPDX-License-Identifier: Apache-2.0
// Module "gemm" for the CUDA backend: tiled f32 GEMM and the A-through-E4M3 variant.
#include <gpuplug/kernel_args.h>
#include <stdint.h>

#include "e4m3.h"

// Tile shape. A block of 16 x 16 threads computes 16 rows x kNTile columns of C, each thread
// kNTile / 16 columns strided by 16 (so a warp's loads and stores stay coalesced). K is walked
// in steps of kKTile through shared memory.
namespace {
constexpr uint32_t kRows = 16;
constexpr uint32_t kNTile = 64;
constexpr uint32_t kKTile = 16;
constexpr uint32_t kColsPerThread = kNTile / 16;
static_assert(kNTile % 16 == 0, "each thread owns kNTile / 16 columns");
}  // namespace

// Published launch metadata, read by OpCache::kernel through cuModuleGetGlobal. They must be
// extern "C" __device__ variables (not constexpr or static) so that the cubin keeps them as
// global symbols under these exact names.
extern "C" __device__ const uint32_t gemm_f32_n_tile = kNTile;
extern "C" __device__ const uint32_t gemm_a_e4m3_n_tile = kNTile;
extern "C" __device__ const uint32_t gemm_a_e4m3_a_e4m3 = 1;

namespace {

// Launch: grid = (ceil(N / kNTile), ceil(M / 16)), block = (16, 16). Row-major, C = A * B.
// kRoundA: A's elements go through E4M3 (no scale) as they are staged; B and the sums stay f32.
template <bool kRoundA>
__device__ __forceinline__ void gemm_tile(uint32_t M, uint32_t N, uint32_t K, const float* A,
                                          const float* B, float* C) {
  __shared__ float a_tile[kRows][kKTile];
  __shared__ float b_tile[kKTile][kNTile];

  const uint32_t tx = threadIdx.x;
  const uint32_t ty = threadIdx.y;
  const uint32_t row = blockIdx.y * kRows + ty;
  const uint32_t col0 = blockIdx.x * kNTile;

  float acc[kColsPerThread] = {};
  for (uint32_t k0 = 0; k0 < K; k0 += kKTile) {
    // Stage A[row, k0 .. k0+15] (one element per thread) and B[k0 .. k0+15, col0 .. col0+63]
    // (kColsPerThread per thread); out-of-range elements are zero so the inner loop needs no test.
    const uint32_t ak = k0 + tx;
    float a = (row < M && ak < K) ? A[static_cast<uint64_t>(row) * K + ak] : 0.0f;
    if constexpr (kRoundA) a = gpuplug_e4m3_to_f32(gpuplug_f32_to_e4m3(a));
    a_tile[ty][tx] = a;
    const uint32_t bk = k0 + ty;
#pragma unroll
    for (uint32_t j = 0; j < kColsPerThread; ++j) {
      const uint32_t c = col0 + tx + 16 * j;
      b_tile[ty][tx + 16 * j] = (bk < K && c < N) ? B[static_cast<uint64_t>(bk) * N + c] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (uint32_t kk = 0; kk < kKTile; ++kk) {
      const float av = a_tile[ty][kk];
#pragma unroll
      for (uint32_t j = 0; j < kColsPerThread; ++j) acc[j] += av * b_tile[kk][tx + 16 * j];
    }
    __syncthreads();
  }
  if (row >= M) return;
#pragma unroll
  for (uint32_t j = 0; j < kColsPerThread; ++j) {
    const uint32_t c = col0 + tx + 16 * j;
    if (c < N) C[static_cast<uint64_t>(row) * N + c] = acc[j];
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    gemm_f32(uint32_t M, uint32_t N, uint32_t K, const float* A, const float* B, float* C) {
  gemm_tile<false>(M, N, K, A, B, C);
}

extern "C" __global__ void __launch_bounds__(256)
    gemm_a_e4m3(uint32_t M, uint32_t N, uint32_t K, const float* A, const float* B, float* C) {
  gemm_tile<true>(M, N, K, A, B, C);
}

// The argument sizes, for plugins that copy arguments (<gpuplug/kernel_args.h>).
extern "C" __device__ const gpuplug_kernel_args_t gemm_f32_args = {
    GPUPLUG_KERNEL_ARGS_VERSION, 6, {4, 4, 4, 8, 8, 8}};
extern "C" __device__ const gpuplug_kernel_args_t gemm_a_e4m3_args = {
    GPUPLUG_KERNEL_ARGS_VERSION, 6, {4, 4, 4, 8, 8, 8}};
