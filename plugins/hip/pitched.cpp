// SPDX-License-Identifier: Apache-2.0
// HipDevice's pitched 2D copies: one hipMemcpy2DAsync on the stream. From pageable host memory
// the runtime stages the source before hipMemcpy2DAsync returns, as it does for hipMemcpyAsync.
#include "device.hpp"

namespace gpuplug::hip {

namespace {

void* as_ptr(std::uint64_t p) noexcept { return reinterpret_cast<void*>(p); }

}  // namespace

void HipDevice::vendor_copy_h2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch,
                                         const void* src, std::uint64_t src_pitch,
                                         std::uint64_t width, std::uint64_t height,
                                         std::uint64_t stream) {
  if (hip_.memcpy_2d_async == nullptr) {
    sdk::Device::vendor_copy_h2d_2d_async(dst, dst_pitch, src, src_pitch, width, height, stream);
    return;
  }
  make_current();
  // During a capture the rows are staged (graphs.cpp), from the first row's start to the last's end.
  const std::uint64_t span = width == 0 || height == 0 ? 0 : (height - 1) * src_pitch + width;
  check(hip_.memcpy_2d_async(as_ptr(dst), dst_pitch, stage_for_capture(src, span, stream),
                             src_pitch, width, height, hipMemcpyHostToDevice, as_stream(stream)),
        "hipMemcpy2DAsync(host to device)");
}

void HipDevice::vendor_copy_d2h_2d_async(void* dst, std::uint64_t dst_pitch, std::uint64_t src,
                                         std::uint64_t src_pitch, std::uint64_t width,
                                         std::uint64_t height, std::uint64_t stream) {
  if (hip_.memcpy_2d_async == nullptr) {
    sdk::Device::vendor_copy_d2h_2d_async(dst, dst_pitch, src, src_pitch, width, height, stream);
    return;
  }
  make_current();
  check(hip_.memcpy_2d_async(dst, dst_pitch, as_ptr(src), src_pitch, width, height,
                             hipMemcpyDeviceToHost, as_stream(stream)),
        "hipMemcpy2DAsync(device to host)");
}

void HipDevice::vendor_copy_d2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch,
                                         std::uint64_t src, std::uint64_t src_pitch,
                                         std::uint64_t width, std::uint64_t height,
                                         std::uint64_t stream) {
  if (hip_.memcpy_2d_async == nullptr) {
    sdk::Device::vendor_copy_d2d_2d_async(dst, dst_pitch, src, src_pitch, width, height, stream);
    return;
  }
  make_current();
  check(hip_.memcpy_2d_async(as_ptr(dst), dst_pitch, as_ptr(src), src_pitch, width, height,
                             hipMemcpyDeviceToDevice, as_stream(stream)),
        "hipMemcpy2DAsync(device to device)");
}

}  // namespace gpuplug::hip
