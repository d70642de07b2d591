// SPDX-License-Identifier: Apache-2.0
// Value types shared by the whole C++ API: handles, dimensions, statuses and the one error type.
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

#include <gpuplug/abi.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

GPUPLUG_API_BEGIN
namespace gpuplug {

/// Outcome of an operation; mirrors GPUPLUG_STATUS_* one to one.
enum class Status : std::int32_t {
  success = GPUPLUG_STATUS_SUCCESS,
  invalid_argument = GPUPLUG_STATUS_INVALID_ARGUMENT,
  out_of_memory = GPUPLUG_STATUS_OUT_OF_MEMORY,
  not_found = GPUPLUG_STATUS_NOT_FOUND,
  unsupported = GPUPLUG_STATUS_UNSUPPORTED,
  unavailable = GPUPLUG_STATUS_UNAVAILABLE,
  invalid_image = GPUPLUG_STATUS_INVALID_IMAGE,
  launch_failed = GPUPLUG_STATUS_LAUNCH_FAILED,
  device_error = GPUPLUG_STATUS_DEVICE_ERROR,
  internal = GPUPLUG_STATUS_INTERNAL,
  capture_invalidated = GPUPLUG_STATUS_CAPTURE_INVALIDATED,  ///< ABI 1.3: see docs/graphs.md
};

/// "invalid_argument", "out_of_memory", ...; "unknown status N" for codes outside the enum.
std::string to_string(Status s);

/// The one exception type of the C++ API: a status an application can switch on, and the
/// structured parts of what failed.
///
/// what() reads "<backend>: <operation>: <message>", each part left out when empty, e.g.
/// "cuda:0: copy_h2d: range [0x7f.., +4096) overruns the allocation". The operation appears
/// once: message() never repeats it.
///
/// A failure to choose a backend (PluginRegistry::select / create / create_all / dry_run: a
/// malformed selector, an unknown or unusable name, nothing found) has operation "select"; a chosen
/// backend whose create refused the options or layers has operation "create". Their statuses:
///   not_found         no plugin of that name (a near miss is suggested: "did you mean cuda?"),
///                     a plugin without the device asked for (ordinal out of range, no device),
///                     or select() before discover();
///   unavailable       the plugin is known but its driver cannot be used here (missing, too old,
///                     failed to load or probe), or "auto" / a list found nothing usable;
///   invalid_argument  a malformed selector (or GPUPLUG_BACKEND value), or options the plugin
///                     refused ("bad option").
class Error : public std::runtime_error {
 public:
  Error(Status status, std::string backend, std::string message);
  /// As above, with the operation that failed ("copy_h2d", "create", "select").
  Error(Status status, std::string backend, std::string operation, std::string message);
  Status status() const noexcept { return status_; }
  const std::string& backend() const noexcept { return backend_; }  // "cuda:0", "" when none
  const std::string& operation() const noexcept { return operation_; }  // "copy_h2d", "" when none
  /// Without the backend and operation prefixes.
  const std::string& message() const noexcept { return message_; }

