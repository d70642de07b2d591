// SPDX-License-Identifier: Apache-2.0
// CudaDevice's pitched 2D copies: one cuMemcpy2DAsync (CUDA_MEMCPY2D) on the stream. From pageable
// host memory the driver stages the source before cuMemcpy2DAsync returns, as it does for
// cuMemcpyHtoDAsync.
#include "device.hpp"

namespace gpuplug::cuda {

namespace {

/// A copy of `height` rows of `width` bytes, with no sides set yet.
CUDA_MEMCPY2D rows(std::uint64_t width, std::uint64_t height) noexcept {
  CUDA_MEMCPY2D m{};
  m.WidthInBytes = width;
  m.Height = height;
  return m;
}

void set_device_source(CUDA_MEMCPY2D& m, std::uint64_t src, std::uint64_t pitch) noexcept {
  m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  m.srcDevice = src;
  m.srcPitch = pitch;
}

void set_device_destination(CUDA_MEMCPY2D& m, std::uint64_t dst, std::uint64_t pitch) noexcept {
  m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  m.dstDevice = dst;
  m.dstPitch = pitch;
}

}  // namespace

void CudaDevice::vendor_copy_h2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch,
                                          const void* src, std::uint64_t src_pitch,
                                          std::uint64_t width, std::uint64_t height,
                                          std::uint64_t stream) {
  if (api_.memcpy_2d_async == nullptr) {
    sdk::Device::vendor_copy_h2d_2d_async(dst, dst_pitch, src, src_pitch, width, height, stream);
    return;
  }
  const ContextScope current = make_current();
  CUDA_MEMCPY2D m = rows(width, height);
  m.srcMemoryType = CU_MEMORYTYPE_HOST;
  // During a capture the rows are staged (graphs.cpp), from the first row's start to the last's end.
  const std::uint64_t span = width == 0 || height == 0 ? 0 : (height - 1) * src_pitch + width;
  m.srcHost = stage_for_capture(src, span, stream);
  m.srcPitch = src_pitch;
  set_device_destination(m, dst, dst_pitch);
  check(api_.memcpy_2d_async(&m, as_stream(stream)), "cuMemcpy2DAsync(host to device)");
}

void CudaDevice::vendor_copy_d2h_2d_async(void* dst, std::uint64_t dst_pitch, std::uint64_t src,
                                          std::uint64_t src_pitch, std::uint64_t width,
                                          std::uint64_t height, std::uint64_t stream) {
  if (api_.memcpy_2d_async == nullptr) {
    sdk::Device::vendor_copy_d2h_2d_async(dst, dst_pitch, src, src_pitch, width, height, stream);
    return;
  }
  CUDA_MEMCPY2D m = rows(width, height);
  set_device_source(m, src, src_pitch);
  m.dstMemoryType = CU_MEMORYTYPE_HOST;
  m.dstHost = dst;
  m.dstPitch = dst_pitch;
  const ContextScope current = make_current();
  check(api_.memcpy_2d_async(&m, as_stream(stream)), "cuMemcpy2DAsync(device to host)");
}

void CudaDevice::vendor_copy_d2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch,
                                          std::uint64_t src, std::uint64_t src_pitch,
                                          std::uint64_t width, std::uint64_t height,
                                          std::uint64_t stream) {
  if (api_.memcpy_2d_async == nullptr) {
    sdk::Device::vendor_copy_d2d_2d_async(dst, dst_pitch, src, src_pitch, width, height, stream);
    return;
  }
  CUDA_MEMCPY2D m = rows(width, height);
  set_device_source(m, src, src_pitch);
  set_device_destination(m, dst, dst_pitch);
  const ContextScope current = make_current();
  check(api_.memcpy_2d_async(&m, as_stream(stream)), "cuMemcpy2DAsync(device to device)");
}

}  // namespace gpuplug::cuda
