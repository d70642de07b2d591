// SPDX-License-Identifier: Apache-2.0
// gpuplug's gemm_f32 against the vendor's BLAS on one stream (gemm.hpp).
#include "gemm.hpp"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../common/device_buffer.hpp"
#include "vendor_blas.hpp"

namespace interop {

using gpuplug_examples::DeviceBuffer;
namespace {

using gpuplug::DevicePtr;
using gpuplug::GpuBackend;
using gpuplug::Stream;

// The grid rule of gemm_f32 (kernels/*/gemm.*): blocks of 16 x 16 threads, 16 rows and
// <func>_n_tile columns of C per block.
gpuplug::Dim3 gemm_grid(GpuBackend& gpu, gpuplug::KernelHandle h, GemmShape s) {
  const std::uint32_t tile = gpu.op_cache().n_tile(h).value_or(64);
  return {(s.n + tile - 1) / tile, (s.m + 15) / 16, 1};
}

double median_seconds(unsigned reps, const std::function<void()>& run) {
  std::vector<double> times;
  for (unsigned r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The two results may differ by the rounding of two summation orders: per element, a bound of
// 2 K eps sum_k |a_ik b_kj| (computed in double) with a floor for sums that cancel.
std::uint64_t count_disagreements(const std::vector<float>& a, const std::vector<float>& b,
                                  const std::vector<float>& ours, const std::vector<float>& theirs,
                                  GemmShape s, double& worst) {
  std::uint64_t bad = 0;
  std::vector<double> abs_row(s.n);
  for (std::uint32_t i = 0; i < s.m; ++i) {
    std::fill(abs_row.begin(), abs_row.end(), 0.0);
    for (std::uint32_t k = 0; k < s.k; ++k) {
      const double aik = std::fabs(static_cast<double>(a[std::size_t{i} * s.k + k]));
      for (std::uint32_t j = 0; j < s.n; ++j)
        abs_row[j] += aik * std::fabs(static_cast<double>(b[std::size_t{k} * s.n + j]));
    }
    for (std::uint32_t j = 0; j < s.n; ++j) {
      const std::size_t at = std::size_t{i} * s.n + j;
      const double diff = std::fabs(static_cast<double>(ours[at]) - static_cast<double>(theirs[at]));
      const double bound = 2.0 * s.k * 1.1920929e-7 * abs_row[j] + 1e-30;
      worst = std::max(worst, diff / std::max(abs_row[j], 1e-30));
      if (!(diff <= bound)) ++bad;
    }
  }
  return bad;
}

}  // namespace

int compare_gemm(GpuBackend& gpu, GemmShape s, unsigned reps) {
  const std::size_t a_count = std::size_t{s.m} * s.k;
  const std::size_t b_count = std::size_t{s.k} * s.n;
  const std::size_t c_count = std::size_t{s.m} * s.n;
  std::vector<float> a(a_count), b(b_count);
  std::mt19937 rng(0x1A7E0);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);

  const DeviceBuffer da(gpu, a_count * sizeof(float), "interop A");
  const DeviceBuffer db(gpu, b_count * sizeof(float), "interop B");
  const DeviceBuffer dc_ours(gpu, c_count * sizeof(float), "interop C (gpuplug)");
  const DeviceBuffer dc_theirs(gpu, c_count * sizeof(float), "interop C (vendor)");
  // Declared after the buffers, so it is destroyed first: destroy_stream waits for the work
  // queued on it, and only then are the buffers that work uses freed.
  const Stream stream = gpu.create_stream();
  struct StreamGuard {
    GpuBackend& gpu;
    Stream stream;
    ~StreamGuard() {
      try {
        gpu.destroy_stream(stream);
      } catch (...) {  // the run's own error is the one to report
      }
    }
  } stream_guard{gpu, stream};

  VendorBlas blas;
  std::string why_not;
  if (!make_vendor_blas(gpu, stream, blas, why_not)) {
    std::printf("gemm: %s: skipped: %s\n", std::string(gpu.name()).c_str(), why_not.c_str());
    return 0;
  }

  gpu.copy_h2d(da.get(), a.data(), a_count * sizeof(float));
  gpu.copy_h2d(db.get(), b.data(), b_count * sizeof(float));

  const gpuplug::KernelHandle gemm = gpu.op_cache().kernel(gpu, "gemm", "gemm_f32");
  const gpuplug::Dim3 grid = gemm_grid(gpu, gemm, s);
  const auto ours = [&] {
    gpu.launch_args(gemm, grid, gpuplug::Dim3{16, 16, 1}, 0, stream, s.m, s.n, s.k, da.get().value,
                    db.get().value, dc_ours.get().value);
    gpu.synchronize(stream);
  };
  // The native addresses stay valid until the buffers are freed (docs/interop.md, lifetimes).
  const auto* na = static_cast<const float*>(da.native());
  const auto* nb = static_cast<const float*>(db.native());
  auto* nc = static_cast<float*>(dc_theirs.native());
  const auto theirs = [&] {
    blas.sgemm(s.m, s.n, s.k, na, nb, nc);  // queued on the stream, or done on return
    gpu.synchronize(stream);
  };
  // The copies above ran on the default stream and are complete; a first run of each warms up.
  ours();
  theirs();
  const double t_ours = median_seconds(reps, ours);
  const double t_theirs = median_seconds(reps, theirs);

  std::vector<float> c_ours(c_count), c_theirs(c_count);
  gpu.copy_d2h(c_ours.data(), dc_ours.get(), c_count * sizeof(float));
  gpu.copy_d2h(c_theirs.data(), dc_theirs.get(), c_count * sizeof(float));

  double worst = 0.0;
  const std::uint64_t bad = count_disagreements(a, b, c_ours, c_theirs, s, worst);
  const double flop = 2.0 * s.m * s.n * s.k;
  std::printf("gemm: %s: %" PRIu32 " x %" PRIu32 " x %" PRIu32 ", median of %u\n",
              std::string(gpu.name()).c_str(), s.m, s.n, s.k, reps);
  std::printf("  gpuplug gemm_f32  %10.3f ms  %8.2f GFLOP/s\n", t_ours * 1e3, flop / t_ours * 1e-9);
  std::printf("  %-16s  %10.3f ms  %8.2f GFLOP/s  (%.2fx gpuplug)\n", blas.name.c_str(),
              t_theirs * 1e3, flop / t_theirs * 1e-9, t_ours / t_theirs);
  std::printf("  agreement: max |difference| / sum|a||b| = %.3g; %" PRIu64
              " of %zu elements outside the rounding bound\n",
              worst, bad, c_count);
  return bad == 0 ? 0 : 1;
}

}  // namespace interop
