// SPDX-License-Identifier: Apache-2.0
// A deliberately broken module for tests: gemm_f32 publishes its n_tile as 2 bytes, not 4.
#include <gpuplug/host_kernel.hpp>

using namespace gpuplug::host_kernels;

// A plain, correct gemm_f32 (one block computes 16 rows x 64 columns), so that only the
// metadata is wrong.
GPUPLUG_HOST_KERNEL(gemm_f32) {
  const std::uint64_t M = arg<std::uint32_t>(params, 0);
  const std::uint64_t N = arg<std::uint32_t>(params, 1);
  const std::uint64_t K = arg<std::uint32_t>(params, 2);
  const float* A = ptr<const float>(params, 3);
  const float* B = ptr<const float>(params, 4);
  float* C = ptr<float>(params, 5);
  const std::uint64_t row0 = static_cast<std::uint64_t>(block->block_idx.y) * 16;
  const std::uint64_t col0 = static_cast<std::uint64_t>(block->block_idx.x) * 64;
  for (std::uint64_t i = row0; i < row0 + 16 && i < M; ++i)
    for (std::uint64_t j = col0; j < col0 + 64 && j < N; ++j) {
      float acc = 0.0f;
      for (std::uint64_t k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
      C[i * N + j] = acc;
    }
}

// Wrong on purpose: metadata symbols must be 4 bytes.
extern "C" GPUPLUG_PLUGIN_EXPORT const std::uint16_t gemm_f32_n_tile = 64;
