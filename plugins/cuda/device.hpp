// SPDX-License-Identifier: Apache-2.0
// CudaDevice: one CUDA device as a gpuplug backend instance (context, memory, copies, streams,
// launch).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "driver.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::cuda {

/// Fills `out` for device `ordinal` without creating a context: free_memory is reported only
/// when the device's primary context is already active (another backend or the application
/// holds it), else 0, because listing devices must not pay for (and hold memory for) a context
/// per GPU. Throws sdk::Failure(UNAVAILABLE) when the driver or the device is missing.
void describe(const DriverApi& api, std::uint32_t ordinal, gpuplug_device_info_t& out);

/// One backend instance: device `config.ordinal` with its own ledger, modules and streams.
///
/// Context: the device's primary context is retained for the instance's life (so instances of
/// the same ordinal share it, as CUDA runtime users do) and made current at the top of every
/// hook, on whichever thread calls it; the application's own current context is therefore
/// replaced on threads that call into this backend.
/// Streams: created with default flags, so the legacy default stream (stream 0) orders them as
/// the ABI specifies. Stream handles are checked against this instance's set in every stream
/// and async hook except `launch`, which is kept to one driver call and trusts its stream.
/// Device addresses: the SDK range-checks those its ledger knows and leaves the others to the
/// vendor. Here such an address must lie in a module global this instance handed out, or else
/// in a live allocation the driver knows (cuPointerGetAttribute), before a copy or memset is
/// issued; otherwise INVALID_ARGUMENT. A bad address must not reach an asynchronous copy or
/// memset, where it would fault later and poison the whole context.
/// Thread-safety: every hook may run concurrently; the stream set and the globals are each
/// under a shared mutex.
class CudaDevice final : public sdk::Device {
 public:
  /// Retains the primary context. Throws sdk::Failure(UNAVAILABLE) naming the reason when the
  /// driver is unusable or `config.ordinal` is out of range.
  explicit CudaDevice(const sdk::DeviceConfig& config);
  /// Destroys leftover streams and releases the primary context. The SDK's shutdown() has
  /// already synchronized, unloaded the modules and swept the ledger. Never throws.
  ~CudaDevice() override;

  // memory
  std::uint64_t vendor_alloc(std::uint64_t bytes) override;
  std::uint64_t vendor_alloc_managed(std::uint64_t bytes) override;
  void vendor_free(std::uint64_t ptr, gpuplug_alloc_kind_t kind) override;
  void memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) override;
  void device_info(gpuplug_device_info_t& out) override;

  // copies and memset
  void copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) override;
  void copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) override;
  void copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) override;
  void copy_h2d_async(std::uint64_t dst, const void* src, std::uint64_t bytes,
                      std::uint64_t stream) override;
  void copy_d2h_async(void* dst, std::uint64_t src, std::uint64_t bytes,
                      std::uint64_t stream) override;
  void copy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                      std::uint64_t stream) override;
  void memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                 std::uint64_t stream) override;

  // streams
  std::uint64_t stream_create() override;
  void stream_destroy(std::uint64_t stream) override;
  void stream_synchronize(std::uint64_t stream) override;
  void synchronize() override;

  // modules (modules.cpp)
  sdk::VendorModule vendor_load_module(std::string_view name,
                                       std::span<const std::byte> image) override;
  void vendor_unload_module(sdk::VendorModule module) noexcept override;
  std::uint64_t vendor_get_function(sdk::VendorModule module, const std::string& func) override;
  std::vector<std::string> vendor_list_functions(sdk::VendorModule module) override;
  std::optional<std::pair<std::uint64_t, std::uint64_t>> vendor_get_global(
      sdk::VendorModule module, const std::string& symbol) override;
  std::vector<std::string> module_file_extensions() const override;

  // launch: one cuCtxSetCurrent and one cuLaunchKernel; allocates only to describe a failure.
  void launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block,
              std::uint32_t shared_bytes, std::uint64_t stream, void** params) override;

 private:
  /// Makes this device's primary context current on the calling thread (cheap: a TLS store).
  void make_current() const;
  /// The CUstream for `stream`; 0 is the legacy default stream. Failure(INVALID_ARGUMENT) when
  /// `stream` is not one of this instance's live streams.
  CUstream checked_stream(std::uint64_t stream) const;
  /// Failure(INVALID_ARGUMENT) unless [ptr, ptr + bytes) is device memory this instance may use
  /// (see the class comment). `op` and `role` name the operation and operand in the message.
  void check_device_range(std::uint64_t ptr, std::uint64_t bytes, const char* op, const char* role);

  const DriverApi& api_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;  // the retained primary context; released by the destructor
  bool managed_memory_ = false;  // CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY
  mutable std::shared_mutex streams_mutex_;
  std::unordered_set<CUstream> streams_;  // live streams made by stream_create

  struct Global {
    std::uint64_t bytes;
    sdk::VendorModule module;
  };
  mutable std::shared_mutex globals_mutex_;
  // Module globals returned by vendor_get_global, by address; a module's are erased when it is
  // unloaded, so a stale global is refused like any unknown address.
  std::map<std::uint64_t, Global> globals_;
};

}  // namespace gpuplug::cuda
