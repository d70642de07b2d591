// SPDX-License-Identifier: Apache-2.0
// A C face on to_dlpack / from_dlpack for numpy_exchange.py (ctypes): a host backend, a tensor it
// exports, a tensor it imports and reads back. Errors come back as text in the caller's buffer.
#include <gpuplug/dlpack.hpp>
#include <gpuplug/gpuplug.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <vector>

namespace {

struct Bridge {
  gpuplug::PluginRegistry registry;
  std::shared_ptr<gpuplug::GpuBackend> backend;
};

void report(const std::exception& e, char* error, std::size_t size) {
  std::snprintf(error, size, "%s", e.what());
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* bridge_open(char* error, std::size_t size) {
  try {
    auto b = std::make_unique<Bridge>();
    b->registry.discover();
    b->backend = b->registry.create("host!");
    return b.release();
  } catch (const std::exception& e) {
    report(e, error, size);
    return nullptr;
  }
}

__attribute__((visibility("default"))) void bridge_close(void* bridge) {
  delete static_cast<Bridge*>(bridge);
}

/// Allocations live on the backend's ledger: the test's proof that the deleters ran.
__attribute__((visibility("default"))) std::uint64_t bridge_live(void* bridge) {
  return static_cast<Bridge*>(bridge)->backend->ledger_stats().live_count;
}

/// rows x cols float32 values 0, 1, 2, ... (row-major in memory), exported as the legacy tensor
/// NumPy 1.24 reads; with `transposed`, as the cols x rows transpose (strides 1, cols).
__attribute__((visibility("default"))) DLManagedTensor* bridge_export(void* bridge, std::int64_t rows,
                                                                      std::int64_t cols, int transposed,
                                                                      char* error, std::size_t size) {
  try {
    auto& gpu = *static_cast<Bridge*>(bridge)->backend;
    std::vector<float> values(static_cast<std::size_t>(rows * cols));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
    const gpuplug::DevicePtr ptr = gpu.alloc(values.size() * sizeof(float), "numpy export");
    gpu.copy_h2d(ptr, values.data(), values.size() * sizeof(float));
    const std::vector<std::int64_t> shape =
        transposed ? std::vector<std::int64_t>{cols, rows} : std::vector<std::int64_t>{rows, cols};
    const std::vector<std::int64_t> strides =
        transposed ? std::vector<std::int64_t>{1, cols} : std::vector<std::int64_t>{};
    return gpuplug::to_dlpack_unversioned(gpu, ptr, shape, DLDataType{kDLFloat, 32, 1}, strides);
  } catch (const std::exception& e) {
    report(e, error, size);
    return nullptr;
  }
}

/// Imports NumPy's tensor (float64), writes its elements in row-major index order to `out`
/// (room for `capacity`), frees the import (running NumPy's deleter) and returns the count;
/// -1 with the error in `error`.
__attribute__((visibility("default"))) std::int64_t bridge_import(void* bridge, DLManagedTensor* tensor,
                                                                  double* out, std::int64_t capacity,
                                                                  char* error, std::size_t size) {
  try {
    auto& gpu = *static_cast<Bridge*>(bridge)->backend;
    const gpuplug::DlpackTensor in = gpuplug::from_dlpack(gpu, tensor);
    struct Release {  // the import goes back whatever happens below
      gpuplug::GpuBackend& gpu;
      gpuplug::DevicePtr memory;
      ~Release() { gpu.free(memory); }
    } release{gpu, in.memory};
    if (in.dtype.code != kDLFloat || in.dtype.bits != 64) throw std::runtime_error("not float64");
    std::int64_t count = 1;
    for (const auto e : in.shape) count *= e;
    if (count > capacity) throw std::runtime_error("more elements than the buffer holds");
    std::vector<std::int64_t> index(in.shape.size(), 0);
    for (std::int64_t n = 0; n < count; ++n) {
      std::int64_t offset = 0;
      for (std::size_t d = 0; d < index.size(); ++d) offset += index[d] * in.strides[d];
      gpu.copy_d2h(&out[n], in.data + static_cast<std::uint64_t>(offset * 8), sizeof(double));
      for (std::size_t d = index.size(); d-- > 0;) {  // the next index, last dimension fastest
        if (++index[d] < in.shape[d]) break;
        index[d] = 0;
      }
    }
    return count;
  } catch (const std::exception& e) {
    report(e, error, size);
    return -1;
  }
}

}  // extern "C"
