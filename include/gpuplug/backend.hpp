// SPDX-License-Identifier: Apache-2.0
// GpuBackend: one device of one vendor, with its own modules, allocation ledger and OpCache.
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

#include <gpuplug/memory.hpp>
#include <gpuplug/native.hpp>
#include <gpuplug/op_cache.hpp>
#include <gpuplug/types.hpp>

#include <array>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

GPUPLUG_API_BEGIN
namespace gpuplug {

/// The abstract backend. The registry makes plugin-backed ones; tests may decorate one.
///
/// Thread-safety: every member may be called concurrently from many threads, except that
/// nothing may run concurrently with destruction, and `op_cache().release()` needs exclusive
/// use of the cache (see OpCache). Model caches made for this backend must be released and
/// destroyed before it is.
/// Errors: every failing member throws gpuplug::Error naming this backend, the operation
/// and the plugin's message; nothing throws on success, and `launch` allocates nothing.
class GpuBackend {
 public:
  GpuBackend() = default;
  GpuBackend(const GpuBackend&) = delete;
  GpuBackend& operator=(const GpuBackend&) = delete;
  /// Derived destructors must call `op_cache().release(*this)` (noexcept-wrapped) before
  /// tearing the device down, so scratch goes back through the ledger, not the sweep.
  virtual ~GpuBackend() = default;

  /// "cuda:0", "host:0": plugin name and ordinal.
  virtual std::string_view name() const noexcept = 0;
  /// "cuda", "hip", "host".
  virtual std::string_view plugin_name() const noexcept = 0;
  virtual std::uint32_t ordinal() const noexcept = 0;

  /// This backend's own memo of kernels, scratch, latches and gates; never shared with another
  /// backend. Its kernel memo is shared with the model caches made for this backend,
  /// OpCache(*this, name): on a backend that serves several models each model holds its own
  /// cache, and releasing this one is refused while model caches exist (docs/opcache.md).
  OpCache& op_cache() noexcept { return op_cache_; }

  // ---- memory: every allocation is recorded on the plugin's ledger with `site`.
  /// Device memory. Throws Error(out_of_memory) past the device or `device_memory_limit`, whose
  /// message says what was asked, the limit or the device's free memory, the live bytes, the
  /// three largest call sites and the OpCache scratch held (after the out-of-memory observer,
  /// if one is set, declined to retry or the retry failed too).
  /// A zero-byte request returns a distinct, freeable, non-null pointer.
  virtual DevicePtr alloc(std::size_t bytes,
                          const char* site = GPUPLUG_CALLER_FUNCTION) = 0;
  /// Managed (unified) memory; not bound by `device_memory_limit`. Error(unsupported) where the
  /// device has none.
  virtual DevicePtr alloc_managed(std::size_t bytes,
                                  const char* site = GPUPLUG_CALLER_FUNCTION) = 0;
  /// Null is a no-op. An unknown or already-freed pointer is Error(invalid_argument), never a crash.
  /// An arena is refused (free_arena frees it).
  virtual void free(DevicePtr p) = 0;
  /// An arena (ABI 1.3): device memory for what lives as long as a model (its weights), on the
  /// ledger as kind arena under `site`. Counted in ledger_stats().live_count and arena_bytes,
  /// never in live_bytes nor peak_bytes (the figures a budget for transient memory, a KV cache,
  /// is sized from), and against device_memory_limit like any device memory; snapshots, the
  /// out-of-memory report and sweep_unreleased's warning name each arena. The default throws
  /// Error(unsupported), as does a backend whose plugin predates ABI 1.3.
  virtual DevicePtr alloc_arena(std::size_t bytes, const char* site = GPUPLUG_CALLER_FUNCTION);
  /// Frees an arena. Null is a no-op; any other pointer, an allocation from alloc included, is
  /// Error(invalid_argument) naming it.
  virtual void free_arena(DevicePtr p);

