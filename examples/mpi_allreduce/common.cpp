// SPDX-License-Identifier: Apache-2.0
// The shared parts of mpi_allreduce (common.hpp).
#include "common.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: MPIX_Query_cuda_support, MPIX_Query_rocm_support
#endif

#include <cstdio>
#include <stdexcept>

namespace mpi_example {

void check_mpi(const char* call, int rc) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  throw std::runtime_error(std::string(call) + " failed: " + std::string(text, length));
}

const char* path_name(Path path) noexcept { return path == Path::direct ? "direct" : "staged"; }

bool mpi_takes_memory_of(gpuplug::GpuBackend& gpu, std::string& why) {
  const std::string vendor = gpu.native().vendor;
  if (vendor == "host") {
    why = "the host backend's memory is host memory";
    return true;
  }
  if (vendor == "cuda") {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    const bool aware = MPIX_Query_cuda_support() == 1;
    why = aware ? "the MPI library is CUDA-aware (MPIX_Query_cuda_support() = 1)"
                : "the MPI library is not CUDA-aware (MPIX_Query_cuda_support() = 0)";
    return aware;
#else
    why = "<mpi-ext.h> has no MPIX_Query_cuda_support, so CUDA awareness is unknown";
    return false;
#endif
  }
  if (vendor == "hip") {
#if defined(MPIX_ROCM_AWARE_SUPPORT)
    const bool aware = MPIX_Query_rocm_support() == 1;
    why = aware ? "the MPI library is ROCm-aware (MPIX_Query_rocm_support() = 1)"
                : "the MPI library is not ROCm-aware (MPIX_Query_rocm_support() = 0)";
    return aware;
#else
    why = "<mpi-ext.h> has no MPIX_Query_rocm_support, so ROCm awareness is unknown";
    return false;
#endif
  }
  why = "MPI knows nothing of vendor '" + vendor + "'";
  return false;
}

float pattern(std::size_t i) noexcept { return static_cast<float>(i % 251 + 1); }

std::vector<float> pattern_of(std::size_t count) {
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = pattern(i);
  return out;
}

namespace {

void axpy_on(const Rank& r, gpuplug::KernelHandle axpy, gpuplug::Stream stream, float a,
             gpuplug::DevicePtr x, gpuplug::DevicePtr y, std::uint32_t count) {
  const gpuplug::Dim3 grid{(count + 255) / 256, 1, 1};
  const gpuplug::Dim3 block{256, 1, 1};
  r.gpu->launch_args(axpy, grid, block, 0, stream, count, a, x.value, y.value);
}

}  // namespace

void fill_from_rank(const Rank& r, gpuplug::KernelHandle axpy, gpuplug::Stream stream,
                    gpuplug::DevicePtr x, gpuplug::DevicePtr y, std::uint32_t count) {
  r.gpu->memset(y, 0, std::size_t{count} * sizeof(float), stream);
  axpy_on(r, axpy, stream, static_cast<float>(r.rank + 1), x, y, count);
}

void accumulate(const Rank& r, gpuplug::KernelHandle axpy, gpuplug::Stream stream,
                gpuplug::DevicePtr x, gpuplug::DevicePtr y, std::uint32_t count) {
  axpy_on(r, axpy, stream, 1.0f, x, y, count);
}

std::uint64_t check_elements(const Rank& r, const char* what, const std::vector<float>& got,
                             float scale) {
  constexpr std::uint64_t shown = 3;
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float expected = scale * pattern(i);
    if (got[i] == expected) continue;
    if (wrong < shown) {
      std::printf("mpi_allreduce: rank %d: %s: element %zu is %g, expected %g\n", r.rank, what, i,
                  static_cast<double>(got[i]), static_cast<double>(expected));
    }
    ++wrong;
  }
  if (wrong > shown) {
    std::printf("mpi_allreduce: rank %d: %s: %llu elements differ in all\n", r.rank, what,
                static_cast<unsigned long long>(wrong));
  }
  std::fflush(stdout);
  return wrong;
}

}  // namespace mpi_example
