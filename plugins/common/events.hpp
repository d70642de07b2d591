// SPDX-License-Identifier: Apache-2.0
// EventSet: one device's live events (ABI 1.1), checked and destroyed the same way for every
// vendor.
#pragma once

#include <cstdint>
#include <shared_mutex>
#include <unordered_map>

namespace gpuplug::sdk {

class Device;

/// The events a Device created and has not destroyed, by their opaque ABI value (never 0), and
/// whether each was ever recorded. The SDK's event slots go through it: every event argument is
/// checked here before a vendor hook sees it, so a foreign, destroyed or never-created value is
/// Failure(INVALID_ARGUMENT) "<op>: unknown event N (not created by this backend, or destroyed)"
/// and never reaches the driver (where CUDA and HIP would read freed memory).
///
/// Destroy order: an event leaves the set before the vendor destroys it, so two concurrent
/// destroys of one handle cannot both reach the vendor; at shutdown the events still live are
/// destroyed after the streams (Device::shutdown).
///
/// Thread-safety: every member may be called concurrently (a shared lock for checks, an
/// exclusive one to add, mark or remove). Using an event while another thread destroys it is the
/// caller's race, as for streams: the vendor may then see a destroyed handle, and reports it.
class EventSet {
 public:
  /// vendor_event_create, then records the event; if recording fails the event is destroyed
  /// again and the failure rethrown.
  std::uint64_t create(Device& device);
  /// Returns when `event` is live; else Failure(INVALID_ARGUMENT) naming `op` and the event.
  void check(const char* op, std::uint64_t event) const;
  /// As check, and also refuses an event never recorded (elapsed_ms needs a capture):
  /// Failure(INVALID_ARGUMENT) "<op>: event N was never recorded".
  void check_recorded(const char* op, std::uint64_t event) const;
  /// Remembers that `event` has been recorded (after vendor_event_record succeeded).
  void mark_recorded(std::uint64_t event);
  /// Takes `event` out of the set, then vendor_event_destroy. Failure(INVALID_ARGUMENT) for an
  /// unknown one.
  void destroy(Device& device, std::uint64_t event);
  /// Destroys every live event; failures are logged and the rest still destroyed. Never throws.
  void destroy_all(Device& device) noexcept;

 private:
  [[noreturn]] static void fail_unknown(const char* op, std::uint64_t event);

  mutable std::shared_mutex mutex_;
  std::unordered_map<std::uint64_t, bool> live_;  // event -> recorded; guarded by mutex_
};

}  // namespace gpuplug::sdk