 private:
  Status status_;
  std::string backend_;
  std::string operation_;
  std::string message_;
};

/// A resolved kernel function of one backend. 0 is null. Only meaningful to the backend that made it.
struct KernelHandle {
  std::uint64_t value = 0;
  explicit operator bool() const noexcept { return value != 0; }
  friend auto operator<=>(const KernelHandle&, const KernelHandle&) = default;
};

/// A device (or managed) address of one backend. 0 is null.
struct DevicePtr {
  std::uint64_t value = 0;
  explicit operator bool() const noexcept { return value != 0; }
  template <class T>
  T* as() const noexcept {  // for host-visible memory (host backend, managed memory)
    return reinterpret_cast<T*>(static_cast<std::uintptr_t>(value));
  }
  DevicePtr operator+(std::uint64_t bytes) const noexcept { return DevicePtr{value + bytes}; }
  friend auto operator<=>(const DevicePtr&, const DevicePtr&) = default;
};

/// A stream of one backend; the default-constructed value is the default stream.
struct Stream {
  std::uint64_t value = 0;
  friend auto operator<=>(const Stream&, const Stream&) = default;
};

/// An event of one backend (ABI 1.1): a point in a stream's work that other streams and the host
/// can wait for. 0 is null. Only meaningful to the backend that made it.
struct Event {
  std::uint64_t value = 0;
  explicit operator bool() const noexcept { return value != 0; }
  friend auto operator<=>(const Event&, const Event&) = default;
};

/// A replayable graph of one backend (ABI 1.3): the work a stream capture recorded, instantiated.
/// 0 is null. Only meaningful to the backend that made it; lives until destroy_graph or the
/// backend's destruction.
struct Graph {
  std::uint64_t value = 0;
  explicit operator bool() const noexcept { return value != 0; }
  friend auto operator<=>(const Graph&, const Graph&) = default;
};

/// What a stream capture refuses from other work (CUDA's cudaStreamCaptureMode, same values):
/// global: alloc/free of the device from any thread invalidates the capture; thread: from the
/// capturing thread; relaxed: nothing is refused for the capture's sake.
enum class CaptureMode : std::int32_t {
  global = GPUPLUG_CAPTURE_MODE_GLOBAL,
  thread = GPUPLUG_CAPTURE_MODE_THREAD_LOCAL,
  relaxed = GPUPLUG_CAPTURE_MODE_RELAXED,
};

/// How a created stream is ordered with the default stream (CUDA's stream flags, same values).
/// non_blocking: work queued on the default stream (synchronous copies included) does not wait
/// for the stream, nor the stream's work for it, as CU_STREAM_NON_BLOCKING; the default of
/// create_stream(), as in the seed engine. blocking: ordered with the default stream like CUDA's
/// legacy default stream (each waits for the work queued on the other before).
enum class StreamFlags : std::uint32_t {
  blocking = GPUPLUG_STREAM_BLOCKING,
  non_blocking = GPUPLUG_STREAM_NON_BLOCKING,
};

struct Dim3 {
  std::uint32_t x = 1, y = 1, z = 1;
  friend bool operator==(const Dim3&, const Dim3&) = default;
};

/// One argument of a counted launch (GpuBackend::launch with a span of them): the bytes of a
/// trivially copyable value, a DevicePtr or a scalar. Values of up to 8 bytes are copied into the
/// KernelArg, so a KernelArg made from a temporary stays valid; a larger value is referred to and
/// must outlive the launch call (a launch reads its arguments before it returns). A pointer is
/// passed as its value, as cuLaunchKernel takes it.
class KernelArg {
 public:
  template <class T>
    requires(std::is_trivially_copyable_v<T> && !std::is_same_v<T, KernelArg>)
  KernelArg(const T& value) noexcept  // NOLINT(google-explicit-constructor): built from lists
      : size_(static_cast<std::uint32_t>(sizeof(T))) {
    if constexpr (sizeof(T) <= sizeof(inline_)) {
      std::memcpy(inline_, &value, sizeof(T));
      data_ = nullptr;
    } else {
      data_ = &value;
    }
  }
  /// The argument's bytes, as launch's params point to them.
  const void* data() const noexcept { return data_ != nullptr ? data_ : inline_; }
  std::uint32_t size() const noexcept { return size_; }

