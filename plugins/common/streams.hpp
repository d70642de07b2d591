// SPDX-License-Identifier: Apache-2.0
// StreamSet: one device's live streams, checked and destroyed the same way for every vendor.
#pragma once

#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <unordered_set>
#include <vector>

namespace gpuplug::sdk {

class Device;

/// The streams a Device created and has not destroyed, by their opaque ABI value (never 0: 0 is
/// the default stream). The SDK creates and destroys streams through it, calling the vendor
/// hooks `vendor_stream_create` / `vendor_stream_destroy`, and checks every stream argument
/// against it before a vendor hook sees it, except launch's (the hot path trusts its stream).
///
/// Destroy order: a stream leaves the set before the vendor destroys it, so two concurrent
/// destroys of one handle cannot both reach the vendor; at shutdown the streams still live are
/// destroyed last, after the device synchronized, its modules were unloaded and its ledger swept.
///
/// Thread-safety: every member may be called concurrently (a shared lock for checks, an
/// exclusive one to add or remove). Errors are sdk::Failure(INVALID_ARGUMENT).
class StreamSet {
 public:
  /// vendor_stream_create (vendor_stream_create_flags when `flags` is given: a GPUPLUG_STREAM_*
  /// value, anything else is Failure(INVALID_ARGUMENT) naming it), then records the stream; if
  /// recording fails the stream is destroyed again and the failure rethrown.
  std::uint64_t create(Device& device, std::optional<std::uint32_t> flags = std::nullopt);
  /// Returns when `stream` is 0 or live; else Failure(INVALID_ARGUMENT) "<op>: unknown stream N
  /// (not created by this backend, or destroyed)".
  void check(const char* op, std::uint64_t stream) const;
  /// vendor_import_stream, then records the stream as imported (ABI 1.2): Failure(INVALID_ARGUMENT)
  /// when `native` is null or its value is already live (the vendor forgets it again then).
  std::uint64_t adopt(Device& device, void* native);
  /// Takes `stream` out of the set, then vendor_stream_destroy (which waits for its work), or for
  /// an imported stream vendor_forget_stream. Failure(INVALID_ARGUMENT) for the default stream or
  /// an unknown one.
  void destroy(Device& device, std::uint64_t stream);
  /// Destroys every live stream (forgets the imported ones); failures are logged and the rest
  /// still destroyed. Never throws.
  void destroy_all(Device& device) noexcept;
  /// The live streams, in no particular order.
  std::vector<std::uint64_t> list() const;
  /// Calls f(stream) for each live stream while no stream is being destroyed, for a vendor whose
  /// synchronize waits on each: a stream another thread destroyed after a plain list() would
  /// reach the runtime as a freed handle. A destroy waits for the calls to end, and they for it.
  template <class F>
  void for_each_live(F&& f) const {
    std::shared_lock gate(destroy_gate_);
    for (const std::uint64_t stream : list()) f(stream);
  }

 private:
  // Shared by for_each_live; exclusive in destroy and destroy_all, from taking a stream out of
  // the set to the vendor's destroy. Taken before mutex_, never inside it.
  mutable std::shared_mutex destroy_gate_;
  mutable std::shared_mutex mutex_;
  std::unordered_set<std::uint64_t> live_;      // guarded by mutex_
  std::unordered_set<std::uint64_t> imported_;  // guarded by mutex_; a subset of live_
};

}  // namespace gpuplug::sdk
