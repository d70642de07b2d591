// SPDX-License-Identifier: Apache-2.0
// HostDevice: memory, copies, streams and launches of the host backend; machine facts for probe.
#include "device.hpp"

#include <sys/sysinfo.h>
#include <sys/utsname.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <string>

#include "gpuplug/support/text.hpp"

namespace gpuplug::host {
namespace {

unsigned threads_option(const sdk::DeviceConfig& config) {
  const auto it = config.options.find("threads");
  if (it == config.options.end()) return machine_threads();
  const std::optional<std::uint64_t> n = sdk::parse_unsigned(it->second);
  if (!n || *n == 0 || *n > 4096)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "option threads='" + it->second + "' is not a worker count (1 to 4096)");
  return static_cast<unsigned>(*n);
}

void* as_ptr(std::uint64_t p) noexcept {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p));
}

std::size_t as_size(std::uint64_t bytes) {
  if (bytes > std::numeric_limits<std::size_t>::max())
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              std::to_string(bytes) + " bytes do not fit in this address space");
  return static_cast<std::size_t>(bytes);
}

std::uint64_t host_alloc(std::uint64_t bytes, const char* what) {
  // aligned_alloc wants a multiple of the alignment; bytes > 0 (the SDK turns 0 into 1).
  const std::uint64_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* p = rounded < bytes ? nullptr : std::aligned_alloc(kHostAlignment, as_size(rounded));
  if (p == nullptr)
    sdk::fail(GPUPLUG_STATUS_OUT_OF_MEMORY, std::string(what) + " of " +
                                                support::describe_bytes(bytes) +
                                                " failed: the host is out of memory");
  return reinterpret_cast<std::uintptr_t>(p);
}

}  // namespace

// ---- machine facts -----------------------------------------------------------------------------

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, fallback;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(value.begin());
    if (value.empty()) continue;
    if (key == "model name") return value;  // x86, and aarch64 kernels that provide it
    if (fallback.empty() &&
        (key == "Hardware" || key == "Processor" || key == "cpu model" || key == "uarch"))
      fallback = value;
  }
  return fallback.empty() ? "host CPU" : fallback;
}

std::string machine_arch() {
  utsname u{};
  if (uname(&u) == 0 && u.machine[0] != '\0') return u.machine;
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

void host_memory(std::uint64_t& free_bytes, std::uint64_t& total_bytes) {
  struct sysinfo si {};
  if (sysinfo(&si) != 0)
    sdk::fail(GPUPLUG_STATUS_DEVICE_ERROR,
              std::string("sysinfo failed: ") + support::errno_text(errno));
  const std::uint64_t unit = si.mem_unit == 0 ? 1 : si.mem_unit;
  total_bytes = static_cast<std::uint64_t>(si.totalram) * unit;
  free_bytes = static_cast<std::uint64_t>(si.freeram) * unit;
}

void describe_host(gpuplug_device_info_t& out, unsigned threads) {
  const std::string model = cpu_model_name();
  std::snprintf(out.name, sizeof out.name, "%s", model.c_str());
  std::snprintf(out.uuid, sizeof out.uuid, "%s", host_uuid(model).c_str());
  std::snprintf(out.arch, sizeof out.arch, "%s", host_arch().c_str());
  host_memory(out.free_memory, out.total_memory);
  out.compute_units = threads;
  out.managed_memory = 1;             // host memory is reachable from both sides
  out.concurrent_managed_access = 1;  // "kernels" are host threads: no migration, no fault
  // ABI 1.1: a CPU has no PCI address; a "warp" is one thread (a block's threads are a loop).
  out.has_pci = 0;
  out.warp_size = 1;
  out.max_shared_memory_per_block = kHostMaxSharedBytes;
  std::snprintf(out.driver_version, sizeof out.driver_version, "%s", kernel_release().c_str());
  out.runtime_version[0] = '\0';
  out.device_class = GPUPLUG_DEVICE_CLASS_CPU;
  out.peak_gflops = 0;  // not known honestly without measuring
}

// ---- HostDevice --------------------------------------------------------------------------------

HostDevice::HostDevice(const sdk::DeviceConfig& config)
    : sdk::Device(config), executor_(threads_option(config)) {}

HostDevice::~HostDevice() { shutdown(); }

// alloc and free are the "potentially unsafe" calls of a global or thread-local capture
// (capture.hpp). A refused free has freed the memory already (the ledger forgot it before the
// hook ran), and only invalidates the capture.
std::uint64_t HostDevice::vendor_alloc(std::uint64_t bytes) {
  if (captures_.any()) [[unlikely]]
    captures_.check_unsafe_call("alloc");
  return host_alloc(bytes, "device allocation");
}

std::uint64_t HostDevice::vendor_alloc_managed(std::uint64_t bytes) {
  if (captures_.any()) [[unlikely]]
    captures_.check_unsafe_call("alloc_managed");
  return host_alloc(bytes, "managed allocation");
}

// free first waits for every stream's queued work, as cuMemFree and hipFree synchronize the
// device: memory freed while a queued copy or memset still names it is never touched afterwards.
void HostDevice::vendor_free(std::uint64_t ptr, gpuplug_alloc_kind_t /*kind*/) {
  executor_.wait_all();
  std::free(as_ptr(ptr));
  if (captures_.any()) [[unlikely]]
    captures_.check_unsafe_call("free");
}

void HostDevice::vendor_memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) {
  host_memory(free_bytes, total_bytes);
}