 private:
  alignas(8) unsigned char inline_[8] = {};
  const void* data_ = nullptr;  // a larger value, referred to; nullptr: inline_
  std::uint32_t size_ = 0;
};

/// What a module publishes of a kernel's arguments (`<func>_args`, <gpuplug/kernel_args.h>), as
/// a backend read it when the kernel was resolved; counted launches are checked against it.
struct KernelSignature {
  std::string name;                  // "axpy::axpy": module::function
  std::vector<std::uint32_t> sizes;  // bytes of each argument, in order
};

/// A published device symbol: its address on the device and its size in bytes.
struct DeviceSymbol {
  DevicePtr address;
  std::size_t bytes = 0;
};

/// key=value options passed to a plugin's create (e.g. {"device_memory_limit", "64M"}).
using Options = std::map<std::string, std::string>;

struct MemoryInfo {
  std::uint64_t free_bytes = 0;
  std::uint64_t total_bytes = 0;
};

/// What kind of device a backend drives; `auto` prefers them in this order (docs/architecture.md).
/// `unknown` comes from plugins older than ABI 1.1 and ranks as an accelerator.
enum class DeviceClass : std::int32_t {
  unknown = GPUPLUG_DEVICE_CLASS_UNKNOWN,
  discrete_gpu = GPUPLUG_DEVICE_CLASS_DISCRETE_GPU,
  integrated_gpu = GPUPLUG_DEVICE_CLASS_INTEGRATED_GPU,
  accelerator = GPUPLUG_DEVICE_CLASS_ACCELERATOR,
  cpu = GPUPLUG_DEVICE_CLASS_CPU,
  emulator = GPUPLUG_DEVICE_CLASS_EMULATOR,
};

/// "discrete_gpu", "integrated_gpu", "accelerator", "cpu", "emulator", "unknown".
std::string to_string(DeviceClass c);

/// A PCI address, domain:bus:device.function.
struct PciAddress {
  std::uint32_t domain = 0, bus = 0, device = 0, function = 0;
  friend bool operator==(const PciAddress&, const PciAddress&) = default;
};

/// "0000:c1:00.0" (lower-case hex, as lspci and CUDA_VISIBLE_DEVICES write it).
std::string to_string(const PciAddress& a);

struct DeviceInfo {
  std::uint32_t ordinal = 0;
  std::string name;
  std::string uuid;
  std::string arch;
  std::uint64_t total_memory = 0;
  std::uint64_t free_memory = 0;
  std::uint32_t compute_units = 0;
  bool managed_memory = false;
  /// The host may access managed memory while kernels run on the device. When false (most
  /// consumer GPUs, Windows, Jetson before Xavier): synchronize before touching managed memory
  /// from the host. The host backend: true.
  bool concurrent_managed_access = false;

  // ---- ABI 1.1; a plugin older than that leaves them at these defaults.
  std::optional<PciAddress> pci;       ///< nullopt: no PCI device (host) or not reported
  std::uint32_t pci_vendor_id = 0;     ///< 0x10de NVIDIA, 0x1002 AMD; 0 when none
  std::uint32_t pci_device_id = 0;
  std::uint32_t warp_size = 0;         ///< threads per warp / wavefront; 0 when not reported
  std::uint64_t max_shared_memory_per_block = 0;  ///< bytes; 0 when not reported
  std::string driver_version;          ///< "" when not reported
  std::string runtime_version;
  DeviceClass device_class = DeviceClass::unknown;
  std::uint64_t peak_gflops = 0;       ///< 0 when unknown
};

struct LedgerStats {
  std::uint64_t live_bytes = 0;
  std::uint64_t live_count = 0;
  std::uint64_t peak_bytes = 0;
  std::uint64_t live_managed_bytes = 0;
  std::uint64_t total_allocs = 0;
  std::uint64_t total_frees = 0;
  /// Mapped host memory (alloc_host_pinned): in live_count, not in live_bytes (not the device's
  /// budget). 0 from a plugin older than ABI 1.3.
  std::uint64_t live_pinned_bytes = 0;
  /// Arenas (alloc_arena): in live_count, not in live_bytes nor peak_bytes (so that a budget for
  /// transient memory is not eaten by the weights). 0 from a plugin older than ABI 1.3.
  std::uint64_t arena_bytes = 0;
};

}  // namespace gpuplug
GPUPLUG_API_END

template <>
struct std::hash<gpuplug::KernelHandle> {
  std::size_t operator()(const gpuplug::KernelHandle& h) const noexcept { return std::hash<std::uint64_t>{}(h.value); }
};
template <>
struct std::hash<gpuplug::DevicePtr> {
  std::size_t operator()(const gpuplug::DevicePtr& p) const noexcept { return std::hash<std::uint64_t>{}(p.value); }
};
template <>
struct std::hash<gpuplug::Event> {
  std::size_t operator()(const gpuplug::Event& e) const noexcept { return std::hash<std::uint64_t>{}(e.value); }
};
template <>
struct std::hash<gpuplug::Stream> {
  std::size_t operator()(const gpuplug::Stream& s) const noexcept { return std::hash<std::uint64_t>{}(s.value); }
};
