// SPDX-License-Identifier: Apache-2.0
// PluginBackend's pitched 2D copies (ABI 1.3): the core's checks, then the plugin's 2D slot, or
// GpuBackend's one 1D async copy per row for a plugin without it (older than 1.3, or null).
#include <cstdint>

#include "memory/pitched.hpp"
#include "table/plugin_backend.hpp"

namespace gpuplug::detail {

void PluginBackend::copy_h2d_2d_async(DevicePtr dst, std::size_t dst_pitch, const void* src,
                                      std::size_t src_pitch, std::size_t width_bytes,
                                      std::size_t height, Stream stream) {
  if (optional_.copy_h2d_2d_async == nullptr) {
    GpuBackend::copy_h2d_2d_async(dst, dst_pitch, src, src_pitch, width_bytes, height, stream);
    return;
  }
  if (!check_pitched(name(), "copy_h2d_2d_async", {"destination", dst.value, dst_pitch},
                     {"source", reinterpret_cast<std::uintptr_t>(src), src_pitch}, width_bytes,
                     height))
    return;
  check(optional_.copy_h2d_2d_async(*this, dst.value, dst_pitch, src, src_pitch, width_bytes,
                                    height, stream.value),
        "copy_h2d_2d_async");
}

void PluginBackend::copy_d2h_2d_async(void* dst, std::size_t dst_pitch, DevicePtr src,
                                      std::size_t src_pitch, std::size_t width_bytes,
                                      std::size_t height, Stream stream) {
  if (optional_.copy_d2h_2d_async == nullptr) {
    GpuBackend::copy_d2h_2d_async(dst, dst_pitch, src, src_pitch, width_bytes, height, stream);
    return;
  }
  if (!check_pitched(name(), "copy_d2h_2d_async",
                     {"destination", reinterpret_cast<std::uintptr_t>(dst), dst_pitch},
                     {"source", src.value, src_pitch}, width_bytes, height))
    return;
  check(optional_.copy_d2h_2d_async(*this, dst, dst_pitch, src.value, src_pitch, width_bytes,
                                    height, stream.value),
        "copy_d2h_2d_async");
}

void PluginBackend::copy_d2d_2d_async(DevicePtr dst, std::size_t dst_pitch, DevicePtr src,
                                      std::size_t src_pitch, std::size_t width_bytes,
                                      std::size_t height, Stream stream) {
  if (optional_.copy_d2d_2d_async == nullptr) {
    GpuBackend::copy_d2d_2d_async(dst, dst_pitch, src, src_pitch, width_bytes, height, stream);
    return;
  }
  if (!check_pitched(name(), "copy_d2d_2d_async", {"destination", dst.value, dst_pitch},
                     {"source", src.value, src_pitch}, width_bytes, height))
    return;
  check(optional_.copy_d2d_2d_async(*this, dst.value, dst_pitch, src.value, src_pitch,
                                    width_bytes, height, stream.value),
        "copy_d2d_2d_async");
}

}  // namespace gpuplug::detail
