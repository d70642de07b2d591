// SPDX-License-Identifier: Apache-2.0
// HipDevice's graphs (ABI 1.3): stream capture through the runtime (hipStreamBeginCapture,
// hipStreamEndCapture, hipGraphInstantiateWithFlags), replay (hipGraphLaunch) and the upload
// sources staged while a stream captures.
#include <string>

#include "device.hpp"

namespace gpuplug::hip {

namespace {

// The ABI's capture modes are HIP's (and CUDA's), value for value.
static_assert(GPUPLUG_CAPTURE_MODE_GLOBAL == hipStreamCaptureModeGlobal);
static_assert(GPUPLUG_CAPTURE_MODE_THREAD_LOCAL == hipStreamCaptureModeThreadLocal);
static_assert(GPUPLUG_CAPTURE_MODE_RELAXED == hipStreamCaptureModeRelaxed);

hipGraphExec_t as_exec(std::uint64_t graph) noexcept {
  return reinterpret_cast<hipGraphExec_t>(static_cast<std::uintptr_t>(graph));
}

struct CaptureInfo {
  hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
  unsigned long long id = 0;  // the runtime's id of the capture; valid unless status is None
};

/// `stream`'s capture status and id (hipStreamGetCaptureInfo); the device is current.
CaptureInfo capture_info(const DriverApi& hip, std::uint64_t stream) {
  CaptureInfo info;
  check(hip.stream_get_capture_info(as_stream(stream), &info.status, &info.id),
        "hipStreamGetCaptureInfo");
  return info;
}

std::string stream_name(std::uint64_t stream) { return "stream " + std::to_string(stream); }

}  // namespace

void HipDevice::require_graphs(const char* op) const {
  if (const char* missing = hip_.missing_graph_entry_point(); missing != nullptr) [[unlikely]]
    sdk::fail(GPUPLUG_STATUS_UNSUPPORTED, std::string(op) +
                                              ": graphs are not supported: the HIP runtime (" +
                                              hip_.library + ") does not provide " + missing);
}

const void* HipDevice::stage_for_capture(const void* src, std::uint64_t bytes,
                                         std::uint64_t stream) {
  if (!uploads_.any_active() || stream == 0 || bytes == 0 ||
      hip_.missing_graph_entry_point() != nullptr) [[likely]]
    return src;
  const CaptureInfo info = capture_info(hip_, stream);
  // An invalidated capture records nothing: the copy fails with the runtime's reason.
  if (info.status != hipStreamCaptureStatusActive) return src;
  return uploads_.stage(info.id, src, bytes);
}

void HipDevice::vendor_begin_capture(std::uint64_t stream, std::int32_t mode) {
  require_graphs("stream_begin_capture");
  make_current();
  // The runtime's answer to a second begin is hipErrorIllegalState; the ABI's is
  // INVALID_ARGUMENT naming the stream, and the capture going on.
  if (capture_info(hip_, stream).status != hipStreamCaptureStatusNone)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "stream_begin_capture: " + stream_name(stream) + " captures already");
  if (const hipError_t e =
          hip_.stream_begin_capture(as_stream(stream), static_cast<hipStreamCaptureMode>(mode));
      e != hipSuccess)
    throw_error(e, "hipStreamBeginCapture of " + stream_name(stream));
  uploads_.begun();
}

hipError_t HipDevice::end_capture_of(std::uint64_t stream, unsigned long long id,
                                     hipGraph_t* graph) {
  *graph = nullptr;
  hipError_t e = hip_.stream_end_capture(as_stream(stream), graph);
  // A forked stream cannot end the capture: its origin, the one member that can, does.
  if (e == hipErrorStreamCaptureUnmatched) {
    for (const std::uint64_t other : streams().list()) {
      if (other == stream) continue;
      const CaptureInfo o = capture_info(hip_, other);
      if (o.status == hipStreamCaptureStatusNone || o.id != id) continue;
      e = hip_.stream_end_capture(as_stream(other), graph);
      if (e != hipErrorStreamCaptureUnmatched) break;
    }
  }
  if (e != hipErrorStreamCaptureUnmatched && e != hipErrorStreamCaptureWrongThread)
    uploads_.ended(id, 0);
  return e;
}

