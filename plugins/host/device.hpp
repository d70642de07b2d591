// SPDX-License-Identifier: Apache-2.0
// HostDevice: the CPU as a gpuplug device (aligned host memory, executor, ELF kernel modules).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "captures.hpp"
#include "driver.hpp"
#include "kernel_handles.hpp"
#include "gpuplug/support/regular_file.hpp"
#include "image.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::host {

// The host kernel calling convention (declared in <gpuplug/abi.h>, implemented here):
//  - A kernel module is an ELF shared object for this machine. Each kernel is an exported
//    (default-visibility, extern "C") function of type gpuplug_host_kernel_fn:
//        void kernel(const gpuplug_host_block_t* block, void* const* params);
//  - `launch` calls it once per block of the grid; blocks of one launch run concurrently on
//    the device's worker pool, in no particular order. The kernel loops over the block's
//    threads itself (threadIdx is the loop variable) and must not rely on blocks cooperating.
//  - params[i] points at argument i, as for cuLaunchKernel; a device pointer `float* x`
//    arrives as `*(const std::uint64_t*)params[i]`, a uint32_t n as `*(const uint32_t*)...`.
//    params are valid only during the launch (which returns when every block has run).
//  - block->shared points at block->shared_bytes bytes (256-byte aligned) private to the
//    block for the call; its content is undefined at block start.
//  - Published metadata is a 4-byte exported object, e.g.
//        extern "C" GPUPLUG_PLUGIN_EXPORT const uint32_t gemm_f32_n_tile = 64;
//    read by get_global (address and st_size from the dynamic symbol table).
//  - Modules are trusted code: a kernel that faults takes the process down, as on any CPU. A
//    kernel that throws does not: the executor catches it and reports LAUNCH_FAILED naming the
//    kernel and the exception (driver.hpp, "Kernel failures").
//  - A function handle (get_function's value, a KernelHandle in the core) names this instance
//    and a slot of its KernelHandles table (kernel_handles.hpp), which points at a KernelRecord
//    owned by its module: the kernel's address and its name for messages. launch checks the
//    instance's serial and the slot before it reads anything, so a handle of another host
//    instance (live or destroyed), one never handed out, or one whose module was unloaded is
//    refused (INVALID_ARGUMENT) instead of running, or crashing, there.

class HostDevice;

/// What a host function handle points at; lives as long as its module is loaded.
struct KernelRecord {
  gpuplug_host_kernel_fn fn;  // the kernel
  std::string name;           // "module::function", escaped for messages
  std::string func;           // the function's name, escaped for messages
  // The argument sizes the module publishes as `<func>_args` (<gpuplug/kernel_args.h>), checked
  // when get_function resolved the kernel; empty when it publishes none (or a malformed one), in
  // which case a capture cannot copy the launch's arguments.
  std::optional<std::vector<std::uint32_t>> arg_sizes;
};

/// Device memory is plain host memory, so both kinds are host-accessible and 256-byte aligned.
inline constexpr std::size_t kHostAlignment = 256;

/// The most shared memory one launch may ask per block (launch refuses more, device_info reports
/// it): each worker taking part in a launch allocates this much for its blocks, so a bound keeps
/// a bad shared_bytes from asking threads x 4 GiB of the host.
inline constexpr std::uint32_t kHostMaxSharedBytes = 64u << 20;

/// One host "device": the CPU with its own worker pool (the driver, driver.hpp); the ledger,
/// modules and streams are the SDK's. Device memory is what the ledger holds plus the segments
/// of loaded modules (a CPU would fault on anything else, where a GPU driver refuses it).
class HostDevice final : public sdk::Device {
 public:
  /// Honours the common options plus "threads" (worker count; default: the CPUs this process
  /// may run on). Throws Failure(INVALID_ARGUMENT) for a bad "threads" value.
  explicit HostDevice(const sdk::DeviceConfig& config);
  /// Runs shutdown() (synchronize, unload modules, sweep, streams) while the executor exists.
  ~HostDevice() override;