  virtual void copy_h2d(DevicePtr dst, const void* src, std::size_t bytes) = 0;
  virtual void copy_d2h(void* dst, DevicePtr src, std::size_t bytes) = 0;
  virtual void copy_d2d(DevicePtr dst, DevicePtr src, std::size_t bytes) = 0;
  /// Async copies are ordered on `stream`. copy_h2d_async's source may be reused or freed as
  /// soon as the call returns (a temporary is fine): the backend stages pageable memory where the
  /// copy runs later, and waits for a copy from its own pinned memory (read by DMA) before it
  /// returns; copy_h2d_async_retained does neither. copy_d2h_async's destination must stay valid
  /// until the stream is synchronized.
  virtual void copy_h2d_async(DevicePtr dst, const void* src, std::size_t bytes, Stream stream) = 0;
  /// copy_h2d_async without staging: `src` must stay unchanged and alive until the stream has
  /// done the copy (a synchronize of it, or an event recorded after it completes). For a source
  /// the caller keeps anyway, it saves a copy of the bytes. Default: copy_h2d_async.
  virtual void copy_h2d_async_retained(DevicePtr dst, const void* src, std::size_t bytes,
                                       Stream stream);
  virtual void copy_d2h_async(void* dst, DevicePtr src, std::size_t bytes, Stream stream) = 0;
  virtual void copy_d2d_async(DevicePtr dst, DevicePtr src, std::size_t bytes, Stream stream) = 0;
  // ---- pitched 2D copies (ABI 1.3; docs/memory.md, "Pitched 2D copies"). Each copies `height`
  // rows of `width_bytes` bytes, row r from src + r * src_pitch to dst + r * dst_pitch, ordered on
  // `stream` like the 1D async copies, in one call to the plugin (one cuMemcpy2DAsync on CUDA).
  // A pitch below width_bytes is Error(invalid_argument) naming the side; width_bytes 0 or
  // height 0 copies nothing; every row's device range is checked (a span whose arithmetic wraps
  // is Error(invalid_argument)), and a refused copy copies nothing. h2d: `src` may be reused or
  // freed as soon as the call returns, as copy_h2d_async's. d2h: `dst` must stay valid until
  // `stream` is synchronized.
  // The defaults issue one 1D async copy per row, the last row first (so that a copy running
  // past the end of its allocation is refused before any row is copied); the plugin-backed
  // backend calls the plugin's 2D slot, or does the same where the plugin has none.
  virtual void copy_h2d_2d_async(DevicePtr dst, std::size_t dst_pitch, const void* src,
                                 std::size_t src_pitch, std::size_t width_bytes,
                                 std::size_t height, Stream stream);
  virtual void copy_d2h_2d_async(void* dst, std::size_t dst_pitch, DevicePtr src,
                                 std::size_t src_pitch, std::size_t width_bytes,
                                 std::size_t height, Stream stream);
  virtual void copy_d2d_2d_async(DevicePtr dst, std::size_t dst_pitch, DevicePtr src,
                                 std::size_t src_pitch, std::size_t width_bytes,
                                 std::size_t height, Stream stream);
  /// Sets `bytes` bytes to `value`, ordered on `stream` (asynchronous).
  virtual void memset(DevicePtr dst, std::uint8_t value, std::size_t bytes, Stream stream = {}) = 0;

  // ---- streams
  /// A new stream, non-blocking (StreamFlags): on a plugin-backed backend the same as
  /// create_stream(StreamFlags::non_blocking). Work on it is not ordered with the default stream:
  /// order them with an event, synchronize(stream), or a blocking stream.
  virtual Stream create_stream() = 0;
  /// A new stream with `flags`. The default is create_stream(); a plugin older than ABI 1.3
  /// makes blocking streams whatever the flags (they keep every order a non-blocking one
  /// promises). A value that is not a StreamFlags is Error(invalid_argument) naming it.
  virtual Stream create_stream(StreamFlags flags);
  /// Waits for the stream's work, then destroys it. The default stream cannot be destroyed.
  virtual void destroy_stream(Stream stream) = 0;
  virtual void synchronize(Stream stream) = 0;
  /// Waits for every stream of this backend.
  virtual void synchronize() = 0;

  // ---- events (ABI 1.1). The defaults throw Error(unsupported), which is also what a backend
  // whose plugin predates ABI 1.1 reports. A foreign, destroyed or null event is
  // Error(invalid_argument) naming the event and the operation.
  /// A new event of this backend.
  virtual Event create_event();
  /// Destroys an event; work it was recorded after still completes.
  virtual void destroy_event(Event event);
  /// Captures the work queued on `stream` so far (recording again replaces the capture).
  virtual void record(Event event, Stream stream = {});
  /// Work queued on `stream` after this waits for `event`'s capture; the host does not wait.
  virtual void wait(Stream stream, Event event);
  /// Blocks until `event`'s capture completes.
  virtual void synchronize(Event event);
  /// True when `event`'s capture has completed (an event never recorded: true); never blocks.
  virtual bool query(Event event);
  /// Milliseconds from `start` to `end`, both recorded and completed.
  virtual float elapsed_ms(Event start, Event end);

