// SPDX-License-Identifier: Apache-2.0
// cuBLAS's sgemm on the CUDA backend's memory and native stream (vendor_blas.hpp).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "vendor_blas.hpp"

namespace interop {
namespace {

std::string cuda_runtime_error(const char* call, cudaError_t e) {
  return std::string(call) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

std::string cublas_error(const char* call, cublasStatus_t s) {
  return std::string(call) + " failed: " + cublasGetStatusName(s) + " (" + cublasGetStatusString(s) +
         ")";
}

}  // namespace

bool make_cublas(gpuplug::GpuBackend& gpu, gpuplug::Stream stream, VendorBlas& out,
                 std::string& why_not) {
  const gpuplug::NativeHandles native = gpu.native(stream);
  // The runtime (and so cuBLAS) works in the device's primary context, the one gpuplug's CUDA
  // backend uses: selecting the device is all it takes to share memory and streams.
  if (const cudaError_t e = cudaSetDevice(native.device); e != cudaSuccess) {
    why_not = cuda_runtime_error("cudaSetDevice", e);
    return false;
  }
  cublasHandle_t raw = nullptr;
  if (const cublasStatus_t s = cublasCreate(&raw); s != CUBLAS_STATUS_SUCCESS) {
    why_not = cublas_error("cublasCreate", s);
    return false;
  }
  std::shared_ptr<cublasContext> handle(raw, [](cublasHandle_t h) { cublasDestroy(h); });
  // gpuplug's stream, not cuBLAS's default: the GEMM is ordered with gpuplug's work on it.
  if (const cublasStatus_t s = cublasSetStream(raw, static_cast<cudaStream_t>(native.stream));
      s != CUBLAS_STATUS_SUCCESS) {
    why_not = cublas_error("cublasSetStream", s);
    return false;
  }
  int version = 0;
  cublasGetVersion(raw, &version);
  out.name = "cuBLAS " + std::to_string(version);
  out.sgemm = [handle](std::uint32_t M, std::uint32_t N, std::uint32_t K, const float* A,
                       const float* B, float* C) {
    // cuBLAS is column-major: row-major C = A * B is column-major C^T = B^T * A^T.
    const float one = 1.0f;
    const float zero = 0.0f;
    const cublasStatus_t s =
        cublasSgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                    static_cast<int>(K), &one, B, static_cast<int>(N), A, static_cast<int>(K), &zero,
                    C, static_cast<int>(N));
    if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(cublas_error("cublasSgemm", s));
  };
  return true;
}

}  // namespace interop