  std::uint64_t vendor_alloc(std::uint64_t bytes) override;
  std::uint64_t vendor_alloc_managed(std::uint64_t bytes) override;
  void vendor_free(std::uint64_t ptr, gpuplug_alloc_kind_t kind) override;
  void vendor_memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) override;
  void vendor_device_info(gpuplug_device_info_t& out) override;
  /// The segments of loaded modules: read_write where writable, read where read-only.
  sdk::Access vendor_owns_range(std::uint64_t ptr, std::uint64_t bytes) override;

  void vendor_copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) override;
  void vendor_copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) override;
  void vendor_copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) override;
  void vendor_copy_h2d_async(std::uint64_t dst, const void* src, std::uint64_t bytes,
                             std::uint64_t stream) override;
  void vendor_copy_h2d_async_retained(std::uint64_t dst, const void* src, std::uint64_t bytes,
                                      std::uint64_t stream) override;
  void vendor_copy_d2h_async(void* dst, std::uint64_t src, std::uint64_t bytes,
                             std::uint64_t stream) override;
  void vendor_copy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                             std::uint64_t stream) override;
  void vendor_memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                        std::uint64_t stream) override;
  // Pitched 2D copies (ABI 1.3): one executor operation each; the h2d source is staged into it.
  void vendor_copy_h2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch, const void* src,
                                std::uint64_t src_pitch, std::uint64_t width,
                                std::uint64_t height, std::uint64_t stream) override;
  void vendor_copy_d2h_2d_async(void* dst, std::uint64_t dst_pitch, std::uint64_t src,
                                std::uint64_t src_pitch, std::uint64_t width,
                                std::uint64_t height, std::uint64_t stream) override;
  void vendor_copy_d2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch, std::uint64_t src,
                                std::uint64_t src_pitch, std::uint64_t width,
                                std::uint64_t height, std::uint64_t stream) override;
  // Peer copies (ABI 1.2): a copy on this device's executor from another host device's memory
  // (plain host memory too); "pinned" memory is page-aligned host memory.
  void vendor_copy_peer_async(std::uint64_t dst, sdk::Device& source, std::uint64_t src,
                              std::uint64_t bytes, std::uint64_t stream) override;
  void* vendor_host_alloc_pinned(std::uint64_t bytes) override;
  void vendor_host_free_pinned(void* p) noexcept override;
  // Mapped host memory (ABI 1.3): zeroed page-aligned host memory, whose device address is its
  // own (the device is this process); managed memory's host address is its own too.
  sdk::MappedHost vendor_alloc_host_mapped(std::uint64_t bytes) override;
  void vendor_free_host_mapped(void* host) override;
  std::uint64_t vendor_host_ptr_to_device(void* host) override;
  void* vendor_host_address(std::uint64_t ptr) override;

  std::uint64_t vendor_stream_create() override;
  std::uint64_t vendor_stream_create_flags(std::uint32_t flags) override;
  void vendor_stream_destroy(std::uint64_t stream) override;
  void vendor_stream_synchronize(std::uint64_t stream) override;
  void vendor_synchronize() override;

  // interop handles (ABI 1.2): the native stream is the executor's queue id; any host memory
  // may be imported (the CPU reaches all of it); an imported stream is an alias of a queue.
  sdk::NativeStreamHandles vendor_native_handles(std::uint64_t stream) override;
  void vendor_check_import(std::uint64_t address, std::uint64_t bytes) override;
  std::uint64_t vendor_import_stream(void* native) override;
  void vendor_forget_stream(std::uint64_t stream) override;

  // events: the executor's stream-ordered events (driver.hpp)
  std::uint64_t vendor_event_create() override;
  void vendor_event_destroy(std::uint64_t event) override;
  void vendor_event_record(std::uint64_t event, std::uint64_t stream) override;
  void vendor_stream_wait_event(std::uint64_t stream, std::uint64_t event) override;
  void vendor_event_synchronize(std::uint64_t event) override;
  bool vendor_event_query(std::uint64_t event) override;
  float vendor_event_elapsed_ms(std::uint64_t start, std::uint64_t end) override;

  // modules.cpp
  sdk::VendorModule vendor_load_module(std::string_view name,
                                       std::span<const std::byte> image) override;
  /// Loads by path (realpath of the file), so that $ORIGIN is the module's folder and it can
  /// find sibling libraries; see modules.cpp for the checks against the file changing.
  sdk::VendorModule vendor_load_module_file(std::string_view name,
                                            std::span<const std::byte> image,
                                            const support::RegularFile& file) override;
  void vendor_unload_module(sdk::VendorModule module) noexcept override;
  std::uint64_t vendor_get_function(sdk::VendorModule module, const std::string& func) override;
  std::vector<std::string> vendor_list_functions(sdk::VendorModule module) override;
  std::optional<sdk::VendorGlobal> vendor_get_global(sdk::VendorModule module,
                                                     const std::string& symbol) override;
  std::vector<std::string> vendor_module_file_extensions() const override { return {".so"}; }

  void vendor_launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                     std::uint32_t shared_bytes, std::uint64_t stream, void** params) override;

  // graphs (ABI 1.3; device_graphs.cpp): the capture machinery is capture.hpp's
  void vendor_begin_capture(std::uint64_t stream, std::int32_t mode) override;
  std::uint64_t vendor_end_capture(std::uint64_t stream) override;
  void vendor_graph_launch(std::uint64_t graph, std::uint64_t stream) override;
  void vendor_graph_destroy(std::uint64_t graph) override;
  void vendor_abort_capture(std::uint64_t stream) override;
  bool vendor_is_capturing(std::uint64_t stream) override;

 private:
  /// A loaded module's mapped segment: module memory, which copies may name.
  struct Segment {
    ImageSegment range;
    std::uintptr_t module;  // the HostModule it belongs to
  };
  // Work queued while captures are active (device_graphs.cpp): true when `stream` captures and
  // the operation was recorded; false to run it now; Failure when it invalidates a capture.
  [[gnu::cold]] bool captured_copy(std::uint64_t stream, const char* op, void* dst,
                                   const void* src, std::uint64_t bytes, bool stage);
  /// The same for a pitched 2D copy: one recorded copy per row.
  [[gnu::cold]] bool captured_copy_2d(std::uint64_t stream, const char* op, void* dst,
                                      std::uint64_t dst_pitch, const void* src,
                                      std::uint64_t src_pitch, std::uint64_t width,
                                      std::uint64_t height, bool stage);
  [[gnu::cold]] bool captured_fill(std::uint64_t stream, void* dst, std::uint8_t value,
                                   std::uint64_t bytes);
  [[gnu::cold]] bool captured_launch(const KernelRecord& kernel, gpuplug_dim3_t grid,
                                     gpuplug_dim3_t block, std::uint32_t shared_bytes,
                                     std::uint64_t stream, void** params);
  [[noreturn, gnu::cold]] void fail_handle(std::uint64_t function,
                                           KernelHandles::Verdict verdict) const;
  /// Checks `image` (a full ELF validation), then loads it from `path` (a file) or, when `path`
  /// is empty, from a memfd copy of the bytes.
  sdk::VendorModule load(std::string_view name, std::span<const std::byte> image,
                         const std::string& path, const support::RegularFile* file);
  void add_segments(const std::vector<ImageSegment>& segments, std::uintptr_t module);
  void remove_segments(std::uintptr_t module) noexcept;

  mutable std::shared_mutex segments_mutex_;
  std::vector<Segment> segments_;  // guarded by segments_mutex_
  KernelHandles kernel_handles_;   // the handles get_function hands out (records: the modules')
  sdk::Captures captures_;         // active stream captures and live graphs (captures.hpp)
  Executor executor_;              // last: destroyed first, after shutdown() in ~HostDevice
};

