// SPDX-License-Identifier: Apache-2.0
// VulkanDevice graphs (ABI 1.3): the copies, memsets and launches queued on a capturing stream
// are recorded into sdk::Captures (which also knows what invalidates a capture); a replay runs
// the recorded operations in order on the queue, each complete before the next, as the calls
// would have run.
#include <memory>

#include "device.hpp"
#include "kernel.hpp"

namespace gpuplug::vulkan {

using Kind = sdk::CapturedOp::Kind;

bool VulkanDevice::blocks_with_default(std::uint64_t stream) {
  if (stream == 0) return true;
  std::lock_guard lock(stream_mutex_);
  return !non_blocking_.contains(stream);
}

bool VulkanDevice::captured_copy(std::uint64_t stream, const char* op, Kind kind,
                                 std::uint64_t dst, const void* src, std::uint64_t bytes,
                                 bool stage) {
  return captures_.record(stream, op, [&] {
    return sdk::CapturedOp::copy(kind, reinterpret_cast<void*>(dst), src,
                                 static_cast<std::size_t>(bytes), stage);
  });
}

void VulkanDevice::vendor_begin_capture(std::uint64_t stream, std::int32_t mode) {
  captures_.begin(stream, mode, blocks_with_default(stream));
}

std::uint64_t VulkanDevice::vendor_end_capture(std::uint64_t stream) {
  return captures_.end(stream);
}

// The operations were checked when they were recorded; `g` keeps the staged bytes and the
// packed push constants alive until this returns. A kernel's module outlives the graphs that
// launch it as long as the caller keeps it loaded (as for every backend).
void VulkanDevice::vendor_graph_launch(std::uint64_t graph, std::uint64_t stream) {
  const std::shared_ptr<const sdk::GraphData> g = captures_.graph(graph);
  if (captures_.any() && captures_.record_graph(stream, *g)) [[unlikely]]
    return;
  for (const sdk::CapturedOp& op : g->ops) {
    const auto dst = reinterpret_cast<std::uintptr_t>(op.dst);
    const auto src = reinterpret_cast<std::uintptr_t>(op.src);
    switch (op.kind) {
      case Kind::copy_h2d: copy_h2d_now(dst, op.src, op.bytes, stream); break;
      case Kind::copy_d2h: copy_d2h_now(op.dst, src, op.bytes, stream); break;
      case Kind::copy_d2d: copy_d2d_now(dst, src, op.bytes, stream); break;
      case Kind::fill: memset_now(dst, op.value, op.bytes, stream); break;
      case Kind::launch:
        dispatch(*static_cast<Kernel*>(const_cast<void*>(op.kernel)), op.grid, op.block,
                 op.args.data(), stream);
        break;
    }
  }
}

void VulkanDevice::vendor_graph_destroy(std::uint64_t graph) { captures_.destroy_graph(graph); }

void VulkanDevice::vendor_abort_capture(std::uint64_t stream) { captures_.abort(stream); }

bool VulkanDevice::vendor_is_capturing(std::uint64_t stream) {
  return captures_.is_capturing(stream);
}

}  // namespace gpuplug::vulkan
