// SPDX-License-Identifier: Apache-2.0
// The CPU reference of one layer, relu(A*B + bias), and the error measure the pipeline checks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "e4m3.h"  // kernels/common: the very conversion every backend's kernels use

namespace gemm_pipeline {

/// The worst element of one comparison. `rel` is |got - want| / scale, where scale is
/// sum_p |a_ip * b_pj| + |bias_j|: the magnitude of the terms the kernel summed. That is the
/// quantity floating-point summation error is proportional to (|fl(sum) - sum| <= K*u*scale
/// with u = 2^-24 for f32), so the measure is meaningful even where the sum cancels to ~0 and a
/// plain relative error would explode.
struct LayerError {
  double rel = 0;
  std::uint32_t row = 0, col = 0;
  float got = 0;
  double want = 0;
};

/// Rounds each element through E4M3 and back, exactly as gemm_a_e4m3 does to its A operand.
inline void round_through_e4m3(std::span<const float> in, std::vector<float>& out) {
  out.resize(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    out[i] = gpuplug_e4m3_to_f32(gpuplug_f32_to_e4m3(in[i]));
  }
}

/// Compares `got` (M x N, what the backend produced) with relu(A*B + bias) computed here in
/// double. A is M x K, B is K x N, all row-major. Returns the worst element; NaN in `got`
/// counts as infinitely wrong. `acc`/`mag` are caller-owned rows so that steady-state steps
/// allocate nothing.
inline LayerError check_layer(std::span<const float> a, std::span<const float> b,
                              std::span<const float> bias, std::span<const float> got,
                              std::uint32_t M, std::uint32_t N, std::uint32_t K,
                              std::vector<double>& acc, std::vector<double>& mag) {
  LayerError worst;
  acc.resize(N);
  mag.resize(N);
  for (std::uint32_t i = 0; i < M; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    std::fill(mag.begin(), mag.end(), 0.0);
    for (std::uint32_t p = 0; p < K; ++p) {
      const double av = a[std::size_t{i} * K + p];
      const float* brow = b.data() + std::size_t{p} * N;
      for (std::uint32_t j = 0; j < N; ++j) {
        const double t = av * brow[j];
        acc[j] += t;
        mag[j] += std::abs(t);
      }
    }
    for (std::uint32_t j = 0; j < N; ++j) {
      const double want = std::max(acc[j] + bias[j], 0.0);
      const double scale =
          std::max(mag[j] + std::abs(double{bias[j]}), double{std::numeric_limits<float>::min()});
      const float g = got[std::size_t{i} * N + j];
      const double rel = std::isnan(g) ? std::numeric_limits<double>::infinity()
                                       : std::abs(double{g} - want) / scale;
      if (rel > worst.rel || (i == 0 && j == 0)) worst = {rel, i, j, g, want};
    }
  }
  return worst;
}

/// The tolerance for a route: `floor`, or the f32 summation bound K*u when that is larger
/// (only for K beyond ~1600 on the f32 route), so the check stays rigorous at any size.
inline double tolerance(double floor, std::uint32_t K) {
  return std::max(floor, K * std::ldexp(1.0, -24));
}

}  // namespace gemm_pipeline