std::uint64_t HipDevice::vendor_end_capture(std::uint64_t stream) {
  require_graphs("stream_end_capture");
  make_current();
  const CaptureInfo info = capture_info(hip_, stream);
  if (info.status == hipStreamCaptureStatusNone)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "stream_end_capture: " + stream_name(stream) + " is not capturing");
  // The streams forked into this capture, named if the runtime finds one not joined back.
  std::string forked;
  for (const std::uint64_t other : streams().list()) {
    if (other == stream) continue;
    const CaptureInfo o = capture_info(hip_, other);
    if (o.status != hipStreamCaptureStatusNone && o.id == info.id)
      forked += (forked.empty() ? "" : ", ") + stream_name(other);
  }
  hipGraph_t graph = nullptr;
  hipError_t e = hip_.stream_end_capture(as_stream(stream), &graph);
  if (e == hipErrorStreamCaptureUnmatched)
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
              "stream_end_capture: " + stream_name(stream) +
                  " was forked into a capture; end it on the stream that began it (" +
                  describe_error("hipStreamEndCapture", e) + ")");
  if (e == hipErrorStreamCaptureWrongThread)
    throw_error(e, "hipStreamEndCapture of " + stream_name(stream) +
                       " (a global or thread-local capture ends on the thread that began it)");
  hipGraphExec_t exec = nullptr;
  const bool captured = e == hipSuccess;
  if (captured) e = hip_.graph_instantiate(&exec, graph, 0);
  // The exec is all a replay needs; a failed destroy only leaks the template graph.
  if (graph != nullptr) (void)hip_.graph_destroy(graph);
  uploads_.ended(info.id, e == hipSuccess ? reinterpret_cast<std::uintptr_t>(exec) : 0);
  if (e == hipErrorStreamCaptureUnjoined)
    throw_error(e, "hipStreamEndCapture of " + stream_name(stream) +
                       ": a forked stream was not joined back (forked: " + forked + ")");
  if (e != hipSuccess)
    throw_error(e, std::string(captured ? "hipGraphInstantiateWithFlags of " :
                                          "hipStreamEndCapture of ") +
                       stream_name(stream) + "'s capture");
  return reinterpret_cast<std::uintptr_t>(exec);
}

void HipDevice::vendor_graph_launch(std::uint64_t graph, std::uint64_t stream) {
  require_graphs("graph_launch");
  make_current();
  if (const hipError_t e = hip_.graph_launch(as_exec(graph), as_stream(stream)); e != hipSuccess)
    throw_error(e, "hipGraphLaunch of graph " + std::to_string(graph) + " on " +
                       stream_name(stream));
}

void HipDevice::vendor_graph_destroy(std::uint64_t graph) {
  require_graphs("graph_destroy");
  make_current();
  // The runtime lets queued replays finish; their staged sources wait for a synchronize.
  uploads_.retire(graph);
  check(hip_.graph_exec_destroy(as_exec(graph)), "hipGraphExecDestroy");
}

void HipDevice::vendor_abort_capture(std::uint64_t stream) {
  require_graphs("stream_abort_capture");
  if (stream == 0) return;  // the null stream never captures
  make_current();
  const CaptureInfo info = capture_info(hip_, stream);
  if (info.status == hipStreamCaptureStatusNone) return;
  hipGraph_t graph = nullptr;
  const hipError_t e = end_capture_of(stream, info.id, &graph);
  if (graph != nullptr) (void)hip_.graph_destroy(graph);  // nothing to report it to
  // An invalidated capture ends with 901 and no graph, an unjoined one with 904: both are gone.
  if (e != hipSuccess && e != hipErrorStreamCaptureInvalidated &&
      e != hipErrorStreamCaptureUnjoined)
    throw_error(e, "hipStreamEndCapture (abort) of " + stream_name(stream) + "'s capture");
}

bool HipDevice::vendor_is_capturing(std::uint64_t stream) {
  require_graphs("stream_is_capturing");
  // Asked of the null stream while a blocking stream captures, the runtime answers
  // hipErrorStreamCaptureImplicit; the null stream itself never captures.
  if (stream == 0) return false;
  make_current();
  hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
  check(hip_.stream_is_capturing(as_stream(stream), &status), "hipStreamIsCapturing");
  return status != hipStreamCaptureStatusNone;  // active, or invalidated until ended
}

}  // namespace gpuplug::hip
