// SPDX-License-Identifier: Apache-2.0
// The SDK's graph slots (ABI 1.3, graphs.cpp), declared for the table fill of plugin_sdk.cpp,
// which takes &slot_<name> for every instance slot of the list.
#pragma once

#include <gpuplug/abi.h>

#include <cstdint>

#if GPUPLUG_ABI_VERSION_MINOR >= 3
namespace gpuplug::sdk::detail {

gpuplug_status_t slot_stream_begin_capture(gpuplug_instance_t inst, std::uint64_t stream,
                                           std::int32_t mode) noexcept;
gpuplug_status_t slot_stream_end_capture(gpuplug_instance_t inst, std::uint64_t stream,
                                         std::uint64_t* graph) noexcept;
gpuplug_status_t slot_graph_launch(gpuplug_instance_t inst, std::uint64_t graph,
                                   std::uint64_t stream) noexcept;
gpuplug_status_t slot_graph_destroy(gpuplug_instance_t inst, std::uint64_t graph) noexcept;
gpuplug_status_t slot_stream_abort_capture(gpuplug_instance_t inst, std::uint64_t stream) noexcept;
gpuplug_status_t slot_stream_is_capturing(gpuplug_instance_t inst, std::uint64_t stream,
                                          std::int32_t* capturing) noexcept;

}  // namespace gpuplug::sdk::detail
#endif
