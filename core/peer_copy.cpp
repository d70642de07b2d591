// SPDX-License-Identifier: Apache-2.0
// copy_peer: the same backend's copy_d2d, or a copy staged through two host chunks.
#include <array>
#include <gpuplug/peer.hpp>
#include <gpuplug/support/text.hpp>
#include <memory>
#include <optional>
#include <string>

namespace gpuplug {

namespace {

/// The destination's side of a staged copy: which chunk buffers its default stream may still be
/// reading. An event per buffer where the backend has events; else the whole default stream is
/// waited for. The destructor waits for everything queued, so a buffer is never freed while a
/// copy reads it, whatever failed.
class DestinationQueue {
 public:
  explicit DestinationQueue(GpuBackend& gpu) : gpu_(gpu) {
    try {
      for (auto& e : events_) e = gpu_.create_event();
    } catch (const Error& e) {
      if (e.status() != Status::unsupported) {
        release_events();
        throw;
      }
      release_events();  // a backend without events (ABI 1.0): synchronize instead
    }
  }
  ~DestinationQueue() {
    try {
      gpu_.synchronize(Stream{});
    } catch (...) {  // the copy's own error is what the caller sees
    }
    release_events();
  }
  DestinationQueue(const DestinationQueue&) = delete;
  DestinationQueue& operator=(const DestinationQueue&) = delete;

  /// Blocks until the copy that last read buffer `b` has finished.
  void wait_for(std::size_t b) {
    if (events_[b]) {
      gpu_.synchronize(*events_[b]);
    } else {
      gpu_.synchronize(Stream{});
    }
  }
  /// Queues the write of one chunk from buffer `b`.
  void write(DevicePtr dst, const std::byte* from, std::size_t n, std::size_t b) {
    gpu_.copy_h2d_async(dst, from, n, Stream{});
    if (events_[b]) gpu_.record(*events_[b], Stream{});
  }
  void finish() { gpu_.synchronize(Stream{}); }

 private:
  void release_events() noexcept {
    for (auto& e : events_) {
      if (!e) continue;
      try {
        gpu_.destroy_event(*e);
      } catch (...) {
      }
      e.reset();
    }
  }
  GpuBackend& gpu_;
  std::array<std::optional<Event>, 2> events_;
};

}  // namespace

void copy_peer(GpuBackend& dst_backend, DevicePtr dst, GpuBackend& src_backend, DevicePtr src,
               std::size_t bytes, const PeerCopyOptions& options) {
  // What the copy was, for its errors only: nothing is formatted on the way through.
  const auto what = [&] {
    return std::string(src_backend.name()) + " " + support::hex(src.value) + " -> " +
           std::string(dst_backend.name()) + " " + support::hex(dst.value) + ", " +
           support::describe_bytes(bytes);
  };
  if (options.chunk_bytes == 0)
    throw Error(Status::invalid_argument, std::string(dst_backend.name()), "copy_peer",
                what() + ": chunk_bytes is 0");
  if (bytes == 0) return;
  if (&dst_backend == &src_backend) {
    dst_backend.copy_d2d(dst, src, bytes);
    return;
  }
  std::size_t offset = 0;
  try {
    const std::size_t chunk = std::min(bytes, options.chunk_bytes);
    const std::array<std::unique_ptr<std::byte[]>, 2> buffers{
        std::make_unique_for_overwrite<std::byte[]>(chunk),
        std::make_unique_for_overwrite<std::byte[]>(chunk)};
    DestinationQueue queue(dst_backend);  // declared after the buffers: waits before they go
    for (std::size_t k = 0; offset < bytes; ++k) {
      const std::size_t b = k % 2;
      const std::size_t n = std::min(chunk, bytes - offset);
      if (k >= 2) queue.wait_for(b);  // the write of chunk k-2 read this buffer
      src_backend.copy_d2h(buffers[b].get(), DevicePtr{src.value + offset}, n);
      queue.write(DevicePtr{dst.value + offset}, buffers[b].get(), n, b);
      offset += n;
    }
    queue.finish();
  } catch (const Error& e) {
    throw Error(e.status(), e.backend(), "copy_peer",
                what() + ": at byte " + std::to_string(offset) + ": " + e.operation() + ": " +
                    e.message());
  } catch (const std::bad_alloc&) {
    throw Error(Status::out_of_memory, std::string(dst_backend.name()), "copy_peer",
                what() + ": no host memory for the staging chunks");
  }
}

}  // namespace gpuplug
