// SPDX-License-Identifier: Apache-2.0
// --compare-blas: the pipeline's two layers run again on the CPU with OpenBLAS's cblas_sgemm (and
// a plain bias + ReLU loop), the same shapes, inputs and step count, for a GFLOP/s beside
// gpuplug's. OpenBLAS is opened at run time (libopenblas.so.0), so the example builds and runs
// without it; then the comparison says why it is missing.
#pragma once

#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "model.hpp"

namespace gemm_pipeline {

struct BlasRun {
  double gflops = 0;    // 0: not run (`why` says why)
  int threads = 0;      // openblas_get_num_threads()
  std::string why;
};

/// Runs `steps` steps of H = relu(X*W1 + b1), Y = relu(H*W2 + b2) with OpenBLAS on host memory,
/// X refilled per step as Pipeline::step does; GFLOP/s over steps 2..N (step 1 alone if N = 1),
/// as the pipeline's own figure.
inline BlasRun openblas_pipeline(const HostModel& model, std::uint32_t m, std::uint32_t n,
                                 std::uint32_t k, std::uint32_t steps) {
  BlasRun out;
  void* lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libopenblas.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    out.why = "OpenBLAS not found (libopenblas.so.0; Debian: libopenblas0)";
    return out;
  }
  // cblas_sgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
  using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
  using Threads = int (*)();
  const auto sgemm = reinterpret_cast<Sgemm>(dlsym(lib, "cblas_sgemm"));
  const auto threads = reinterpret_cast<Threads>(dlsym(lib, "openblas_get_num_threads"));
  if (sgemm == nullptr) {
    out.why = "libopenblas has no cblas_sgemm";
    dlclose(lib);
    return out;
  }
  constexpr int row_major = 101, no_trans = 111;  // CblasRowMajor, CblasNoTrans
  std::vector<float> x(std::size_t{m} * k), h(std::size_t{m} * n), y(std::size_t{m} * n);
  auto bias_relu = [&](std::vector<float>& v, const std::vector<float>& b) {
    for (std::size_t r = 0; r < m; ++r)
      for (std::size_t c = 0; c < n; ++c) {
        const float t = v[r * n + c] + b[c];
        v[r * n + c] = t > 0.0f ? t : 0.0f;
      }
  };
  double timed = 0, first = 0;
  for (std::uint32_t s = 1; s <= steps; ++s) {
    Rng rng(0xDA7A0000ull + s);
    fill(x, rng, -1.0f, 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    sgemm(row_major, no_trans, no_trans, static_cast<int>(m), static_cast<int>(n),
          static_cast<int>(k), 1.0f, x.data(), static_cast<int>(k), model.w1.data(),
          static_cast<int>(n), 0.0f, h.data(), static_cast<int>(n));
    bias_relu(h, model.b1);
    sgemm(row_major, no_trans, no_trans, static_cast<int>(m), static_cast<int>(n),
          static_cast<int>(n), 1.0f, h.data(), static_cast<int>(n), model.w2.data(),
          static_cast<int>(n), 0.0f, y.data(), static_cast<int>(n));
    bias_relu(y, model.b2);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    (s == 1 ? first : timed) += sec;
  }
  const double flops = 2.0 * m * n * k + 2.0 * m * n * n;
  const std::uint32_t timed_steps = steps > 1 ? steps - 1 : 1;
  const double seconds = steps > 1 ? timed : first;
  out.gflops = seconds > 0 ? flops * timed_steps / seconds * 1e-9 : 0.0;
  out.threads = threads != nullptr ? threads() : 0;
  dlclose(lib);
  return out;
}

}  // namespace gemm_pipeline