  // ---- graphs (ABI 1.3; docs/graphs.md): stream capture and replay. The defaults throw
  // Error(unsupported) naming the plugin, which is also what a backend whose plugin lacks the
  // graph slots reports; abort_capture_if_active and stream_is_capturing then do nothing.
  /// Starts capturing `stream` (not the default stream): the work queued on it from now on is
  /// recorded, not run. Error(invalid_argument) when it already captures.
  virtual void begin_capture(Stream stream, CaptureMode mode = CaptureMode::relaxed);
  /// Ends the capture and returns the instantiated, replayable graph. Error(capture_invalidated)
  /// when the capture was invalidated (synchronize during it, work on stream 0 beside a blocking
  /// capturing stream, ...) or a forked
  /// stream was not joined back; the capture is then discarded.
  virtual Graph end_capture(Stream stream);
  /// Queues a replay of `graph` on `stream` (any stream of this backend, any number of times).
  virtual void launch_graph(Graph graph, Stream stream = {});
  /// Destroys `graph`; replays already queued complete. Error(invalid_argument) naming it for a
  /// graph never made or already destroyed.
  virtual void destroy_graph(Graph graph);
  /// Ends a capture of `stream` and discards it, so that the stream runs work again; a no-op when
  /// none is active or graphs are unsupported. A failure is logged, never thrown.
  virtual void abort_capture_if_active(Stream stream) noexcept;
  /// True while `stream` captures (an invalidated capture too, until it ends); false when graphs
  /// are unsupported.
  virtual bool stream_is_capturing(Stream stream);

  // ---- interop (ABI 1.2, interop handles; docs/interop.md, "Native handles and import"). The
  // defaults throw Error(unsupported), which is also what a backend whose plugin lacks the slots
  // reports.
  /// The vendor runtime's handles for this backend and `stream` (the default stream when
  /// omitted). The context is valid until the backend is destroyed, a stream handle until
  /// destroy_stream of that stream (the default stream's: until the backend is destroyed).
  /// Error(invalid_argument) for a stream not live on this backend.
  virtual NativeHandles native(Stream stream = {});
  /// The address a vendor library takes for `ptr`, which may point inside an allocation, an
  /// imported range or a module global; valid until `free` of that allocation (a global's: until
  /// its module is unloaded). Error(invalid_argument) naming the pointer when this backend does
  /// not know it.
  virtual void* native_pointer(DevicePtr ptr);
  /// Wraps `bytes` of memory at `native` that someone else allocated on this backend's device
  /// (PyTorch's caching allocator, cudaMalloc, a std::vector on host). On the ledger as kind
  /// external under `site`: counted, range-checked like any allocation, never freed by gpuplug.
  /// `free` of the returned pointer forgets it and then runs `on_release` (once, on the calling
  /// thread; an exception from it propagates from `free`); a backend destroyed (or swept) with
  /// imports still live runs their callbacks after forgetting them, with a warning. The memory
  /// must stay valid until then. Error(invalid_argument) naming the pointer and the device for
  /// memory of another device, a null pointer, or a range overlapping one already on the ledger.
  virtual DevicePtr import_memory(void* native, std::size_t bytes, std::function<void()> on_release,
                                  std::string_view site = "import");
  /// Wraps a native stream (CUstream, hipStream_t; host: a queue id from native()) as a Stream of
  /// this backend. destroy_stream of it waits for the work gpuplug queued on it and forgets it,
  /// never destroying the native stream; the native stream must outlive that call (or the
  /// backend). Error(invalid_argument) for a null or unknown native stream, or one that already
  /// is a stream of this backend.
  virtual Stream import_stream(void* native_stream);

