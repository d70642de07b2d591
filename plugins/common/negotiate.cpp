// SPDX-License-Identifier: Apache-2.0
// Version negotiation at the entry point: the per-minor views of a plugin's table, and the one a
// host of a given ABI version gets (docs/architecture.md, ABI-4).
#include <cstring>
#include <gpuplug/support/abi_slots.hpp>

#include "plugin_sdk.hpp"

namespace gpuplug::sdk::detail {

TableViews make_table_views(const gpuplug_plugin_v1& full) noexcept {
  TableViews views{};
  for (std::uint32_t minor = 0; minor < views.size(); ++minor) {
    gpuplug_plugin_v1& t = views[minor];
    t = full;
    const std::size_t size = abi::table_size_of_minor(minor);
    t.struct_size = static_cast<std::uint32_t>(size);
    t.abi_version = GPUPLUG_MAKE_VERSION(GPUPLUG_ABI_VERSION_MAJOR, minor);
    // Every byte past that minor's table zero: a slot appended later is not there for its host,
    // whatever it reads.
    std::memset(reinterpret_cast<unsigned char*>(&t) + size, 0, sizeof t - size);
  }
  return views;
}

const gpuplug_plugin_v1* negotiate(const gpuplug_plugin_v1& full, const TableViews& views,
                                   std::uint32_t host_abi_version) noexcept {
  if (GPUPLUG_ABI_MAJOR(host_abi_version) != GPUPLUG_ABI_MAJOR(full.abi_version)) return &full;
  const std::uint32_t minor = GPUPLUG_ABI_MINOR(host_abi_version);
  return minor < views.size() ? &views[minor] : &full;
}

}  // namespace gpuplug::sdk::detail
