// SPDX-License-Identifier: Apache-2.0
// The gemm block kernel for any CPU, built for the baseline target; also the only one off x86.
#include "e4m3.h"
#include "gemm_block.hpp"

namespace gpuplug::host_gemm {

// i-k-j order: the inner loop runs along a row of B and of C, contiguous, so it vectorizes for
// the baseline target; each C row tile is accumulated in a local array and stored once.
void block_portable(const BlockJob& job) noexcept {
  float acc[kNTile];
  for (std::uint64_t i = job.row0; i < job.row0 + job.rows; ++i) {
    for (std::uint64_t j = 0; j < job.cols; ++j) acc[j] = 0.0f;
    const float* a_row = job.A + i * job.K;
    for (std::uint64_t k = 0; k < job.K; ++k) {
      float a = a_row[k];
      if (job.cast_a) a = gpuplug_e4m3_to_f32(gpuplug_f32_to_e4m3(a));
      const float* b_row = job.B + k * job.N + job.col0;
      for (std::uint64_t j = 0; j < job.cols; ++j) acc[j] += a * b_row[j];
    }
    float* c_row = job.C + i * job.N + job.col0;
    for (std::uint64_t j = 0; j < job.cols; ++j) c_row[j] = acc[j];
  }
}

}  // namespace gpuplug::host_gemm
