// SPDX-License-Identifier: Apache-2.0
// A gpuplug allocation freed when it goes out of scope, so an error path loses nothing; shared
// by the examples (interop, mpi_allreduce).
#pragma once

#include <cstddef>
#include <gpuplug/backend.hpp>
#include <string>
#include <utility>

namespace gpuplug_examples {

class DeviceBuffer {
 public:
  DeviceBuffer(gpuplug::GpuBackend& gpu, std::size_t bytes, const char* site)
      : gpu_(&gpu), ptr_(gpu.alloc(bytes, site)), bytes_(bytes) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : gpu_(other.gpu_), ptr_(std::exchange(other.ptr_, gpuplug::DevicePtr{})), bytes_(other.bytes_) {}
  ~DeviceBuffer() {
    try {
      gpu_->free(ptr_);  // a null pointer is a no-op
    } catch (...) {    // an unwinding error is the one to report; the ledger shows the rest
    }
  }
  gpuplug::DevicePtr get() const noexcept { return ptr_; }
  std::size_t bytes() const noexcept { return bytes_; }
  /// The address the vendor library takes; valid until this buffer is freed.
  void* native() const { return gpu_->native_pointer(ptr_); }

 private:
  gpuplug::GpuBackend* gpu_;
  gpuplug::DevicePtr ptr_;
  std::size_t bytes_;
};

}  // namespace gpuplug_examples