// Facts about this machine, shared by probe/describe (plugin.cpp) and device_info.
/// "model name" from /proc/cpuinfo (or the first "Hardware"/"Processor" line); "host CPU" if none.
std::string cpu_model_name();
/// uname's machine ("x86_64", "aarch64").
std::string machine_arch();
/// Physical memory from sysinfo(2).
void host_memory(std::uint64_t& free_bytes, std::uint64_t& total_bytes);
/// Fills a device description for the machine; `threads` is the worker count to report.
void describe_host(gpuplug_device_info_t& out, unsigned threads);

// Identity (identity.cpp).
/// The device UUID: SHA-256 of machine-id(5) (/etc/machine-id, else /var/lib/dbus/machine-id)
/// and `cpu_model`, keyed by gpuplug, as an RFC 9562 version-8 UUID in the 8-4-4-4-12 form. The
/// same on every run and in every process of the machine; "" when the machine has no valid id.
std::string host_uuid(std::string_view cpu_model);
/// machine_arch() with its x86-64 micro-architecture level: "x86_64-v4", "x86_64-v3", ...
std::string host_arch();
/// uname's release ("6.1.0-18-amd64"): the host backend's "driver version".
std::string kernel_release();
/// SHA-256 of `data` (FIPS 180-4).
std::array<unsigned char, 32> sha256(std::string_view data) noexcept;

}  // namespace gpuplug::host