  // ---- mapped host memory (ABI 1.3; docs/memory.md, "Pinned and mapped host memory"). The
  // defaults throw Error(unsupported), which is also what a backend whose plugin lacks the slots
  // reports.
  /// `bytes` (> 0) of ZEROED page-locked host memory that is also mapped into the device's
  /// address space: the host reads and writes it at the returned pointer, kernels, copies and
  /// memset at host_ptr_to_device of it. On the ledger at its device address as kind pinned with
  /// `site` (counted in live_count and LedgerStats::live_pinned_bytes, not in live_bytes nor
  /// against device_memory_limit). Work on the device that writes it is seen by the host after
  /// synchronizing. Error(out_of_memory) when the driver has no more; Error(invalid_argument)
  /// for 0 bytes.
  virtual void* alloc_host_pinned(std::size_t bytes, const char* site = GPUPLUG_CALLER_FUNCTION);
  /// Frees what alloc_host_pinned returned. Null is a no-op; any other pointer (not from this
  /// backend, not the start of an allocation, freed already) is Error(invalid_argument) naming it.
  virtual void free_host_pinned(void* p);
  /// The device address at which kernels reach the mapped memory at `p` (which may point inside
  /// an allocation: the same offset from its start). Any other pointer is Error(invalid_argument)
  /// naming it.
  virtual DevicePtr host_ptr_to_device(const void* p);
  /// The host address of managed or mapped memory at `ptr` (which may point inside it): for mapped
  /// memory the host pointer alloc_host_pinned returned (plus the offset), for managed memory the
  /// same address on CUDA, HIP and host. Device memory is Error(invalid_argument) ("device memory
  /// has no host address") naming the pointer, as is a pointer this backend does not know.
  virtual void* host_address(DevicePtr ptr);

  // ---- modules
  /// Registers `image` (fatbin/cubin/PTX, HIP code object, host ELF) under `name`.
  /// Error(invalid_argument) if the name is taken, Error(invalid_image) if the bytes do not load.
  virtual void load_module(std::string_view name, std::span<const std::byte> image) = 0;
  /// Loads the module file `file` under `name`. The backend is given the file's absolute,
  /// normalized path (load_module_path), so a plugin that loads modules by path keeps what the
  /// path gives them: a host module's $ORIGIN, so that RUNPATH $ORIGIN finds a library next to it.
  /// Errors name the module and the file: Error(not_found) for a missing file (or, on host, a
  /// dependency of the module that is not found, naming it), Error(invalid_argument) for an
  /// empty path, a path with a NUL byte, a directory, a file that cannot be read or a taken name,
  /// Error(invalid_image) when the file does not load.
  void load_module_file(std::string_view name, const std::filesystem::path& file);
  /// Unloads a module. Handles into it become invalid: release the OpCache first.
  virtual void unload_module(std::string_view name) = 0;
  /// True when loaded, or loadable from the `modules_dir` option.
  virtual bool has_module(std::string_view name) = 0;
  /// Resolves module::func without caching (OpCache::kernel memoizes). Loads the module from
  /// `modules_dir` on first use. Error(not_found) lists the module's functions.
  virtual KernelHandle kernel(std::string_view module, std::string_view func) = 0;
  /// A published symbol's device address and size; nullopt when the module has no such symbol.
  virtual std::optional<DeviceSymbol> device_symbol(std::string_view module, std::string_view symbol) = 0;

  // ---- work
  /// The primitive launch: params holds one pointer per kernel argument, as cuLaunchKernel takes
  /// them. It cannot know how many pointers params holds, so nothing checks them against the
  /// kernel: prefer the counted forms below. Backends override this one.
  virtual void launch(KernelHandle f, Dim3 grid, Dim3 block, std::uint32_t shared_bytes, Stream stream,
                      void** params) = 0;
  /// The most arguments a counted launch takes.
  static constexpr std::size_t max_launch_args = 64;
  /// The counted launch: `args` are the kernel's arguments in order. Where the kernel's module
  /// publishes `<func>_args` (kernel_signature), a count or a size that differs is
  /// Error(invalid_argument, name(), "launch", ...) naming the kernel, what it takes and what it
  /// was given, and nothing is launched; so is a list of more than max_launch_args. Allocates
  /// nothing.
  void launch(KernelHandle f, Dim3 grid, Dim3 block, std::uint32_t shared_bytes, Stream stream,
              std::span<const KernelArg> args);
  /// The same with a braced list: launch(f, grid, block, 0, stream, {n, alpha, x, y}).
  void launch(KernelHandle f, Dim3 grid, Dim3 block, std::uint32_t shared_bytes, Stream stream,
              std::initializer_list<KernelArg> args) {
    launch(f, grid, block, shared_bytes, stream, std::span<const KernelArg>(args.begin(), args.size()));
  }
  /// Convenience: launch(f, grid, block, shared, stream, a, b, c) with arguments by value; a
  /// counted launch, checked as above.
  template <class... Args>
  void launch_args(KernelHandle f, Dim3 grid, Dim3 block, std::uint32_t shared_bytes, Stream stream,
                   const Args&... args) {
    const std::array<KernelArg, sizeof...(Args)> list{KernelArg(args)...};
    launch(f, grid, block, shared_bytes, stream, std::span<const KernelArg>(list));
  }
  /// What `f`'s module publishes of its arguments, read when `kernel` resolved it; nullptr when it
  /// publishes none, or `f` is not a handle this backend made. Valid as long as the backend.
  virtual const KernelSignature* kernel_signature(KernelHandle f) const noexcept;

