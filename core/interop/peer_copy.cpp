// SPDX-License-Identifier: Apache-2.0
// copy_peer and copy_peer_async: the same backend's copy, the plugin's own peer copy (ABI 1.2
// copy_peer_async), or a copy staged through two host chunks (pinned when a plugin offers it).
#include <array>
#include <gpuplug/log.hpp>
#include <gpuplug/peer.hpp>
#include <gpuplug/support/text.hpp>
#include <memory>
#include <optional>
#include <string>

#include "table/plugin_backend.hpp"

namespace gpuplug {

namespace {

using detail::PluginBackend;

/// What a copy was, for its errors only: nothing is formatted on the way through.
struct Description {
  const GpuBackend* dst_backend;
  DevicePtr dst;
  const GpuBackend* src_backend;
  DevicePtr src;
  std::size_t bytes;

  std::string text() const {
    return std::string(src_backend->name()) + " " + support::hex(src.value) + " -> " +
           std::string(dst_backend->name()) + " " + support::hex(dst.value) + ", " +
           support::describe_bytes(bytes);
  }
  /// `e` with `operation` and a message that says which copy failed, and where.
  Error wrap(const Error& e, const char* operation, const std::string& where) const {
    return Error(e.status(), e.backend(), operation,
                 text() + where + ": " + e.operation() + ": " + e.message());
  }
};

/// Two staging chunks: page-locked memory of the first of `candidates` that gives it, else
/// pageable memory. Pinned memory goes back to the backend that gave it, which keeps a few
/// buffers for the next copy.
class Staging {
 public:
  Staging(std::size_t chunk, std::array<PluginBackend*, 2> candidates, bool pinned) {
    for (PluginBackend* p : candidates) {
      if (!pinned || p == nullptr || !p->has_pinned_memory()) continue;
      try {
        pinned_by_ = p;
        bytes_ = chunk;
        for (auto& b : buffers_) b = static_cast<std::byte*>(p->take_pinned(chunk));
        return;
      } catch (const Error& e) {
        release();
        // A driver without the entry point, or no pinned memory left: the next candidate, then
        // pageable memory, which works everywhere.
        if (e.status() != Status::unsupported && e.status() != Status::out_of_memory) throw;
      }
    }
    for (std::size_t b = 0; b < 2; ++b) {
      pageable_[b] = std::make_unique_for_overwrite<std::byte[]>(chunk);
      buffers_[b] = pageable_[b].get();
    }
  }
  ~Staging() { release(); }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  std::byte* operator[](std::size_t b) const noexcept { return buffers_[b]; }

 private:
  void release() noexcept {
    if (pinned_by_ == nullptr) return;
    for (auto*& b : buffers_) {
      if (b != nullptr) pinned_by_->give_back_pinned(b, bytes_);
      b = nullptr;
    }
    pinned_by_ = nullptr;
  }
  PluginBackend* pinned_by_ = nullptr;
  std::size_t bytes_ = 0;
  std::array<std::byte*, 2> buffers_{};
  std::array<std::unique_ptr<std::byte[]>, 2> pageable_;
};

/// The destination's side of a copy: which of two slots (the chunk buffers of a staged copy;
/// slot 0 alone for one queued copy) `stream` may still be working on. An event per slot where
/// the backend has events; else the whole stream is waited for. Until wait_all() has returned,
/// the destructor waits for the stream, so that staging memory is never freed while a copy
/// reads it, whatever failed.
class DestinationQueue {
 public:
  DestinationQueue(GpuBackend& gpu, Stream stream) : gpu_(gpu), stream_(stream) {
    try {
      for (auto& e : events_) e = gpu_.create_event();
    } catch (const Error& e) {
      release_events();
      if (e.status() != Status::unsupported) throw;
      // a backend without events (ABI 1.0): synchronize the stream instead
    }
  }
  ~DestinationQueue() {
    if (!done_) {
      try {
        gpu_.synchronize(stream_);
      } catch (...) {  // the copy's own error is what the caller sees
      }
    }
    release_events();
  }
  DestinationQueue(const DestinationQueue&) = delete;
  DestinationQueue& operator=(const DestinationQueue&) = delete;

