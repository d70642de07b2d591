// SPDX-License-Identifier: Apache-2.0
// The SDK's ABI 1.3 arena slots: device memory the ledger keeps apart from the live bytes (kind
// arena; docs/memory.md). Each checks its out argument, calls the Device and catches everything.
#include "edge.hpp"

namespace gpuplug::sdk::detail {

gpuplug_status_t slot_alloc_arena(gpuplug_instance_t inst, std::uint64_t bytes, const char* site,
                                  std::uint64_t* out) noexcept {
  return guarded(inst, "alloc_arena", [&](Device& d) {
    GPUPLUG_EXPECTS(out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "alloc_arena: out is null");
    *out = d.allocate(bytes, site, alloc_kind_arena);
  });
}

gpuplug_status_t slot_free_arena(gpuplug_instance_t inst, std::uint64_t ptr) noexcept {
  return guarded(inst, "free_arena", [&](Device& d) {
    if (ptr != 0) d.release_arena(ptr);
  });
}

}  // namespace gpuplug::sdk::detail