void HostDevice::vendor_device_info(gpuplug_device_info_t& out) {
  describe_host(out, executor_.workers());
}

sdk::Access HostDevice::vendor_owns_range(std::uint64_t ptr, std::uint64_t bytes) {
  std::shared_lock lock(segments_mutex_);
  for (const Segment& s : segments_) {
    if (ptr < s.range.begin || ptr >= s.range.end) continue;
    if (bytes > s.range.end - ptr) break;  // runs off the end of the segment
    return s.range.writable ? sdk::Access::read_write : sdk::Access::read;
  }
  return sdk::Access::none;
}

void HostDevice::add_segments(const std::vector<ImageSegment>& segments, std::uintptr_t module) {
  std::unique_lock lock(segments_mutex_);
  for (const ImageSegment& s : segments) segments_.push_back(Segment{s, module});
}

void HostDevice::remove_segments(std::uintptr_t module) noexcept {
  std::unique_lock lock(segments_mutex_);
  std::erase_if(segments_, [module](const Segment& s) { return s.module == module; });
}

// Copies and memset run on the executor: in order on their stream, synchronously on stream 0.
// While a stream captures (captures_.any(), one relaxed load otherwise), work on a capturing
// stream is recorded instead (device_graphs.cpp), and work on stream 0 invalidates the captures.
void HostDevice::vendor_copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) {
  if (captures_.any()) [[unlikely]]
    captured_copy(0, "copy_h2d", as_ptr(dst), src, bytes, false);
  executor_.copy(0, as_ptr(dst), src, as_size(bytes));
}

void HostDevice::vendor_copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) {
  if (captures_.any()) [[unlikely]]
    captured_copy(0, "copy_d2h", dst, as_ptr(src), bytes, false);
  executor_.copy(0, dst, as_ptr(src), as_size(bytes));
}

void HostDevice::vendor_copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) {
  if (captures_.any()) [[unlikely]]
    captured_copy(0, "copy_d2d", as_ptr(dst), as_ptr(src), bytes, false);
  executor_.copy(0, as_ptr(dst), as_ptr(src), as_size(bytes));
}

// The source may be reused once the call returns, so it is staged (pinned memory too: on a CPU it
// is ordinary memory, and a copy of it is cheaper than waiting for the stream).
void HostDevice::vendor_copy_h2d_async(std::uint64_t dst, const void* src, std::uint64_t bytes,
                                       std::uint64_t stream) {
  if (captures_.any() &&
      captured_copy(stream, "copy_h2d_async", as_ptr(dst), src, bytes, true)) [[unlikely]]
    return;
  executor_.copy_staged(stream, as_ptr(dst), src, as_size(bytes));
}

void HostDevice::vendor_copy_h2d_async_retained(std::uint64_t dst, const void* src,
                                                std::uint64_t bytes, std::uint64_t stream) {
  if (captures_.any() &&
      captured_copy(stream, "copy_h2d_async_retained", as_ptr(dst), src, bytes, false)) [[unlikely]]
    return;
  executor_.copy(stream, as_ptr(dst), src, as_size(bytes));
}

void HostDevice::vendor_copy_d2h_async(void* dst, std::uint64_t src, std::uint64_t bytes,
                                       std::uint64_t stream) {
  if (captures_.any() &&
      captured_copy(stream, "copy_d2h_async", dst, as_ptr(src), bytes, false)) [[unlikely]]
    return;
  executor_.copy(stream, dst, as_ptr(src), as_size(bytes));
}

void HostDevice::vendor_copy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                                       std::uint64_t stream) {
  if (captures_.any() &&
      captured_copy(stream, "copy_d2d_async", as_ptr(dst), as_ptr(src), bytes, false)) [[unlikely]]
    return;
  executor_.copy(stream, as_ptr(dst), as_ptr(src), as_size(bytes));
}

