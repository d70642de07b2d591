// SPDX-License-Identifier: Apache-2.0
// MappedRecord: interior, freed and unknown host pointers of mapped host memory.
#include "layers/validate_mapped.hpp"

#include <gpuplug/support/text.hpp>

namespace gpuplug::detail::layers {

using support::hex;

void MappedRecord::added(std::uint64_t host, std::uint64_t device, std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  live_.insert_or_assign(host, Range{device, bytes});
  freed_.erase(host);
}

const std::pair<const std::uint64_t, MappedRecord::Range>* MappedRecord::holding(
    std::uint64_t host) const {
  auto it = live_.upper_bound(host);
  if (it == live_.begin()) return nullptr;
  --it;
  const std::uint64_t offset = host - it->first;
  return offset == 0 || offset < it->second.bytes ? &*it : nullptr;
}

std::string MappedRecord::check_inside(std::uint64_t host) const {
  std::lock_guard lock(mutex_);
  if (holding(host) != nullptr) return {};
  if (freed_.contains(host)) return "host pointer " + hex(host) + " is mapped host memory freed already";
  return "host pointer " + hex(host) +
         " is not mapped host memory of this backend (alloc_host_mapped never returned a range "
         "holding it)";
}

std::optional<std::uint64_t> MappedRecord::device_of_start(std::uint64_t host,
                                                           std::string& why) const {
  std::lock_guard lock(mutex_);
  if (const auto it = live_.find(host); it != live_.end()) return it->second.device;
  if (const auto* inside = holding(host))
    why = "host pointer " + hex(host) + " points " + std::to_string(host - inside->first) +
          " bytes inside the mapped allocation at " + hex(inside->first) + ", not at its start";
  else if (freed_.contains(host))
    why = "host pointer " + hex(host) + " is mapped host memory freed already (double free)";
  else
    why = "host pointer " + hex(host) + " is not mapped host memory of this backend";
  return std::nullopt;
}

void MappedRecord::removed(std::uint64_t host) {
  std::lock_guard lock(mutex_);
  live_.erase(host);
  freed_.insert(host);
}

void MappedRecord::swept() {
  std::lock_guard lock(mutex_);
  for (const auto& [host, range] : live_) freed_.insert(host);
  live_.clear();
}

}  // namespace gpuplug::detail::layers
