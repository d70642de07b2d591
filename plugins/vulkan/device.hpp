// SPDX-License-Identifier: Apache-2.0
// VulkanDevice: one Vulkan physical device as a gpuplug backend instance (device, queue, memory
// blocks, copies).
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <gpuplug/vulkan_handles.h>

#include "captures.hpp"
#include "driver.hpp"
#include "interval_index.hpp"
#include "plugin_sdk.hpp"
#include "spirv.hpp"
#include "staging.hpp"
#include "timeline.hpp"

namespace gpuplug::vulkan {

/// Fills `out` for usable device `ordinal` (which the SDK has checked): identity from
/// VkPhysicalDeviceProperties, the ID (UUID), driver and subgroup properties and
/// VK_EXT_pci_bus_info when offered. A CPU device (lavapipe) is class emulator. Never creates a
/// VkDevice.
void describe(const DriverApi& api, std::uint32_t ordinal, gpuplug_device_info_t& out);

/// One VkBuffer over one VkDeviceMemory, the allocations carved from it.
struct Block {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  std::uint64_t address = 0;  // vkGetBufferDeviceAddress: the device address of offset 0
  std::uint64_t size = 0;
  std::byte* mapped = nullptr;  // host-visible blocks (managed memory): the persistent mapping
  // Device blocks whose memory is also host-visible and coherent (lavapipe, integrated GPUs):
  // their persistent mapping, used only by a copy or memset that must not wait for the queue.
  std::byte* host_view = nullptr;
  bool managed = false;
  std::map<std::uint64_t, std::uint64_t> free;  // offset -> bytes, coalesced
  std::map<std::uint64_t, std::uint64_t> used;  // offset -> bytes
};

/// Where a device address lies: its block and the offset in it.
struct Location {
  Block* block = nullptr;
  std::uint64_t offset = 0;
};

/// A kernel of a loaded module (modules.cpp): what a function handle points at.
struct Kernel;

/// One backend instance: a VkDevice on physical device `config.ordinal` and up to kMaxQueues
/// queues of its compute family.
///
/// Memory (memory.cpp): a device pointer is a buffer device address. Allocations are carved from
/// large blocks (one VkBuffer each, storage | transfer src/dst | shader device address, memory
/// allocated with VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT); an interval index over the blocks maps
/// an address back to (buffer, offset). Managed memory comes from host-visible, coherent blocks,
/// mapped for their life; host_address answers from the mapping.
/// Streams (streams.cpp, timeline.hpp): a stream is a timeline semaphore and a queue (the default
/// stream has the family's first queue, other streams share the rest round-robin, or the one
/// queue there is). Each operation is one command buffer submitted to its stream's queue; it
/// waits on the semaphore values it is ordered after (its stream's latest, the legacy default
/// stream's rule, and events waited for) and signals its stream's next value. Calls return
/// once the work is queued, except those whose result the host reads (copy_d2h and its async
/// form, which waits like a pageable copy on CUDA) and the synchronous copies, which return
/// once done. vendor_free and unloading a module first wait for every stream, so a freed range
/// or pipeline is never in use by queued work. An event is a point on a stream's timeline, its
/// time a timestamp query written there.
/// Copies and memsets (copies.cpp) go through a ring of staging memory whose regions are reused
/// once their work has completed; those of managed memory run on the host once the work they
/// are ordered with has completed, and so do those of device memory the host can map while a
/// stream they are not ordered with has work pending (a non-blocking stream's kernel may wait
/// for them). Kernels (modules.cpp, launch.cpp) run as compute pipelines whose arguments are
/// push constants, recorded into the command buffer when launch is called.
/// Graphs (graphs.cpp): while a stream captures, its copies, memsets and launches are recorded
/// into an sdk::Captures instead of run (a launch checked and its push constants packed first);
/// a replay runs the recorded operations in order, as the calls would have.
/// Thread-safety: every hook may run concurrently (memory and queue each have a lock).
class VulkanDevice final : public sdk::Device {
 public:
  /// Creates the VkDevice (bufferDeviceAddress, timelineSemaphore, storageBuffer8BitAccess and
  /// shaderInt64 enabled), its queue, command buffer, fence and staging buffer. Throws
  /// sdk::Failure on a driver error.
  explicit VulkanDevice(const sdk::DeviceConfig& config);
  /// Frees every block and the device. Never throws.
  ~VulkanDevice() override;

