// SPDX-License-Identifier: Apache-2.0
// GraphSet (the live graphs of one device around the vendor's hooks), the graph hooks' defaults,
// and the SDK's graph slots (ABI 1.3).
#include "graphs.hpp"

#include <mutex>
#include <string>
#include <vector>

#include "edge.hpp"
#include "gpuplug/support/failures.hpp"
#include "graph_slots.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::sdk {

namespace {
[[noreturn]] void graphs_unsupported(const DeviceConfig& config, const char* op) {
  fail(GPUPLUG_STATUS_UNSUPPORTED, std::string(op) + ": graphs are not supported by " +
                                       config.plugin_name + ":" + std::to_string(config.ordinal));
}
}  // namespace

void Device::vendor_begin_capture(std::uint64_t, std::int32_t) {
  graphs_unsupported(config_, "stream_begin_capture");
}
std::uint64_t Device::vendor_end_capture(std::uint64_t) {
  graphs_unsupported(config_, "stream_end_capture");
}
void Device::vendor_graph_launch(std::uint64_t, std::uint64_t) {
  graphs_unsupported(config_, "graph_launch");
}
void Device::vendor_graph_destroy(std::uint64_t) { graphs_unsupported(config_, "graph_destroy"); }
void Device::vendor_abort_capture(std::uint64_t) {
  graphs_unsupported(config_, "stream_abort_capture");
}
bool Device::vendor_is_capturing(std::uint64_t) {
  graphs_unsupported(config_, "stream_is_capturing");
}

void GraphSet::fail_unknown(const char* op, std::uint64_t graph) {
  fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
       std::string(op) + ": unknown graph " + std::to_string(graph) +
           (graph == 0 ? " (the null graph)" : " (not made by this backend, or destroyed)"));
}

void GraphSet::add(Device& device, std::uint64_t graph) {
  try {
    if (graph == 0)
      fail(GPUPLUG_STATUS_INTERNAL, "stream_end_capture: the vendor made a graph with the value 0");
    std::unique_lock lock(mutex_);
    if (!live_.insert(graph).second)
      fail(GPUPLUG_STATUS_INTERNAL, "stream_end_capture: the vendor returned graph " +
                                        std::to_string(graph) + ", which is still live");
  } catch (...) {
    if (graph != 0) {
      try {
        device.vendor_graph_destroy(graph);
      } catch (...) {  // the first failure is the one to report
      }
    }
    throw;
  }
}

void GraphSet::check(const char* op, std::uint64_t graph) const {
  std::shared_lock lock(mutex_);
  if (!live_.contains(graph)) {
    lock.unlock();
    fail_unknown(op, graph);
  }
}

void GraphSet::destroy(Device& device, std::uint64_t graph) {
  {
    std::unique_lock lock(mutex_);
    if (live_.erase(graph) == 0) {
      lock.unlock();
      fail_unknown("graph_destroy", graph);
    }
  }
  device.vendor_graph_destroy(graph);
}

void GraphSet::destroy_all(Device& device) noexcept {
  std::unordered_set<std::uint64_t> graphs;
  {
    std::unique_lock lock(mutex_);
    graphs.swap(live_);
  }
  for (const std::uint64_t graph : graphs) {
    try {
      device.vendor_graph_destroy(graph);
    } catch (...) {
      try {
        device.log(GPUPLUG_LOG_WARNING, "destroy: graph " + std::to_string(graph) +
                                            " failed to close: " +
                                            support::describe_current_exception());
      } catch (...) {  // no memory for the message: the graph is gone either way
      }
    }
  }
}

void GraphSet::abort_captures(Device& device) noexcept {
  try {
    std::vector<std::uint64_t> streams = device.streams().list();
    for (const std::uint64_t stream : streams) {
      try {
        device.vendor_abort_capture(stream);
      } catch (const Failure& f) {
        if (f.status() != GPUPLUG_STATUS_UNSUPPORTED) throw;
      }
    }
  } catch (...) {
    try {
      device.log(GPUPLUG_LOG_WARNING, "shutdown: aborting the active captures failed: " +
                                          support::describe_current_exception());
    } catch (...) {
    }
  }
}

}  // namespace gpuplug::sdk

#if GPUPLUG_ABI_VERSION_MINOR >= 3
namespace gpuplug::sdk::detail {

gpuplug_status_t slot_stream_begin_capture(gpuplug_instance_t inst, std::uint64_t stream,
                                           std::int32_t mode) noexcept {
  return guarded(inst, "stream_begin_capture", [&](Device& d) {
    d.streams().check("stream_begin_capture", stream);
    GPUPLUG_EXPECTS(stream != 0, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "stream_begin_capture: the default stream 0 cannot capture (capture a "
                    "created stream)");
    if (mode < GPUPLUG_CAPTURE_MODE_GLOBAL || mode > GPUPLUG_CAPTURE_MODE_RELAXED)
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
           "stream_begin_capture: unknown capture mode " + std::to_string(mode) +
               " (GPUPLUG_CAPTURE_MODE_GLOBAL 0, THREAD_LOCAL 1 or RELAXED 2)");
    d.vendor_begin_capture(stream, mode);
  });
}

gpuplug_status_t slot_stream_end_capture(gpuplug_instance_t inst, std::uint64_t stream,
                                         std::uint64_t* graph) noexcept {
  return guarded(inst, "stream_end_capture", [&](Device& d) {
    GPUPLUG_EXPECTS(graph != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "stream_end_capture: graph is null");
    *graph = 0;
    d.streams().check("stream_end_capture", stream);
    const std::uint64_t made = d.vendor_end_capture(stream);
    DeviceAccess::graphs(d).add(d, made);
    *graph = made;
  });
}

gpuplug_status_t slot_graph_launch(gpuplug_instance_t inst, std::uint64_t graph,
                                   std::uint64_t stream) noexcept {
  return guarded(inst, "graph_launch", [&](Device& d) {
    DeviceAccess::graphs(d).check("graph_launch", graph);
    d.streams().check("graph_launch", stream);
    d.vendor_graph_launch(graph, stream);
  });
}

gpuplug_status_t slot_graph_destroy(gpuplug_instance_t inst, std::uint64_t graph) noexcept {
  return guarded(inst, "graph_destroy",
                 [&](Device& d) { DeviceAccess::graphs(d).destroy(d, graph); });
}

// A vendor without graphs has nothing capturing: abort is a no-op, is_capturing false.
gpuplug_status_t slot_stream_abort_capture(gpuplug_instance_t inst, std::uint64_t stream) noexcept {
  return guarded(inst, "stream_abort_capture", [&](Device& d) {
    d.streams().check("stream_abort_capture", stream);
    try {
      d.vendor_abort_capture(stream);
    } catch (const Failure& f) {
      if (f.status() != GPUPLUG_STATUS_UNSUPPORTED) throw;
    }
  });
}

gpuplug_status_t slot_stream_is_capturing(gpuplug_instance_t inst, std::uint64_t stream,
                                          std::int32_t* capturing) noexcept {
  return guarded(inst, "stream_is_capturing", [&](Device& d) {
    GPUPLUG_EXPECTS(capturing != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "stream_is_capturing: capturing is null");
    *capturing = 0;
    d.streams().check("stream_is_capturing", stream);
    try {
      *capturing = d.vendor_is_capturing(stream) ? 1 : 0;
    } catch (const Failure& f) {
      if (f.status() != GPUPLUG_STATUS_UNSUPPORTED) throw;
    }
  });
}

}  // namespace gpuplug::sdk::detail
#endif