void HostDevice::vendor_copy_h2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch,
                                          const void* src, std::uint64_t src_pitch,
                                          std::uint64_t width, std::uint64_t height,
                                          std::uint64_t stream) {
  if (captures_.any() && captured_copy_2d(stream, "copy_h2d_2d_async", as_ptr(dst), dst_pitch, src,
                                          src_pitch, width, height, true)) [[unlikely]]
    return;
  executor_.copy_2d(stream, as_ptr(dst), as_size(dst_pitch), src, as_size(src_pitch),
                    as_size(width), as_size(height), true);
}

void HostDevice::vendor_copy_d2h_2d_async(void* dst, std::uint64_t dst_pitch, std::uint64_t src,
                                          std::uint64_t src_pitch, std::uint64_t width,
                                          std::uint64_t height, std::uint64_t stream) {
  if (captures_.any() && captured_copy_2d(stream, "copy_d2h_2d_async", dst, dst_pitch, as_ptr(src),
                                          src_pitch, width, height, false)) [[unlikely]]
    return;
  executor_.copy_2d(stream, dst, as_size(dst_pitch), as_ptr(src), as_size(src_pitch),
                    as_size(width), as_size(height), false);
}

void HostDevice::vendor_copy_d2d_2d_async(std::uint64_t dst, std::uint64_t dst_pitch,
                                          std::uint64_t src, std::uint64_t src_pitch,
                                          std::uint64_t width, std::uint64_t height,
                                          std::uint64_t stream) {
  if (captures_.any() && captured_copy_2d(stream, "copy_d2d_2d_async", as_ptr(dst), dst_pitch,
                                          as_ptr(src), src_pitch, width, height, false))
      [[unlikely]]
    return;
  executor_.copy_2d(stream, as_ptr(dst), as_size(dst_pitch), as_ptr(src), as_size(src_pitch),
                    as_size(width), as_size(height), false);
}

void HostDevice::vendor_copy_peer_async(std::uint64_t dst, sdk::Device& /*source*/,
                                        std::uint64_t src, std::uint64_t bytes,
                                        std::uint64_t stream) {
  // The source is another host device: its memory is this process's, readable from here.
  if (captures_.any() &&
      captured_copy(stream, "copy_peer_async", as_ptr(dst), as_ptr(src), bytes, false)) [[unlikely]]
    return;
  executor_.copy(stream, as_ptr(dst), as_ptr(src), as_size(bytes));
}

void* HostDevice::vendor_host_alloc_pinned(std::uint64_t bytes) {
  // Page-aligned, the alignment a GPU runtime's pinned memory has; a CPU needs no locking.
  constexpr std::size_t page = 4096;
  if (bytes > std::numeric_limits<std::size_t>::max() - page)
    sdk::fail(GPUPLUG_STATUS_OUT_OF_MEMORY, "host_alloc_pinned: " + std::to_string(bytes) +
                                                " bytes is more than the address space");
  void* p = std::aligned_alloc(page, (as_size(bytes) + page - 1) / page * page);
  if (p == nullptr)
    sdk::fail(GPUPLUG_STATUS_OUT_OF_MEMORY,
              "host_alloc_pinned: no host memory for " + std::to_string(bytes) + " bytes");
  return p;
}

void HostDevice::vendor_host_free_pinned(void* p) noexcept { std::free(p); }

sdk::MappedHost HostDevice::vendor_alloc_host_mapped(std::uint64_t bytes) {
  void* p = vendor_host_alloc_pinned(bytes);
  std::memset(p, 0, as_size(bytes));
  return {p, vendor_host_ptr_to_device(p)};
}
void HostDevice::vendor_free_host_mapped(void* host) { std::free(host); }
std::uint64_t HostDevice::vendor_host_ptr_to_device(void* host) {
  return reinterpret_cast<std::uintptr_t>(host);
}
void* HostDevice::vendor_host_address(std::uint64_t ptr) { return as_ptr(ptr); }

void HostDevice::vendor_memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                                  std::uint64_t stream) {
  if (captures_.any() && captured_fill(stream, as_ptr(dst), value, bytes)) [[unlikely]]
    return;
  executor_.fill(stream, as_ptr(dst), value, as_size(bytes));
}

std::uint64_t HostDevice::vendor_stream_create() { return executor_.create_stream(); }
std::uint64_t HostDevice::vendor_stream_create_flags(std::uint32_t flags) {
  return executor_.create_stream(flags != GPUPLUG_STREAM_NON_BLOCKING);
}

void HostDevice::vendor_stream_destroy(std::uint64_t stream) {
  if (captures_.any()) [[unlikely]]
    captures_.forget_stream(stream);
  executor_.destroy_stream(stream);
}

void HostDevice::vendor_stream_synchronize(std::uint64_t stream) {
  if (captures_.any()) [[unlikely]]
    captures_.check_synchronize(stream, "stream_synchronize");
  executor_.synchronize_stream(stream);
}

