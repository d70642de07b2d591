// SPDX-License-Identifier: Apache-2.0
// copy_peer: device memory of one backend to device memory of another, any vendors
// (docs/interop.md).
#pragma once

#include <gpuplug/config.hpp>  // first: the C++20 check, the export region

#include <cstddef>
#include <gpuplug/backend.hpp>
#include <gpuplug/types.hpp>

GPUPLUG_API_BEGIN
namespace gpuplug {

struct PeerCopyOptions {
  /// Bytes per staging chunk; two chunks of host memory are used, so that the source's read of
  /// one chunk overlaps the destination's write of the one before.
  std::size_t chunk_bytes = std::size_t{4} << 20;
};

/// Copies `bytes` from `src` on `src_backend` to `dst` on `dst_backend` and returns when the
/// data is in place. The same backend: its copy_d2d. Two backends (two devices of one plugin,
/// CUDA to HIP, a GPU to host): staged through host memory in chunks, the source's copy_d2h of
/// chunk k+1 overlapping the destination's copy_h2d_async of chunk k on its default stream.
///
/// Ordering: like the synchronous copies, it starts after the work queued on both backends'
/// default streams (and so after the streams ordered with them) and is complete on return.
/// Zero bytes copies nothing. Thread-safety: calls from many threads at once are independent
/// (each has its own staging memory); overlapping destination ranges race as any two writes do.
/// Errors: the Error of the failing backend (an unknown pointer, a range past an allocation,
/// ...), with operation "copy_peer" and a message that names both backends, the size and the
/// byte offset of the chunk that failed. Chunks before it have been written. Error(invalid_argument)
/// for a chunk_bytes of 0.
void copy_peer(GpuBackend& dst_backend, DevicePtr dst, GpuBackend& src_backend, DevicePtr src,
               std::size_t bytes, const PeerCopyOptions& options = {});

}  // namespace gpuplug
GPUPLUG_API_END
