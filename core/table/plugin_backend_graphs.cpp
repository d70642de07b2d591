// SPDX-License-Identifier: Apache-2.0
// PluginBackend's graphs (ABI 1.3): stream capture and replay through the graph slots, or their
// defaults (unsupported; nothing captures) for a plugin without them.
#include <gpuplug/log.hpp>

#include "table/plugin_backend.hpp"

namespace gpuplug::detail {

namespace {
// Refuses the null graph before the plugin sees it, so that no plugin has to special-case 0.
void check_graph(const std::string& backend, Graph graph, const char* operation) {
  if (graph.value == 0) [[unlikely]]
    throw Error(Status::invalid_argument, backend, operation, "the graph is the null graph (0)");
}
}  // namespace

void PluginBackend::begin_capture(Stream stream, CaptureMode mode) {
  check(optional_.stream_begin_capture(*this, stream.value, static_cast<std::int32_t>(mode)),
        "begin_capture");
}

Graph PluginBackend::end_capture(Stream stream) {
  std::uint64_t out = 0;
  check(optional_.stream_end_capture(*this, stream.value, &out), "end_capture");
  if (out == 0)
    throw Error(Status::internal, name_, "end_capture", "the plugin returned the null graph (0)");
  return Graph{out};
}

void PluginBackend::launch_graph(Graph graph, Stream stream) {
  check_graph(name_, graph, "launch_graph");
  check(optional_.graph_launch(*this, graph.value, stream.value), "launch_graph");
}

void PluginBackend::destroy_graph(Graph graph) {
  check_graph(name_, graph, "destroy_graph");
  check(optional_.graph_destroy(*this, graph.value), "destroy_graph");
}

void PluginBackend::abort_capture_if_active(Stream stream) noexcept {
  if (optional_.stream_abort_capture(*this, stream.value) == GPUPLUG_STATUS_SUCCESS) return;
  try {
    log(LogLevel::warning, name_, "abort_capture_if_active: " + last_error());
  } catch (...) {  // nothing more to say without memory
  }
}

bool PluginBackend::stream_is_capturing(Stream stream) {
  std::int32_t capturing = 0;
  check(optional_.stream_is_capturing(*this, stream.value, &capturing), "stream_is_capturing");
  return capturing != 0;
}

}  // namespace gpuplug::detail
