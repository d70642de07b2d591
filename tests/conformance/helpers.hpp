// SPDX-License-Identifier: Apache-2.0
// Helpers for conformance cases: owned device buffers, the sample kernels' launch rules, CPU
// references.
#pragma once

// The launch helpers follow the kernel contract every backend implements (docs/kernels.md):
//   axpy::axpy(n, a, x, y)                         grid ceil(n/256), block 256
//   gemm::gemm_f32 / gemm_a_e4m3(M, N, K, A, B, C) grid (ceil(N/n_tile), ceil(M/16)), block (16,16)
//   e4m3::cast_f32_e4m3 / cast_e4m3_f32(n, in, out) grid ceil(n/256), block 256
//   activation::bias_relu(rows, cols, bias, x)     grid ceil(rows*cols/256), block 256
// Kernels are resolved through the backend's OpCache, so every case also exercises it.

#include <gpuplug/abi.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "cases.hpp"

namespace gpuplug::conformance {

// ---- launches (asynchronous on `stream`) ---------------------------------------------------

void launch_axpy(GpuBackend& gpu, std::uint32_t n, float a, DevicePtr x, DevicePtr y,
                 Stream stream = {});
/// `func` is "gemm_f32" or "gemm_a_e4m3"; the grid uses the n_tile the OpCache recorded, and a
/// kernel that publishes none is a CheckFailure.
void launch_gemm(GpuBackend& gpu, std::string_view func, std::uint32_t m, std::uint32_t n,
                 std::uint32_t k, DevicePtr a, DevicePtr b, DevicePtr c, Stream stream = {});

// ---- whole runs (upload, launch, download, synchronize) ---------------------------------------

std::vector<float> run_axpy(GpuBackend& gpu, float a, const std::vector<float>& x,
                            const std::vector<float>& y);
std::vector<float> run_gemm(GpuBackend& gpu, std::string_view func, std::uint32_t m,
                            std::uint32_t n, std::uint32_t k, const std::vector<float>& a,
                            const std::vector<float>& b);
std::vector<std::uint8_t> run_cast_f32_e4m3(GpuBackend& gpu, const std::vector<float>& in);
std::vector<float> run_cast_e4m3_f32(GpuBackend& gpu, const std::vector<std::uint8_t>& in);
std::vector<float> run_bias_relu(GpuBackend& gpu, std::uint32_t rows, std::uint32_t cols,
                                 const std::vector<float>& bias, const std::vector<float>& x);

// ---- CPU references ---------------------------------------------------------------------------

/// a*x + y rounded once from the exact value (the product of two floats is exact in double).
std::vector<float> reference_axpy(float a, const std::vector<float>& x,
                                  const std::vector<float>& y);
/// C = A*B in double; `a_e4m3` rounds A through E4M3 first. `magnitude` receives, per element,
/// sum_k |a_ik * b_kj|, the scale of the rounding error bound.
std::vector<double> reference_gemm(std::uint32_t m, std::uint32_t n, std::uint32_t k,
                                   const std::vector<float>& a, const std::vector<float>& b,
                                   bool a_e4m3, std::vector<double>& magnitude);
/// The shared conversions of kernels/common/e4m3.h (what every backend's kernels must match).
std::uint8_t reference_f32_to_e4m3(float f) noexcept;
float reference_e4m3_to_f32(std::uint8_t b) noexcept;

// ---- floats -----------------------------------------------------------------------------------

std::uint32_t float_bits(float f) noexcept;
float float_from_bits(std::uint32_t bits) noexcept;
/// Distance in units in the last place between two finite floats of the same sign class.
std::uint64_t ulp_distance(float a, float b) noexcept;
/// `n` uniform values in [lo, hi), reproducible from `seed`.
std::vector<float> random_floats(std::size_t n, float lo, float hi, std::uint32_t seed);

/// Lowers the gpuplug log threshold for a scope (e.g. around an intentional sweep warning).
class ScopedLogLevel {
 public:
  explicit ScopedLogLevel(LogLevel level) : saved_(log_level()) { set_log_level(level); }
  ~ScopedLogLevel() { set_log_level(saved_); }
  ScopedLogLevel(const ScopedLogLevel&) = delete;
  ScopedLogLevel& operator=(const ScopedLogLevel&) = delete;

 private:
  LogLevel saved_;
};

/// Skips the case unless the plugin makes non-blocking streams: ABI 1.3 with the optional slot
/// stream_create_with_flags (without it the core makes every stream blocking, which keeps every
/// order a non-blocking stream keeps and more).
void require_non_blocking_streams(Context& ctx);

/// A stream destroyed when the case ends (a capture left on it aborted first). Non-blocking,
/// as create_stream() makes it, unless `flags` says otherwise.
class ScopedStream {
 public:
  explicit ScopedStream(GpuBackend& gpu, StreamFlags flags = StreamFlags::non_blocking)
      : gpu_(&gpu), s_(gpu.create_stream(flags)) {}
  ~ScopedStream() {
    gpu_->abort_capture_if_active(s_);
    try {
      gpu_->destroy_stream(s_);
    } catch (...) {
    }
  }
  ScopedStream(const ScopedStream&) = delete;
  ScopedStream& operator=(const ScopedStream&) = delete;
  Stream get() const noexcept { return s_; }

 private:
  GpuBackend* gpu_;
  Stream s_;
};

/// A plugin file dlopen'ed to call its entry point directly (the registry has it open too, so
/// this only adds a reference): what the lifecycle and ABI skew cases read the C table through.
/// A file that does not load or exports no entry fails the case, naming the file.
class RawPlugin {
 public:
  explicit RawPlugin(const std::filesystem::path& file);
  ~RawPlugin();
  RawPlugin(const RawPlugin&) = delete;
  RawPlugin& operator=(const RawPlugin&) = delete;
  const gpuplug_plugin_v1* entry(std::uint32_t host_abi_version) const {
    return entry_(host_abi_version);
  }

 private:
  void* handle_;
  gpuplug_plugin_entry_fn entry_ = nullptr;
};

}  // namespace gpuplug::conformance
