// SPDX-License-Identifier: Apache-2.0
// The pipeline of gemm_pipeline: a verified two-layer MLP on one backend, through its OpCache.
#pragma once

//   H = relu(X * W1 + b1)   X: m x k, W1: k x n   route gemm_f32
//   Y = relu(H * W2 + b2)   W2: n x n             route gemm_a_e4m3 where advertised, else gemm_f32
//
// Every kernel is resolved through the model's OpCache each step (hits after the first), the
// GEMM grid comes from the kernel's published n_tile, activations live in OpCache scratch and the
// weights come from alloc_with_fallback. Each step is checked against a CPU reference; the run
// ends with Teardown::release_all and an empty ledger. docs/gemm-pipeline.md explains it all.

#include <cstdint>
#include <gpuplug/gpuplug.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model.hpp"
#include "reference.hpp"

namespace gemm_pipeline {

/// The process's exit statuses; Pipeline::run returns the first two.
inline constexpr int exit_success = 0;
inline constexpr int exit_verification = 1;  // a check failed, or memory was left on the ledger
inline constexpr int exit_usage = 2;
inline constexpr int exit_runtime = 3;  // an error reported by the backend

/// What a run computes: X is m x k, W1 k x n, W2 n x n, for `steps` steps.
struct Shape {
  std::uint32_t m = 0, n = 0, k = 0, steps = 0;
  bool compare_blas = false;  // also time the pipeline with OpenBLAS (openblas.hpp)
};

/// The kernel layer 2 runs: the A-to-E4M3 GEMM when the backend's gemm module has it and it
/// advertises a_e4m3, else the plain f32 GEMM.
struct Route {
  const char* func = "gemm_f32";
  bool e4m3 = false;
};

/// Running maxima of one route's error measure.
struct RouteStats {
  std::string name;
  double tolerance = 0;
  LayerError worst;
  std::optional<std::pair<std::uint32_t, LayerError>> first_failure;  // (step, element)

  void add(std::uint32_t step, const LayerError& e) {
    if (e.rel > worst.rel) worst = e;
    if (!(e.rel <= tolerance) && !first_failure) first_failure = {step, e};  // NaN fails too
  }
};

/// Everything a run holds. Host buffers are sized once, so steps after the first allocate
/// nothing on the host either.
class Pipeline {
 public:
  Pipeline(gpuplug::GpuBackend& gpu, const Shape& shape);

  /// Runs every step, prints the progress and the summary, and returns the process exit status
  /// (exit_success or exit_verification). Releases everything through a Teardown on every path;
  /// a backend error propagates as gpuplug::Error.
  /// With `memory_snapshot` (a file name) it writes the backend's memory snapshot there at exit
  /// (after teardown) and, after step 1, beside it (warmup_snapshot_path).
  int run(const std::string& selector_note, const std::string& memory_snapshot = {});

 private:
  void setup();
  void step(std::uint32_t s);
  void log_route(std::string_view key, gpuplug::KernelHandle hk, gpuplug::Dim3 grid,
                 std::uint32_t M, std::uint32_t N, std::uint32_t K);
  void verify(std::uint32_t s, gpuplug::DevicePtr h, gpuplug::DevicePtr y);
  double flops_per_step() const { return 2.0 * m_ * n_ * k_ + 2.0 * m_ * n_ * n_; }
  void progress(std::uint32_t s, double seconds);
  int summarize(const std::string& selector_note, const std::string& cache_state,
                const gpuplug::LedgerStats& at_exit);

  gpuplug::GpuBackend& gpu_;
  // The model's own cache on the backend (docs/opcache.md, "Models on a shared backend"): its
  // scratch, latch and gates are this pipeline's, its kernels the backend's. Releasing it frees
  // this model's scratch only, so the pipeline stays correct if the backend serves other models.
  gpuplug::OpCache op_;
  const std::uint32_t m_, n_, k_, steps_;
  const bool compare_blas_;
  const HostModel host_;
  Weights weights_;
  Route route2_;
  std::string route1_key_, route2_key_;  // "route:<func>", the first_shape keys of the routes
  RouteStats l1_, l2_;
  // Host buffers, sized once: the step's input, the backend's H and Y, H rounded through E4M3,
  // and the reference's accumulators.
  std::vector<float> x_, h_, y_, hq_;
  std::vector<double> acc_, mag_;
  const bool interactive_;
  double first_seconds_ = 0, steady_seconds_ = 0, quantisation_effect_ = 0;
  std::uint64_t allocs_after_warmup_ = 0, allocs_at_end_ = 0;
};

}  // namespace gemm_pipeline
