// SPDX-License-Identifier: Apache-2.0
// The trace layer's writers: a recording as Chrome trace-event JSON, as the summary text, and
// the file it is written to.
#include "layers/trace_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <gpuplug/support/escape.hpp>
#include <gpuplug/support/text.hpp>
#include <gpuplug/types.hpp>

namespace gpuplug::detail::layers::trace {

namespace {

std::string milliseconds(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", ns / 1e6);
  return buf;
}

std::string microseconds(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
  return buf;
}

std::string describe_args(const Event& e, const KernelNames& names) {
  using support::hex;
  std::string out;
  auto add = [&](const char* key, const std::string& value, bool quoted = true) {
    if (!out.empty()) out += ',';
    out += support::json_string(key) + ':' + (quoted ? support::json_string(value) : value);
  };
  switch (e.slot) {
    case slot_alloc:
    case slot_alloc_managed:
      add("bytes", std::to_string(e.b), false);
      add("ptr", hex(e.a));
      if (!e.text.empty()) add("site", e.text);
      break;
    case slot_free:
      add("ptr", hex(e.a));
      add("bytes", std::to_string(e.b), false);
      break;
    case slot_copy_h2d: case slot_copy_d2h: case slot_copy_d2d: case slot_copy_h2d_async:
    case slot_copy_d2h_async: case slot_copy_d2d_async: case slot_memset_d8:
    case slot_copy_h2d_async_retained:
    case slot_copy_h2d_2d_async: case slot_copy_d2h_2d_async: case slot_copy_d2d_2d_async:
      add("device_ptr", hex(e.a));
      add("bytes", std::to_string(e.b), false);
      break;
    case slot_stream_create: add("stream", hex(e.a)); break;
    case slot_import_memory:
      add("bytes", std::to_string(e.b), false);
      add("ptr", hex(e.a));
      if (!e.text.empty()) add("site", e.text);
      break;
    case slot_import_stream:
      add("stream", hex(e.a));
      add("native_stream", hex(e.b));
      break;
    case slot_native_pointer: case slot_host_address: add("device_ptr", hex(e.a)); break;
    case slot_alloc_host_mapped:
      add("bytes", std::to_string(e.b), false);
      add("device_ptr", hex(e.a));
      if (!e.text.empty()) add("site", e.text);
      break;
    case slot_free_host_mapped: case slot_host_ptr_to_device: add("host_ptr", hex(e.b)); break;
    case slot_event_create: case slot_event_record: case slot_stream_wait_event:
      add("event", hex(e.a));
      break;
#if GPUPLUG_ABI_VERSION_MINOR >= 3
    case slot_stream_begin_capture: add("mode", std::to_string(e.b), false); break;
    case slot_stream_end_capture: case slot_graph_launch: case slot_graph_destroy:
      add("graph", hex(e.a));
      break;
    case slot_stream_create_with_flags:
      add("stream", hex(e.a));
      add("flags", std::to_string(e.b), false);
      break;
    case slot_alloc_arena:
      add("bytes", std::to_string(e.b), false);
      add("ptr", hex(e.a));
      if (!e.text.empty()) add("site", e.text);
      break;
    case slot_free_arena: add("ptr", hex(e.a)); break;
#endif
    case slot_load_module: case slot_unload_module: case slot_load_module_file:
      add("module", e.text);
      if (e.slot == slot_load_module) add("image_bytes", std::to_string(e.b), false);
      break;
    case slot_get_function:
      add("kernel", e.text);
      add("handle", hex(e.a));
      break;
    case slot_launch: {
      const auto it = names.find(e.a);
      const std::string name = it != names.end() ? it->second : hex(e.a);
      add("kernel", name);
      add("grid", std::to_string(e.grid.x) + "x" + std::to_string(e.grid.y) + "x" +
                      std::to_string(e.grid.z));
      add("block", std::to_string(e.block.x) + "x" + std::to_string(e.block.y) + "x" +
                       std::to_string(e.block.z));
      add("shared_bytes", std::to_string(e.b), false);
      if (!e.arg_words.empty()) {
        std::string words = "[";
        for (std::size_t i = 0; i < e.arg_words.size(); ++i) {
          if (i != 0) words += ',';
          words += support::json_string(hex(e.arg_words[i]));
        }
        add("arg_words", words + "]", false);
      }
      break;
    }
    default: break;
  }
  if (e.on_stream) add("stream", e.stream == 0 ? std::string("default") : hex(e.stream));
  if (e.status != GPUPLUG_STATUS_SUCCESS)
    add("status", to_string(static_cast<Status>(e.status)));
  return out;
}

/// The title of an event in the viewer: the operation, and the kernel for a launch.
std::string title(const Event& e, const KernelNames& names) {
  std::string t = slot_names[e.slot];
  if (e.slot == slot_launch) {
    if (const auto it = names.find(e.a); it != names.end()) t += " " + it->second;
  }
  if (e.status != GPUPLUG_STATUS_SUCCESS) t += " (failed)";
  return t;
}

}  // namespace

std::string summary(const Recording& r) {
  std::string text = "trace summary";
  std::uint64_t calls = 0;
  for (const auto& [slot, s] : r.stats) calls += s.calls;
  text += ": " + std::to_string(calls) + " calls";
  for (const auto& [slot, s] : r.stats) {
    text += "\n  " + std::string(slot_names[slot]) + ": " + std::to_string(s.calls) + " calls";
    if (s.failures != 0) text += " (" + std::to_string(s.failures) + " failed)";
    text += ", total " + milliseconds(static_cast<double>(s.total_ns)) + ", p50 <= " +
            microseconds(s.histogram.percentile(s.calls, 0.5)) + ", p99 <= " +
            microseconds(s.histogram.percentile(s.calls, 0.99));
  }
  text += "\n  memory: " + support::describe_bytes(r.allocated_bytes) + " allocated, " +
          support::describe_bytes(r.freed_bytes) + " freed, " +
          support::describe_bytes(r.live_bytes) + " live";
  if (r.dropped != 0) {
    text += "\n  " + std::to_string(r.dropped) + " events dropped: the ring keeps the last " +
            std::to_string(r.capacity) + " (option trace_buffer)";
  }
  return text;
}

int open_trace_file(const std::string& requested, std::string& path) {
  if (!requested.empty()) {
    path = requested;
    return ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  }
  const std::string base = "gpuplug-trace-" + std::to_string(::getpid());
  for (int i = 0; i < 100; ++i) {
    path = base + (i == 0 ? std::string() : "." + std::to_string(i)) + ".json";
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

std::string trace_json(const Recording& r, const std::string& backend, const KernelNames& names) {
  const std::string pid = std::to_string(::getpid());
  std::string out = "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"backend\":" +
                    support::json_string(backend) +
                    ",\"dropped_events\":" + std::to_string(r.dropped) +
                    ",\"ring_capacity\":" + std::to_string(r.capacity) + "},\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& event) {
    if (!first) out += ",\n";
    first = false;
    out += event;
  };
  const auto us = [](std::int64_t ns) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1e3);
    return std::string(buf);
  };
  emit("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid +
       ",\"tid\":0,\"args\":{\"name\":" + support::json_string("gpuplug " + backend) + "}}");
  for (const auto& [id, number] : r.threads) {
    emit("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" +
         std::to_string(number) + ",\"args\":{\"name\":\"thread " + std::to_string(number) +
         "\"}}");
  }
  // A stream's track shows when work was queued on it (the call), not when the device ran it.
  std::map<std::uint64_t, std::uint64_t> stream_tracks;
  for (const std::uint64_t stream : r.streams) {
    const std::uint64_t tid = 1000000 + stream_tracks.size();
    stream_tracks[stream] = tid;
    emit("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" +
         std::to_string(tid) + ",\"args\":{\"name\":" +
         support::json_string(stream == 0 ? std::string("stream default (queued)")
                                          : "stream " + support::hex(stream) + " (queued)") +
         "}}");
  }
  const std::size_t n = r.ring.size();
  const std::size_t oldest = r.dropped == 0 ? 0 : r.next % r.capacity;
  for (std::size_t i = 0; i < n; ++i) {
    const Event& e = r.ring[(oldest + i) % n];
    const std::string common = "\"pid\":" + pid + ",\"ts\":" + us(e.start_ns) +
                               ",\"dur\":" + us(std::max<std::int64_t>(e.duration_ns, 1)) +
                               ",\"name\":" + support::json_string(title(e, names)) +
                               ",\"cat\":\"gpuplug\",\"args\":{" + describe_args(e, names) + "}";
    emit("{\"ph\":\"X\",\"tid\":" + std::to_string(e.thread) + "," + common + "}");
    if (e.on_stream) {
      emit("{\"ph\":\"X\",\"tid\":" + std::to_string(stream_tracks.at(e.stream)) + "," +
           common + "}");
    }
    const bool counted = (e.slot == slot_alloc || e.slot == slot_alloc_managed ||
                          e.slot == slot_free) && e.status == GPUPLUG_STATUS_SUCCESS;
    if (counted) {
      emit("{\"ph\":\"C\",\"name\":\"live bytes\",\"pid\":" + pid + ",\"tid\":0,\"ts\":" +
           us(e.start_ns + e.duration_ns) + ",\"args\":{\"live\":" +
           std::to_string(e.live_bytes) + "}}");
    }
  }
  out += "\n]}\n";
  return out;
}

}  // namespace gpuplug::detail::layers::trace
