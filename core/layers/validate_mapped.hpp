// SPDX-License-Identifier: Apache-2.0
// MappedRecord (core-private): the validate layer's record of one backend's mapped host memory
// (ABI 1.3 alloc_host_mapped), by host address, for the checks of free_host_mapped and
// host_ptr_to_device.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "layers/validate_handles.hpp"

namespace gpuplug::detail::layers {

/// The live mapped allocations of one backend (host range and device address), and the host
/// pointers freed recently, so that a double free says so. Their device ranges are in the layer's
/// MemoryRecord like any allocation's. Thread-safe.
class MappedRecord {
 public:
  /// After a successful alloc_host_mapped.
  void added(std::uint64_t host, std::uint64_t device, std::uint64_t bytes);
  /// Why `host` lies in no live mapped allocation; empty when it does.
  std::string check_inside(std::uint64_t host) const;
  /// The device address of the live mapped allocation that starts at `host`; nullopt with `why`
  /// set when none does (an interior pointer, freed, unknown).
  std::optional<std::uint64_t> device_of_start(std::uint64_t host, std::string& why) const;
  /// After a successful free_host_mapped of `host`.
  void removed(std::uint64_t host);
  /// After sweep_unreleased: nothing is live.
  void swept();

 private:
  struct Range {
    std::uint64_t device = 0;
    std::uint64_t bytes = 0;
  };
  /// The live allocation holding `host` (lock held), or null.
  const std::pair<const std::uint64_t, Range>* holding(std::uint64_t host) const;

  mutable std::mutex mutex_;
  std::map<std::uint64_t, Range> live_;  // by host address
  RecentHandles freed_;                  // host addresses freed
};

}  // namespace gpuplug::detail::layers
