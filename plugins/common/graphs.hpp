// SPDX-License-Identifier: Apache-2.0
// GraphSet: one device's live graphs (ABI 1.3), checked and destroyed the same way for every
// vendor.
#pragma once

#include <cstdint>
#include <shared_mutex>
#include <unordered_set>

namespace gpuplug::sdk {

class Device;

/// The graphs a Device's vendor_end_capture made and that were not destroyed, by their opaque ABI
/// value (never 0). The SDK's graph slots go through it: every graph argument is checked here
/// before a vendor hook sees it, so a foreign, destroyed or never-made value is
/// Failure(INVALID_ARGUMENT) "<op>: unknown graph N (not made by this backend, or destroyed)".
///
/// Destroy order: a graph leaves the set before the vendor destroys it, so two concurrent
/// destroys of one handle cannot both reach the vendor; at shutdown the graphs still live are
/// destroyed after the streams and events (Device::shutdown).
///
/// Thread-safety: every member may be called concurrently (a shared lock for checks, an
/// exclusive one to add or remove).
class GraphSet {
 public:
  /// Records `graph` (from vendor_end_capture); if recording fails (no memory, or the vendor
  /// returned 0 or a live value) the graph is destroyed again and the failure thrown.
  void add(Device& device, std::uint64_t graph);
  /// Returns when `graph` is live; else Failure(INVALID_ARGUMENT) naming `op` and the graph.
  void check(const char* op, std::uint64_t graph) const;
  /// Takes `graph` out of the set, then vendor_graph_destroy. Failure(INVALID_ARGUMENT) for an
  /// unknown one.
  void destroy(Device& device, std::uint64_t graph);
  /// Destroys every live graph; failures are logged and the rest still destroyed. Never throws.
  void destroy_all(Device& device) noexcept;
  /// vendor_abort_capture for every live stream (shutdown: a capture left active would refuse
  /// the device-wide synchronize). Failures other than UNSUPPORTED are logged. Never throws.
  static void abort_captures(Device& device) noexcept;

 private:
  [[noreturn]] static void fail_unknown(const char* op, std::uint64_t graph);

  mutable std::shared_mutex mutex_;
  std::unordered_set<std::uint64_t> live_;  // guarded by mutex_
};

}  // namespace gpuplug::sdk