void HostDevice::vendor_synchronize() {
  if (captures_.any()) [[unlikely]]
    captures_.check_device_synchronize("synchronize");
  executor_.synchronize();
}

// Interop: the SDK checked `stream` (0 or live) and the import range (non-null, no wrap, no
// overlap with the ledger).
sdk::NativeStreamHandles HostDevice::vendor_native_handles(std::uint64_t stream) {
  return sdk::NativeStreamHandles{
      0, nullptr, reinterpret_cast<void*>(static_cast<std::uintptr_t>(executor_.queue_of(stream)))};
}

// Host "device memory" is process memory: any of it is this device's.
void HostDevice::vendor_check_import(std::uint64_t, std::uint64_t) {}

std::uint64_t HostDevice::vendor_import_stream(void* native) {
  return executor_.alias_stream(reinterpret_cast<std::uintptr_t>(native));
}

// The alias goes (after its work); the queue stays while another value runs on it.
void HostDevice::vendor_forget_stream(std::uint64_t stream) {
  if (captures_.any()) [[unlikely]]
    captures_.forget_stream(stream);
  executor_.destroy_stream(stream);
}

// Events are the executor's; the SDK's EventSet has checked the handles already.
std::uint64_t HostDevice::vendor_event_create() { return executor_.create_event(); }
void HostDevice::vendor_event_destroy(std::uint64_t event) { executor_.destroy_event(event); }
void HostDevice::vendor_event_record(std::uint64_t event, std::uint64_t stream) {
  if (captures_.any() && captures_.record_event(event, stream)) [[unlikely]]
    return;
  executor_.record_event(event, stream);
}
void HostDevice::vendor_stream_wait_event(std::uint64_t stream, std::uint64_t event) {
  if (captures_.any() &&
      captures_.wait_event(stream, event, executor_.blocks_with_default(stream))) [[unlikely]]
    return;
  executor_.wait_event(stream, event);
}
void HostDevice::vendor_event_synchronize(std::uint64_t event) {
  executor_.synchronize_event(event);
}
bool HostDevice::vendor_event_query(std::uint64_t event) { return executor_.query_event(event); }
float HostDevice::vendor_event_elapsed_ms(std::uint64_t start, std::uint64_t end) {
  return executor_.elapsed_ms(start, end);
}

void HostDevice::vendor_launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                               std::uint32_t shared_bytes, std::uint64_t stream, void** params) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "launch: empty grid (" + std::to_string(grid.x) + ", " + std::to_string(grid.y) +
                  ", " + std::to_string(grid.z) + ") or block (" + std::to_string(block.x) + ", " +
                  std::to_string(block.y) + ", " + std::to_string(block.z) + ")");
  if (shared_bytes > kHostMaxSharedBytes) [[unlikely]]
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "launch: " + std::to_string(shared_bytes) +
                  " shared bytes per block is more than the host backend's " +
                  std::to_string(kHostMaxSharedBytes) +
                  " (device_info().max_shared_memory_per_block)");
  const std::uint64_t xy = static_cast<std::uint64_t>(grid.x) * grid.y;
  if (xy > std::numeric_limits<std::uint64_t>::max() / grid.z)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "launch: the grid has more than 2^64 blocks");
  // The handle is checked before anything it names is read (kernel_handles.hpp).
  const KernelHandles::Found kernel = kernel_handles_.find(function);
  if (kernel.verdict != KernelHandles::Verdict::ok) [[unlikely]]
    fail_handle(function, kernel.verdict);
  if (captures_.any() &&
      captured_launch(*kernel.record, grid, block, shared_bytes, stream, params)) [[unlikely]]
    return;
  executor_.launch(stream, kernel.record->fn, kernel.record->name, grid, block, shared_bytes,
                   params);
}

void HostDevice::fail_handle(std::uint64_t function, KernelHandles::Verdict verdict) const {
  const std::string handle = "launch: kernel handle " + support::hex(function);
  switch (verdict) {
    case KernelHandles::Verdict::foreign:
      sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
                handle + " belongs to another backend instance (host instance " +
                    std::to_string(function >> 32) + ", live or destroyed), not this one (" +
                    std::to_string(kernel_handles_.serial()) +
                    "): resolve the kernel with this backend's get_function / kernel()");
    case KernelHandles::Verdict::unloaded:
      sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
                handle + " names a kernel whose module was unloaded: load the module again and "
                         "resolve the kernel anew");
    case KernelHandles::Verdict::unknown:
    case KernelHandles::Verdict::ok:
      break;
  }
  sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
            handle + " was never handed out by this backend instance's get_function");
}

}  // namespace gpuplug::host