  // memory (memory.cpp)
  std::uint64_t vendor_alloc(std::uint64_t bytes) override;
  std::uint64_t vendor_alloc_managed(std::uint64_t bytes) override;
  void vendor_free(std::uint64_t ptr, gpuplug_alloc_kind_t kind) override;
  void vendor_memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) override;
  void vendor_device_info(gpuplug_device_info_t& out) override;
  void* vendor_host_address(std::uint64_t ptr) override;
  // mapped host memory (mapped.cpp): carved from the managed (host-visible, mapped) blocks
  sdk::MappedHost vendor_alloc_host_mapped(std::uint64_t bytes) override;
  void vendor_free_host_mapped(void* host) override;
  std::uint64_t vendor_host_ptr_to_device(void* host) override;

  // copies and memset (copies.cpp): the async forms are queued on their stream (h2d staged at
  // call time), except copy_d2h_async, which returns once done
  void vendor_copy_h2d(std::uint64_t dst, const void* src, std::uint64_t bytes) override;
  void vendor_copy_d2h(void* dst, std::uint64_t src, std::uint64_t bytes) override;
  void vendor_copy_d2d(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) override;
  void vendor_copy_h2d_async(std::uint64_t dst, const void* src, std::uint64_t bytes,
                             std::uint64_t stream) override;
  void vendor_copy_d2h_async(void* dst, std::uint64_t src, std::uint64_t bytes,
                             std::uint64_t stream) override;
  void vendor_copy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                             std::uint64_t stream) override;
  void vendor_memset_d8(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                        std::uint64_t stream) override;

  // streams and events (streams.cpp): timelines (see above)
  std::uint64_t vendor_stream_create() override;
  std::uint64_t vendor_stream_create_flags(std::uint32_t flags) override;
  void vendor_stream_destroy(std::uint64_t stream) override;
  void vendor_stream_synchronize(std::uint64_t stream) override;
  void vendor_synchronize() override;
  std::uint64_t vendor_event_create() override;
  void vendor_event_destroy(std::uint64_t event) override;
  void vendor_event_record(std::uint64_t event, std::uint64_t stream) override;
  void vendor_stream_wait_event(std::uint64_t stream, std::uint64_t event) override;
  void vendor_event_synchronize(std::uint64_t event) override;
  bool vendor_event_query(std::uint64_t event) override;
  float vendor_event_elapsed_ms(std::uint64_t start, std::uint64_t end) override;

  // native handles (native.cpp): context is the stream's gpuplug_vulkan_handles_t
  // (<gpuplug/vulkan_handles.h>), stream its VkQueue; import of outside memory or streams is
  // UNSUPPORTED, saying why
  sdk::NativeStreamHandles vendor_native_handles(std::uint64_t stream) override;
  void vendor_check_import(std::uint64_t address, std::uint64_t bytes) override;
  std::uint64_t vendor_import_stream(void* native) override;

  // modules (modules.cpp): a module is a container file (container.hpp) of SPIR-V kernels and
  // read-only globals, which live in device memory; a function handle is a Kernel
  sdk::VendorModule vendor_load_module(std::string_view name,
                                       std::span<const std::byte> image) override;
  void vendor_unload_module(sdk::VendorModule module) noexcept override;
  std::uint64_t vendor_get_function(sdk::VendorModule module, const std::string& func) override;
  std::vector<std::string> vendor_list_functions(sdk::VendorModule module) override;
  std::optional<sdk::VendorGlobal> vendor_get_global(sdk::VendorModule module,
                                                     const std::string& symbol) override;
  std::vector<std::string> vendor_module_file_extensions() const override;
  // launch (launch.cpp): arguments in push constants, one pipeline per block size, grids past
  // the device's workgroup count split along x with vkCmdDispatchBase; queued on the stream
  void vendor_launch(std::uint64_t function, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                     std::uint32_t shared_bytes, std::uint64_t stream, void** params) override;

  // graphs (graphs.cpp): captured operations replayed in order (see above)
  void vendor_begin_capture(std::uint64_t stream, std::int32_t mode) override;
  std::uint64_t vendor_end_capture(std::uint64_t stream) override;
  void vendor_graph_launch(std::uint64_t graph, std::uint64_t stream) override;
  void vendor_graph_destroy(std::uint64_t graph) override;
  void vendor_abort_capture(std::uint64_t stream) override;
  bool vendor_is_capturing(std::uint64_t stream) override;

 private:
  static constexpr std::uint64_t kStagingBytes = std::uint64_t{16} << 20;  // the ring
  static constexpr std::uint64_t kStagingChunk = std::uint64_t{4} << 20;   // one copy's share
  static constexpr std::uint32_t kMaxQueues = 4;
  // Submissions in flight past which a new one first waits for the oldest (a bound on command
  // buffers made for work queued without a synchronize).
  static constexpr std::size_t kMaxInFlight = 4096;
  static constexpr std::uint64_t kBlockBytes = std::uint64_t{64} << 20;
  static constexpr std::uint64_t kAlignment = 256;  // every allocation's start

  /// Frees every block, the queue's objects and the device. Never throws; idempotent.
  void release() noexcept;
  /// A new block of `bytes`, not yet filed (managed: host-visible, coherent, mapped).
  Block make_block(std::uint64_t bytes, bool managed);
  void destroy_block(Block& block) noexcept;
  /// The block and offset of `address` (inside a live block; the SDK has checked the range).
  Location locate(std::uint64_t address);
  std::uint64_t carve(std::uint64_t bytes, bool managed);
  /// Returns the allocation at `ptr` to its block (a block left empty is released unless it is
  /// the last of its kind); nothing when no allocation starts there.
  void release_range(std::uint64_t ptr);
  /// The device address of `host` inside a mapped block; Failure(INVALID_ARGUMENT) otherwise.
  std::uint64_t mapped_address(const void* host);
  // Streams (streams.cpp, submit.hpp); the queue lock held unless said otherwise.
  /// The stream `id` of this backend; Failure(INVALID_ARGUMENT) naming `op` for another value.
  std::shared_ptr<Stream> stream_of(std::uint64_t id, const char* op);
  /// Records `record(cmd)` into a command buffer and submits it on `s` (submit.hpp): it waits for
  /// what work on `s` is ordered after, and signals the point returned.
  template <class Record>
  Point submit(const char* op, const std::shared_ptr<Stream>& s, Record&& record);
  /// A reset command buffer: a completed submission's, or a new one (past kMaxInFlight
  /// submissions, the oldest's once it completes: it was submitted, so it does, lock or not).
  VkCommandBuffer idle_command_buffer(const char* op);
  /// The points work queued on `s` now is ordered after (reached points left out).
  std::vector<Point> ordered_points(const std::shared_ptr<Stream>& s);
  /// Some stream that `s` is not ordered with has work not yet completed.
  bool busy_unordered(const Stream& s);
  /// Every stream's latest point.
  std::vector<Point> every_stream();
  /// Waits until every point is reached (no lock held). Failure naming `op` on a driver error.
  void wait(const std::vector<Point>& points, const char* op);
  /// `bytes` (at most kStagingChunk) of the staging ring for the next submission on `s`
  /// (staging.hpp), waiting while the ring is full; `held`: until release_staging too.
  std::uint64_t stage(std::unique_lock<std::mutex>& lock, const std::shared_ptr<Stream>& s,
                      std::uint64_t bytes, bool held, const char* op);
  /// The copy or memset on `stream` touching `at` runs on the host through the blocks' mappings
  /// (copies.cpp), once the work it is ordered with has completed: managed memory always, device
  /// memory with a host view while a stream it is not ordered with has work pending. No lock.
  bool on_host(std::uint64_t stream, std::initializer_list<Location> at);
  /// The pipeline of `kernel` for workgroups of `block` threads, made on first use.
  VkPipeline pipeline(Kernel& kernel, const gpuplug_dim3_t& block);

  // The operations themselves, queued now (the vendor hooks check captures first; a replay calls
  // these directly); each returns the point its last submission reaches (the stream's latest
  // when it ran on the host). `push` is the kernel's packed push-constant block.
  Point copy_h2d_now(std::uint64_t dst, const void* src, std::uint64_t bytes,
                     std::uint64_t stream);
  void copy_d2h_now(void* dst, std::uint64_t src, std::uint64_t bytes, std::uint64_t stream);
  Point copy_d2d_now(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                     std::uint64_t stream);
  Point memset_now(std::uint64_t dst, std::uint8_t value, std::uint64_t bytes,
                   std::uint64_t stream);
  void dispatch(Kernel& kernel, gpuplug_dim3_t grid, gpuplug_dim3_t block, const std::byte* push,
                std::uint64_t stream);
  /// While captures_.any(): records a copy or memset queued on `stream` into its capture (true),
  /// or false to run it now; Failure when it invalidates a capture. `stage`: the capture keeps
  /// a copy of the source's bytes (copy_h2d_async).
  [[gnu::cold]] bool captured_copy(std::uint64_t stream, const char* op,
                                   sdk::CapturedOp::Kind kind, std::uint64_t dst,
                                   const void* src, std::uint64_t bytes, bool stage);
  /// The stream is ordered with stream 0: it was not made non-blocking.
  bool blocks_with_default(std::uint64_t stream);

  const DriverApi& api_;
  PhysicalDevice physical_;
  VkPhysicalDeviceMemoryProperties memory_props_{};
  VkPhysicalDeviceLimits limits_{};  // workgroup counts and sizes, push-constant bytes
  // Optional features enabled on the VkDevice where offered (kernels' capabilities need them).
  DeviceFeatures features_;  // as enabled; a module's capabilities are checked against them
  std::uint64_t max_allocation_ = 0;  // min(maxMemoryAllocationSize, maxBufferSize)
  std::uint32_t device_type_ = 0;     // memory type index of device blocks
  std::uint32_t host_type_ = 0;       // memory type index of managed blocks and staging
  VkDevice device_ = VK_NULL_HANDLE;
  DeviceApi vk_;
  std::vector<VkQueue> queues_;  // of the compute family, index = queue index

  // The queues, streams, events, command buffers and staging ring; also taken by a Vulkan
  // library beside the backend through lock_queue (native handles).
  std::mutex queue_mutex_;
  gpuplug_vulkan_handles_t handles_{};  // the fields all streams share (native.cpp)
  void fill_handles() noexcept;
  std::unordered_map<std::uint64_t, std::shared_ptr<Stream>> streams_;  // 0 included
  std::uint32_t next_queue_ = 0;  // the round-robin of streams over queues 1 ..
  VkCommandPool pool_ = VK_NULL_HANDLE;
  struct Submission {
    VkCommandBuffer cmd;
    Point done;
    std::vector<std::shared_ptr<Stream>> waited;  // kept alive while their semaphores are waited
  };
  std::deque<Submission> submissions_;  // in submission order, the completed ones retired lazily
  // A retired submission's streams, per queue (index: queue index), until a later submission
  // on that queue has completed too. A driver may still hold the points a submission waited on
  // after its signal is visible (Mesa's emulated timelines release them on the queue's thread
  // just after), and a semaphore destroyed before then is freed under that reference.
  std::vector<std::vector<std::shared_ptr<Stream>>> lingering_;
  std::vector<VkCommandBuffer> idle_;   // command buffers no submission uses
  Block staging_;  // host-visible, mapped; carved by nobody: the copies' bounce buffer
  StagingRing<Point> ring_{kStagingBytes};

  std::mutex memory_mutex_;  // the blocks and their index
  std::vector<std::unique_ptr<Block>> blocks_;
  std::unordered_map<std::uint64_t, Block*> by_address_;  // block address -> block
  sdk::detail::IntervalIndex index_;                      // the blocks, by address range
  std::uint64_t block_bytes_ = 0;                         // sum of live block sizes (device)

  // Events (queue lock): a point and, where the queue family has timestamps, a timestamp query
  // written there; without timestamps, the host's clock once the point was reached.
  struct Event {
    VkQueryPool pool = VK_NULL_HANDLE;  // one timestamp query
    Point at;                           // value 0: never recorded
    std::uint64_t host_ns = 0;          // without timestamps
  };
  std::unordered_map<std::uint64_t, Event> events_;
  std::uint64_t timestamp_mask_ = 0;  // the family's timestampValidBits as a mask (0: none)
  double timestamp_period_ns_ = 0;    // limits.timestampPeriod
  /// Event `event`'s time in ns (recorded and reached). Queue lock held.
  std::uint64_t event_ns(const Event& e);
  sdk::Captures captures_;   // active stream captures and live graphs (captures.hpp)
  std::mutex stream_mutex_;  // non_blocking_
  std::unordered_set<std::uint64_t> non_blocking_;  // streams made GPUPLUG_STREAM_NON_BLOCKING
};

}  // namespace gpuplug::vulkan
