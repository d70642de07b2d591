// SPDX-License-Identifier: Apache-2.0
// copy_peer and copy_peer_async: device memory of one backend to device memory of another, any
// vendors (docs/interop.md).
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

#include <cstddef>
#include <gpuplug/backend.hpp>
#include <gpuplug/types.hpp>
#include <memory>

GPUPLUG_API_BEGIN
namespace gpuplug {

struct PeerCopyOptions {
  /// Bytes per staging chunk; two chunks of host memory are used, so that the source's read of
  /// one chunk overlaps the destination's write of the one before.
  std::size_t chunk_bytes = std::size_t{4} << 20;
  /// Two backends of one loaded plugin: use the plugin's own peer copy (ABI 1.2 copy_peer_async:
  /// cuMemcpyPeerAsync, hipMemcpyPeerAsync, host memcpy) when it has one. false: always staged.
  bool vendor_copy = true;
  /// Staging chunks in page-locked memory (ABI 1.2 host_alloc_pinned) of the destination's
  /// plugin, else of the source's, when one offers it; else, or when false, pageable memory.
  bool pinned_staging = true;
};

/// Copies `bytes` from `src` on `src_backend` to `dst` on `dst_backend` and returns when the
/// data is in place:
///  - the same backend: its copy_d2d;
///  - two backends of one loaded plugin whose plugin has a peer copy (options.vendor_copy): the
///    plugin's copy_peer_async on the destination's default stream;
///  - otherwise (CUDA to HIP, a GPU to host, a plugin without the slot): staged through host
///    memory in chunks, the source's read of chunk k+1 overlapping the destination's
///    copy_h2d_async of chunk k on its default stream; pinned staging memory when a plugin
///    offers it (options.pinned_staging).
///
/// Ordering: like the synchronous copies, it starts after the work queued on both backends'
/// default streams (and so after the streams ordered with them) and is complete on return.
/// Zero bytes copies nothing. Thread-safety: calls from many threads at once are independent
/// (each has its own staging memory); overlapping destination ranges race as any two writes do.
/// Errors: the Error of the failing backend (an unknown pointer, a range past an allocation,
/// ...), with operation "copy_peer" and a message that names both backends, the size and, when
/// staged, the byte offset of the chunk that failed. Chunks before it have been written.
/// Error(invalid_argument) for a chunk_bytes of 0.
void copy_peer(GpuBackend& dst_backend, DevicePtr dst, GpuBackend& src_backend, DevicePtr src,
               std::size_t bytes, const PeerCopyOptions& options = {});

/// An asynchronous peer copy in flight (copy_peer_async): what it still holds until the
/// destination's stream has done it. Move-only; both backends must outlive it.
class PeerCopy {
 public:
  PeerCopy() noexcept;  // a copy with nothing in flight (ready, wait returns at once)
  PeerCopy(PeerCopy&&) noexcept;
  PeerCopy& operator=(PeerCopy&&) noexcept;
  /// wait(); a failure is logged (channel "copy_peer"), not thrown.
  ~PeerCopy();

  /// Blocks until the copy is complete on the destination's stream, then releases the staging
  /// memory. A failure of the writes still queued is thrown as Error(operation
  /// "copy_peer_async"); the staging memory is released either way. Later calls return at once.
  void wait();
  /// True when wait() would not block (never blocks itself).
  bool ready();

  struct State;  // core-private: what copy_peer_async made
  explicit PeerCopy(std::unique_ptr<State> state) noexcept;

 private:
  std::unique_ptr<State> state_;
};

/// copy_peer ordered on streams: the copy starts after the work queued on `src_stream` of
/// `src_backend` and on `dst_stream` of `dst_backend` before the call, and the work queued on
/// `dst_stream` after the call starts after the copy. Nothing orders later work on
/// `src_stream` after it: the source must not be written until the copy is complete (wait(), or
/// a synchronization of dst_stream or of an event recorded on it after this call).
///
/// What the host waits for before it returns: the source's queued work (`src_stream` is
/// synchronized), and, when staged, the source's reads of every chunk, each chunk's write
/// queued on `dst_stream` as soon as it is read; up to two chunk writes are still queued on
/// return. The same backend: copy_d2d_async on dst_stream after an event of src_stream (ABI 1.1;
/// without events src_stream is synchronized). The vendor's peer copy: queued on dst_stream.
///
/// Staging memory is released by wait() or the destructor of the PeerCopy, after the
/// destination's events (ABI 1.1) say both chunks' writes have finished (without events: after
/// dst_stream is synchronized): never while a copy reads it. Errors as copy_peer, with
/// operation "copy_peer_async"; on an error nothing is left in flight.
[[nodiscard]] PeerCopy copy_peer_async(GpuBackend& dst_backend, DevicePtr dst, Stream dst_stream,
                                       GpuBackend& src_backend, DevicePtr src, Stream src_stream,
                                       std::size_t bytes, const PeerCopyOptions& options = {});

}  // namespace gpuplug
GPUPLUG_API_END
