// SPDX-License-Identifier: Apache-2.0
// CudaDevice's graphs (ABI 1.3): stream capture through the driver (cuStreamBeginCapture_v2,
// cuStreamEndCapture, cuGraphInstantiateWithFlags), replay (cuGraphLaunch) and the upload
// sources staged while a stream captures.
#include <string>

#include "device.hpp"

namespace gpuplug::cuda {

namespace {

// The ABI's capture modes are CUDA's, value for value.
static_assert(GPUPLUG_CAPTURE_MODE_GLOBAL == CU_STREAM_CAPTURE_MODE_GLOBAL);
static_assert(GPUPLUG_CAPTURE_MODE_THREAD_LOCAL == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
static_assert(GPUPLUG_CAPTURE_MODE_RELAXED == CU_STREAM_CAPTURE_MODE_RELAXED);

CUgraphExec as_exec(std::uint64_t graph) noexcept {
  return reinterpret_cast<CUgraphExec>(static_cast<std::uintptr_t>(graph));
}

struct CaptureInfo {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;  // the driver's id of the capture; valid unless status is NONE
};

/// `stream`'s capture status and id (cuStreamGetCaptureInfo_v3); the context is current.
CaptureInfo capture_info(const DriverApi& api, std::uint64_t stream) {
  CaptureInfo info;
  check(api.stream_get_capture_info(as_stream(stream), &info.status, &info.id, nullptr, nullptr,
                                    nullptr, nullptr),
        "cuStreamGetCaptureInfo");
  return info;
}

std::string stream_name(std::uint64_t stream) { return "stream " + std::to_string(stream); }

}  // namespace

void CudaDevice::require_graphs(const char* op) const {
  if (const char* missing = api_.missing_graph_entry_point(); missing != nullptr) [[unlikely]]
    sdk::fail(GPUPLUG_STATUS_UNSUPPORTED,
              std::string(op) + ": graphs are not supported: the CUDA driver " +
                  version_text(api_.driver_version) + " does not provide " + missing);
}

const void* CudaDevice::stage_for_capture(const void* src, std::uint64_t bytes,
                                          std::uint64_t stream) {
  if (!uploads_.any_active() || stream == 0 || bytes == 0 ||
      api_.missing_graph_entry_point() != nullptr) [[likely]]
    return src;
  const CaptureInfo info = capture_info(api_, stream);
  // An invalidated capture records nothing: the copy fails with the driver's reason.
  if (info.status != CU_STREAM_CAPTURE_STATUS_ACTIVE) return src;
  return uploads_.stage(info.id, src, bytes);
}

void CudaDevice::release_retired_uploads() noexcept { uploads_.release_retired(); }

void CudaDevice::vendor_begin_capture(std::uint64_t stream, std::int32_t mode) {
  require_graphs("stream_begin_capture");
  const ContextScope current = make_current();
  // The driver's answer to a second begin is CUDA_ERROR_ILLEGAL_STATE; the ABI's is
  // INVALID_ARGUMENT naming the stream, and the capture going on.
  if (capture_info(api_, stream).status != CU_STREAM_CAPTURE_STATUS_NONE)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "stream_begin_capture: " + stream_name(stream) + " captures already");
  if (const CUresult r =
          api_.stream_begin_capture(as_stream(stream), static_cast<CUstreamCaptureMode>(mode));
      r != CUDA_SUCCESS)
    throw_error(r, "cuStreamBeginCapture of " + stream_name(stream));
  uploads_.begun();
}

CUresult CudaDevice::end_capture_of(std::uint64_t stream, std::uint64_t id, CUgraph* graph) {
  *graph = nullptr;
  CUresult r = api_.stream_end_capture(as_stream(stream), graph);
  // A forked stream cannot end the capture: its origin, the one member that can, does.
  if (r == CUDA_ERROR_STREAM_CAPTURE_UNMATCHED) {
    for (const std::uint64_t other : streams().list()) {
      if (other == stream) continue;
      const CaptureInfo o = capture_info(api_, other);
      if (o.status == CU_STREAM_CAPTURE_STATUS_NONE || o.id != id) continue;
      r = api_.stream_end_capture(as_stream(other), graph);
      if (r != CUDA_ERROR_STREAM_CAPTURE_UNMATCHED) break;
    }
  }
  if (r != CUDA_ERROR_STREAM_CAPTURE_UNMATCHED && r != CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
    uploads_.ended(id, 0);  // ended (into a graph or not): a graph takes its copies later
  return r;
}

std::uint64_t CudaDevice::vendor_end_capture(std::uint64_t stream) {
  require_graphs("stream_end_capture");
  const ContextScope current = make_current();
  const CaptureInfo info = capture_info(api_, stream);
  if (info.status == CU_STREAM_CAPTURE_STATUS_NONE)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "stream_end_capture: " + stream_name(stream) + " is not capturing");
  // The streams forked into this capture, named if the driver finds one not joined back.
  std::string forked;
  for (const std::uint64_t other : streams().list()) {
    if (other == stream) continue;
    const CaptureInfo o = capture_info(api_, other);
    if (o.status != CU_STREAM_CAPTURE_STATUS_NONE && o.id == info.id)
      forked += (forked.empty() ? "" : ", ") + stream_name(other);
  }
  CUgraph graph = nullptr;
  CUresult r = api_.stream_end_capture(as_stream(stream), &graph);
  if (r == CUDA_ERROR_STREAM_CAPTURE_UNMATCHED)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "stream_end_capture: " + stream_name(stream) +
                  " was forked into a capture; end it on the stream that began it (" +
                  describe_error("cuStreamEndCapture", r) + ")");
  if (r == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
    throw_error(r, "cuStreamEndCapture of " + stream_name(stream) +
                       " (a global or thread-local capture ends on the thread that began it)");
  CUgraphExec exec = nullptr;
  if (r == CUDA_SUCCESS) {
    r = api_.graph_instantiate(&exec, graph, 0);
    api_.graph_destroy(graph);  // the exec is all a replay needs
  } else if (graph != nullptr) {
    api_.graph_destroy(graph);
  }
  uploads_.ended(info.id, r == CUDA_SUCCESS ? reinterpret_cast<std::uintptr_t>(exec) : 0);
  if (r == CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
    throw_error(r, "cuStreamEndCapture of " + stream_name(stream) + ": a forked stream was not " +
                       "joined back (forked: " + forked + ")");
  if (r != CUDA_SUCCESS)
    throw_error(r, (graph == nullptr ? "cuStreamEndCapture of " : "cuGraphInstantiateWithFlags of ") +
                       stream_name(stream) + "'s capture");
  return reinterpret_cast<std::uintptr_t>(exec);
}

void CudaDevice::vendor_graph_launch(std::uint64_t graph, std::uint64_t stream) {
  require_graphs("graph_launch");
  const ContextScope current = make_current();
  if (const CUresult r = api_.graph_launch(as_exec(graph), as_stream(stream)); r != CUDA_SUCCESS)
    throw_error(r, "cuGraphLaunch of graph " + std::to_string(graph) + " on " +
                       stream_name(stream));
}

void CudaDevice::vendor_graph_destroy(std::uint64_t graph) {
  require_graphs("graph_destroy");
  const ContextScope current = make_current();
  // The driver lets queued replays finish; their staged sources wait for a synchronize.
  uploads_.retire(graph);
  check(api_.graph_exec_destroy(as_exec(graph)), "cuGraphExecDestroy");
}

void CudaDevice::vendor_abort_capture(std::uint64_t stream) {
  require_graphs("stream_abort_capture");
  if (stream == 0) return;  // the legacy default stream never captures
  const ContextScope current = make_current();
  const CaptureInfo info = capture_info(api_, stream);
  if (info.status == CU_STREAM_CAPTURE_STATUS_NONE) return;
  CUgraph graph = nullptr;
  const CUresult r = end_capture_of(stream, info.id, &graph);
  if (graph != nullptr) api_.graph_destroy(graph);
  // An invalidated capture ends with 901 and no graph, an unjoined one with 904: both are gone.
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED &&
      r != CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
    throw_error(r, "cuStreamEndCapture (abort) of " + stream_name(stream) + "'s capture");
}

bool CudaDevice::vendor_is_capturing(std::uint64_t stream) {
  require_graphs("stream_is_capturing");
  // Asked of the legacy stream while a blocking stream captures, the driver answers
  // CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; the default stream itself never captures.
  if (stream == 0) return false;
  const ContextScope current = make_current();
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  check(api_.stream_is_capturing(as_stream(stream), &status), "cuStreamIsCapturing");
  return status != CU_STREAM_CAPTURE_STATUS_NONE;  // active, or invalidated until ended
}

}  // namespace gpuplug::cuda
