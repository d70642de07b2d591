// SPDX-License-Identifier: Apache-2.0
// Device::MappedSet (SDK-private): the mapped host allocations of one device, by host and by
// device address, for the pointer checks of the ABI 1.3 mapped-memory slots.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include "plugin_sdk.hpp"

namespace gpuplug::sdk {

/// The ledger holds each mapped allocation at its device address (alloc_kind_pinned); this record
/// adds what the ledger cannot answer: which host range maps to which device address. Both
/// indexes hold the same allocations. Thread-safe.
struct Device::MappedSet {
  struct Range {
    std::uint64_t other = 0;  // the device address (in by_host) or the host address (in by_device)
    std::uint64_t bytes = 0;
  };
  std::mutex mutex;
  std::map<std::uint64_t, Range> by_host;
  std::map<std::uint64_t, Range> by_device;

  /// The allocation whose range in `index` holds `address` (a zero-byte one: its own address
  /// only), as {its start, its range}, or nullopt. Lock held.
  static std::optional<std::pair<std::uint64_t, Range>> holding(
      const std::map<std::uint64_t, Range>& index, std::uint64_t address) {
    auto it = index.upper_bound(address);
    if (it == index.begin()) return std::nullopt;
    --it;
    const std::uint64_t offset = address - it->first;
    if (offset == 0 || offset < it->second.bytes) return *it;
    return std::nullopt;
  }
};

}  // namespace gpuplug::sdk
