// SPDX-License-Identifier: Apache-2.0
// The host backend's graphs (ABI 1.3): recording work queued on a capturing stream, and replay.
// The bookkeeping (which streams capture, invalidation, the live graphs) is sdk::Captures'.
#include <cstring>
#include <string>
#include <vector>

#include <gpuplug/kernel_args.h>

#include "device.hpp"

namespace gpuplug::host {

using sdk::CapturedOp;
using sdk::GraphData;

bool HostDevice::captured_copy(std::uint64_t stream, const char* op, void* dst, const void* src,
                               std::uint64_t bytes, bool stage) {
  return captures_.record(stream, op, [&] {
    // Host and device memory are one address space: every copy is a memcpy.
    return CapturedOp::copy(CapturedOp::Kind::copy_d2d, dst, src,
                            static_cast<std::size_t>(bytes), stage);
  });
}

bool HostDevice::captured_copy_2d(std::uint64_t stream, const char* op, void* dst,
                                  std::uint64_t dst_pitch, const void* src,
                                  std::uint64_t src_pitch, std::uint64_t width,
                                  std::uint64_t height, bool stage) {
  // One recorded copy per row (replay runs them in order on the stream); the first row's
  // answer says whether the stream captures (the SDK never calls with a height of 0).
  auto* to = static_cast<std::byte*>(dst);
  const auto* from = static_cast<const std::byte*>(src);
  if (!captured_copy(stream, op, to, from, width, stage)) return false;
  for (std::uint64_t r = 1; r < height; ++r)
    captured_copy(stream, op, to + r * dst_pitch, from + r * src_pitch, width, stage);
  return true;
}

bool HostDevice::captured_fill(std::uint64_t stream, void* dst, std::uint8_t value,
                               std::uint64_t bytes) {
  return captures_.record(stream, "memset_d8", [&] {
    return CapturedOp::fill(dst, value, static_cast<std::size_t>(bytes));
  });
}

bool HostDevice::captured_launch(const KernelRecord& kernel, gpuplug_dim3_t grid,
                                 gpuplug_dim3_t block, std::uint32_t shared_bytes,
                                 std::uint64_t stream, void** params) {
  return captures_.record(stream, "launch", [&] {
    if (!kernel.arg_sizes)
      sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
                "launch: kernel " + kernel.name + " publishes no " + kernel.func +
                    GPUPLUG_KERNEL_ARGS_SUFFIX +
                    " (<gpuplug/kernel_args.h>), so its arguments cannot be copied for the "
                    "capture of stream " + std::to_string(stream) +
                    "; the capture is invalidated");
    CapturedOp c;
    c.kind = CapturedOp::Kind::launch;
    c.kernel = reinterpret_cast<const void*>(kernel.fn);  // a function pointer, as dlsym's
    c.name = kernel.name;
    c.grid = grid;
    c.block = block;
    c.shared_bytes = shared_bytes;
    c.arg_sizes = *kernel.arg_sizes;
    std::size_t total = 0;
    for (const std::uint32_t size : c.arg_sizes) total += size;
    c.args.resize(total);
    std::size_t at = 0;
    for (std::size_t i = 0; i < c.arg_sizes.size(); ++i) {
      if (params == nullptr || params[i] == nullptr)
        sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
                  "launch: kernel " + kernel.name + " takes " +
                      std::to_string(c.arg_sizes.size()) + " arguments, argument " +
                      std::to_string(i) + " is null");
      std::memcpy(c.args.data() + at, params[i], c.arg_sizes[i]);
      at += c.arg_sizes[i];
    }
    return c;
  });
}

void HostDevice::vendor_begin_capture(std::uint64_t stream, std::int32_t mode) {
  captures_.begin(stream, mode, executor_.blocks_with_default(stream));
}

std::uint64_t HostDevice::vendor_end_capture(std::uint64_t stream) { return captures_.end(stream); }

// The operations in recording order, on `stream`, without checking them again. Copies and fills
// are queued (a staged upload keeps its bytes alive itself); a launch runs when its turn comes,
// as every host launch does, with params pointing at the graph's copies of the arguments, which
// `graph` keeps alive until this returns.
void HostDevice::vendor_graph_launch(std::uint64_t graph, std::uint64_t stream) {
  const std::shared_ptr<const GraphData> g = captures_.graph(graph);
  if (captures_.any() && captures_.record_graph(stream, *g)) [[unlikely]]
    return;
  std::vector<void*> params;
  for (const CapturedOp& op : g->ops) {
    switch (op.kind) {
      case CapturedOp::Kind::copy_h2d:
      case CapturedOp::Kind::copy_d2h:
      case CapturedOp::Kind::copy_d2d:
        if (op.staged)
          executor_.copy_owned(stream, op.dst, op.staged, op.bytes);
        else
          executor_.copy(stream, op.dst, op.src, op.bytes);
        break;
      case CapturedOp::Kind::fill:
        executor_.fill(stream, op.dst, op.value, op.bytes);
        break;
      case CapturedOp::Kind::launch: {
        params.clear();
        std::size_t at = 0;
        for (const std::uint32_t size : op.arg_sizes) {
          params.push_back(const_cast<std::byte*>(op.args.data() + at));
          at += size;
        }
        executor_.launch(stream, reinterpret_cast<gpuplug_host_kernel_fn>(op.kernel), op.name, op.grid, op.block, op.shared_bytes,
                         params.data());
        break;
      }
    }
  }
}

void HostDevice::vendor_graph_destroy(std::uint64_t graph) { captures_.destroy_graph(graph); }

void HostDevice::vendor_abort_capture(std::uint64_t stream) { captures_.abort(stream); }

bool HostDevice::vendor_is_capturing(std::uint64_t stream) {
  return captures_.is_capturing(stream);
}

}  // namespace gpuplug::host