  Stream stream() const noexcept { return stream_; }
  /// Blocks until the work last marked on slot `b` has finished.
  void wait_for(std::size_t b) {
    if (events_[b]) {
      gpu_.synchronize(*events_[b]);
    } else {
      gpu_.synchronize(stream_);
    }
  }
  /// Marks the work queued on the stream so far as slot `b`'s.
  void mark(std::size_t b) {
    if (events_[b]) gpu_.record(*events_[b], stream_);
  }
  /// Queues the write of one chunk from buffer `b`, which is not reused before wait_for(b):
  /// retained, so neither staged nor waited for.
  void write(DevicePtr dst, const std::byte* from, std::size_t n, std::size_t b) {
    gpu_.copy_h2d_async_retained(dst, from, n, stream_);
    mark(b);
  }
  /// Blocks until both slots' work has finished (an event never recorded is complete).
  void wait_all() {
    if (done_) return;
    if (events_[0]) {
      gpu_.synchronize(*events_[0]);
      gpu_.synchronize(*events_[1]);
    } else {
      gpu_.synchronize(stream_);
    }
    done_ = true;
  }
  /// True when wait_all() would not block; without events, only once it has run.
  bool ready() {
    if (done_) return true;
    return events_[0] && gpu_.query(*events_[0]) && gpu_.query(*events_[1]);
  }

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
  Stream stream_;
  std::array<std::optional<Event>, 2> events_;
  bool done_ = false;
};

/// Reads `n` bytes of the source into host memory, after the work queued on `stream`.
void read_source(GpuBackend& src_backend, std::byte* to, DevicePtr from, std::size_t n,
                 Stream stream) {
  if (stream.value == 0) {
    src_backend.copy_d2h(to, from, n);  // after the default stream, as the synchronous copies
    return;
  }
  src_backend.copy_d2h_async(to, from, n, stream);
  src_backend.synchronize(stream);
}

/// Orders `dst_stream` of `gpu` after the work queued on its `src_stream` so far: an event
/// (ABI 1.1) where it has events, else the host waits for src_stream.
void order_after(GpuBackend& gpu, Stream dst_stream, Stream src_stream) {
  if (dst_stream.value == src_stream.value) return;
  Event e{};
  try {
    e = gpu.create_event();
  } catch (const Error& error) {
    if (error.status() != Status::unsupported) throw;
    gpu.synchronize(src_stream);
    return;
  }
  try {
    gpu.record(e, src_stream);
    gpu.wait(dst_stream, e);
  } catch (...) {
    gpu.destroy_event(e);
    throw;
  }
  gpu.destroy_event(e);  // the wait stays queued (abi.h: event_destroy)
}

}  // namespace

/// What an asynchronous copy holds until the destination's stream has done it. The staging
/// memory is declared first, so that it is released after the queue has waited for its readers.
struct PeerCopy::State {
  Description what;
  std::optional<Staging> staging;
  std::optional<DestinationQueue> queue;
};

PeerCopy::PeerCopy() noexcept = default;
PeerCopy::PeerCopy(std::unique_ptr<State> state) noexcept : state_(std::move(state)) {}
PeerCopy::PeerCopy(PeerCopy&&) noexcept = default;
PeerCopy& PeerCopy::operator=(PeerCopy&& other) noexcept {
  if (this != &other) {
    try {
      wait();
    } catch (const Error& e) {
      log(LogLevel::warning, "copy_peer", e.what());
    }
    state_ = std::move(other.state_);
  }
  return *this;
}

PeerCopy::~PeerCopy() {
  try {
    wait();
  } catch (const Error& e) {
    log(LogLevel::warning, "copy_peer", e.what());
  } catch (...) {
    log(LogLevel::warning, "copy_peer", "an asynchronous peer copy failed");
  }
}

void PeerCopy::wait() {
  if (!state_) return;
  // Released whatever happens: the queue's destructor waits for the stream when wait_all threw.
  const std::unique_ptr<State> state = std::move(state_);
  try {
    state->queue->wait_all();
  } catch (const Error& e) {
    throw state->what.wrap(e, "copy_peer_async", "");
  }
}

bool PeerCopy::ready() {
  if (!state_) return true;
  try {
    return state_->queue->ready();
  } catch (const Error&) {
    return true;  // failed: wait() reports it without blocking
  }
}

namespace {

/// Queues the copy on `dst_stream` (see copy_peer_async) and returns what must live until it is
/// done. The caller has handled zero bytes and the same backend.
std::unique_ptr<PeerCopy::State> start_copy(GpuBackend& dst_backend, DevicePtr dst,
                                            Stream dst_stream, GpuBackend& src_backend,
                                            DevicePtr src, Stream src_stream, std::size_t bytes,
                                            const PeerCopyOptions& options,
                                            const char* operation) {
  const Description what{&dst_backend, dst, &src_backend, src, bytes};
  auto state = std::make_unique<PeerCopy::State>(what);
  auto* const dst_plugin = dynamic_cast<PluginBackend*>(&dst_backend);
  auto* const src_plugin = dynamic_cast<PluginBackend*>(&src_backend);

  // The plugin's own copy, between two of its backends. UNSUPPORTED (a driver without the
  // entry point) falls through to the staged copy.
  if (options.vendor_copy && dst_plugin != nullptr && src_plugin != nullptr &&
      dst_plugin->has_peer_copy_from(*src_plugin)) {
    try {
      state->queue.emplace(dst_backend, dst_stream);
      src_backend.synchronize(src_stream);  // the source's queued work, before the copy reads
      dst_plugin->copy_peer_async(dst, *src_plugin, src, bytes, dst_stream);
      state->queue->mark(0);
      return state;
    } catch (const Error& e) {
      state->queue.reset();
      if (e.status() != Status::unsupported) throw what.wrap(e, operation, "");
    }
  }

  // Staged: the source's read of chunk k+1 overlaps the destination's write of chunk k.
  std::size_t offset = 0;
  try {
    const std::size_t chunk = std::min(bytes, options.chunk_bytes);
    // The destination's plugin first: its copy_h2d_async is what reads the chunks last.
    state->staging.emplace(chunk, std::array{dst_plugin, src_plugin}, options.pinned_staging);
    state->queue.emplace(dst_backend, dst_stream);
    for (std::size_t k = 0; offset < bytes; ++k) {
      const std::size_t b = k % 2;
      const std::size_t n = std::min(chunk, bytes - offset);
      if (k >= 2) state->queue->wait_for(b);  // the write of chunk k-2 read this buffer
      read_source(src_backend, (*state->staging)[b], DevicePtr{src.value + offset}, n,
                  src_stream);
      state->queue->write(DevicePtr{dst.value + offset}, (*state->staging)[b], n, b);
      offset += n;
    }
    return state;
  } catch (const Error& e) {
    // Leaving this function destroys `state`: its queue waits for the stream, then the staging
    // memory goes.
    throw what.wrap(e, operation, ": at byte " + std::to_string(offset));
  } catch (const std::bad_alloc&) {
    throw Error(Status::out_of_memory, std::string(dst_backend.name()), operation,
                what.text() + ": no host memory for the staging chunks");
  }
}

void check_chunk(const PeerCopyOptions& options, const Description& what, const char* operation) {
  if (options.chunk_bytes == 0)
    throw Error(Status::invalid_argument, std::string(what.dst_backend->name()), operation,
                what.text() + ": chunk_bytes is 0");
}

}  // namespace

void copy_peer(GpuBackend& dst_backend, DevicePtr dst, GpuBackend& src_backend, DevicePtr src,
               std::size_t bytes, const PeerCopyOptions& options) {
  check_chunk(options, Description{&dst_backend, dst, &src_backend, src, bytes}, "copy_peer");
  if (bytes == 0) return;
  if (&dst_backend == &src_backend) {
    dst_backend.copy_d2d(dst, src, bytes);
    return;
  }
  const std::unique_ptr<PeerCopy::State> state = start_copy(
      dst_backend, dst, Stream{}, src_backend, src, Stream{}, bytes, options, "copy_peer");
  try {
    state->queue->wait_all();
  } catch (const Error& e) {
    throw state->what.wrap(e, "copy_peer", "");
  }
}

PeerCopy copy_peer_async(GpuBackend& dst_backend, DevicePtr dst, Stream dst_stream,
                         GpuBackend& src_backend, DevicePtr src, Stream src_stream,
                         std::size_t bytes, const PeerCopyOptions& options) {
  const Description what{&dst_backend, dst, &src_backend, src, bytes};
  check_chunk(options, what, "copy_peer_async");
  if (bytes == 0) return PeerCopy();
  if (&dst_backend == &src_backend) {
    auto state = std::make_unique<PeerCopy::State>(what);
    try {
      state->queue.emplace(dst_backend, dst_stream);
      order_after(dst_backend, dst_stream, src_stream);
      dst_backend.copy_d2d_async(dst, src, bytes, dst_stream);
      state->queue->mark(0);
    } catch (const Error& e) {
      throw what.wrap(e, "copy_peer_async", "");
    }
    return PeerCopy(std::move(state));
  }
  return PeerCopy(start_copy(dst_backend, dst, dst_stream, src_backend, src, src_stream, bytes,
                             options, "copy_peer_async"));
}

}  // namespace gpuplug