  // ---- queries and the ledger
  /// The device's free and total memory (within device_memory_limit when one is set). On a
  /// device of class integrated_gpu, which shares the host's memory and whose driver's free figure
  /// undercounts what it can still be given, free is the larger of the driver's figure and the
  /// host's MemAvailable (unless device_memory_limit is set: then the limit is the budget).
  virtual MemoryInfo memory_info() = 0;
  /// The driver's free figure, never the host's (within device_memory_limit when one is set).
  /// Default: memory_info().free_bytes.
  virtual std::uint64_t device_free_memory();
  virtual DeviceInfo device_info() = 0;
  virtual LedgerStats ledger_stats() = 0;
  std::uint64_t live_bytes() { return ledger_stats().live_bytes; }
  std::uint64_t live_alloc_count() { return ledger_stats().live_count; }
  /// Human-readable live allocations grouped by call site, largest first, at most top_n sites.
  virtual std::string alloc_report(std::size_t top_n = 10) = 0;
  /// Frees everything still live on the ledger (logged as a warning); returns what was swept.
  virtual LedgerStats sweep_unreleased() = 0;
  /// With the validate layer (docs/layers.md, "Guard bands"): reads every live allocation's
  /// guard bands back now and returns how many bands are broken (written by a kernel past the
  /// end or before the start of its allocation), whether a synchronize reported them already or
  /// not; nothing is logged. 0 on a backend without the validate layer (or not plugin-backed).
  /// Throws Error naming "scan_redzones" when the bands cannot be read back.
  std::size_t scan_redzones();

  // ---- memory you can see (docs/memory.md)
  /// The ledger (each live allocation, per-site totals and peaks, the last `memory_history`
  /// events), device_memory_limit, the device's free and total memory, and this backend's
  /// OpCache scratch per tag. The ledger part is taken under its lock, so it is consistent with
  /// itself; memory_info and the scratch are read just after. From a plugin older than ABI 1.2
  /// only the counters are known (complete == false, partial_reason says why). Throws Error.
  MemorySnapshot memory_snapshot();
  /// Starts the peaks (the backend's and each site's) again from what is live now. Throws
  /// Error(unsupported) for a plugin older than ABI 1.2.
  virtual void reset_peak();
  /// Installs the out-of-memory observer (an empty function removes it); see OutOfMemoryObserver.
  /// Thread-safe; an alloc already in its observer finishes with the one it started with.
  void set_out_of_memory_observer(OutOfMemoryObserver observer);

 protected:
  /// load_module_file once the path is checked: `file` is absolute, normalized and exists.
  /// Default: reads the file and calls load_module with its bytes. The plugin-backed backend
  /// hands the path to the plugin (its optional load_module_file slot, or that same default).
  virtual void load_module_path(std::string_view name, const std::filesystem::path& file);

  /// The ledger part of memory_snapshot (backend, totals, limit, sites, allocations, history).
  /// Default: the counters of ledger_stats only, complete == false.
  virtual MemorySnapshot ledger_snapshot();
  /// MemoryScope's begin and end (the ledger's scope counters). Default: Error(unsupported).
  virtual std::uint64_t begin_memory_scope();
  virtual MemoryScopeResult end_memory_scope(std::uint64_t scope);

  /// For `alloc` and `alloc_managed` implementations (`operation`), after the device refused
  /// `bytes` for lack of memory with `reason` (the plugin's message): asks the observer, and
  /// returns what `retry` returns when it asks for one and `retry` succeeds (nullopt: out of
  /// memory again); otherwise throws Error(out_of_memory, name(), operation, <the report>). Other
  /// errors of `retry` propagate.
  DevicePtr out_of_memory(std::size_t bytes, const char* site, const std::string& reason,
                          const std::function<std::optional<DevicePtr>()>& retry,
                          std::string_view operation = "alloc");

 private:
  friend class MemoryScope;

  OpCache op_cache_;
  mutable std::mutex observer_mutex_;
  std::shared_ptr<const OutOfMemoryObserver> observer_;  // guarded by observer_mutex_
};

}  // namespace gpuplug
GPUPLUG_API_END
