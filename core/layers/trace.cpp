// SPDX-License-Identifier: Apache-2.0
// The `trace` layer: every call of one backend with its arguments, duration and status, in a
// bounded ring, written as Chrome trace-event JSON when the backend is destroyed, and a summary
// per operation logged at info level.
#include "trace.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <gpuplug/support/escape.hpp>
#include <gpuplug/support/text.hpp>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "layer_support.hpp"

namespace gpuplug::detail::layers {

namespace {

using Clock = std::chrono::steady_clock;

// The layered slots by index, for the per-operation counters and the names in the file.
enum SlotIndex : std::uint8_t {
#define GPUPLUG_SLOT_ENUM(slot) slot_##slot,
  GPUPLUG_LAYERED_SLOTS(GPUPLUG_SLOT_ENUM)
#undef GPUPLUG_SLOT_ENUM
      slot_count
};
constexpr std::array<const char*, slot_count> slot_names{
#define GPUPLUG_SLOT_STRING(slot) #slot,
    GPUPLUG_LAYERED_SLOTS(GPUPLUG_SLOT_STRING)
#undef GPUPLUG_SLOT_STRING
};
template <auto Slot>
constexpr SlotIndex slot_index() noexcept {
#define GPUPLUG_SLOT_INDEX(slot) \
  if constexpr (same_slot<Slot, &gpuplug_plugin_v1::slot>) return slot_##slot; else
  GPUPLUG_LAYERED_SLOTS(GPUPLUG_SLOT_INDEX)
#undef GPUPLUG_SLOT_INDEX
  return slot_count;
}

/// One call as recorded on the hot path: raw values only, formatted when the file is written.
struct Event {
  std::int64_t start_ns = 0;  // since the layer was created
  std::int64_t duration_ns = 0;
  std::uint64_t thread = 0;  // a small number per thread, in order of first call
  std::uint64_t stream = 0;  // the stream argument, when the slot has one
  std::uint64_t a = 0, b = 0;  // slot-specific: pointer, bytes, handle (see describe_args)
  gpuplug_dim3_t grid{}, block{};
  std::int32_t status = 0;
  SlotIndex slot = slot_count;
  bool on_stream = false;
  std::uint64_t live_bytes = 0;  // alloc and free: the layer's live bytes after the call
  std::string text;  // module or module::function names, for the slots that take them
};

/// Log-scale histogram of durations (4 buckets per power of two): p50/p99 within about 19%.
struct Histogram {
  static constexpr int buckets = 4 * 48;
  std::array<std::uint64_t, buckets> counts{};
  static int bucket(std::int64_t ns) noexcept {
    const auto v = static_cast<std::uint64_t>(std::max<std::int64_t>(ns, 1));
    const int log2 = std::bit_width(v) - 1;
    const int quarter = log2 >= 2 ? static_cast<int>((v >> (log2 - 2)) & 3) : 0;
    return std::min(buckets - 1, log2 * 4 + quarter);
  }
  static double upper_ns(int b) noexcept {
    const int log2 = b / 4;
    const int quarter = b % 4;
    return static_cast<double>(1ULL << log2) * (1.0 + (quarter + 1) / 4.0);
  }
  void add(std::int64_t ns) noexcept { ++counts[static_cast<std::size_t>(bucket(ns))]; }
  double percentile(std::uint64_t total, double p) const noexcept {
    const auto want = static_cast<std::uint64_t>(static_cast<double>(total) * p);
    std::uint64_t seen = 0;
    for (int b = 0; b < buckets; ++b) {
      seen += counts[static_cast<std::size_t>(b)];
      if (seen > want) return upper_ns(b);
    }
    return upper_ns(buckets - 1);
  }
};

struct OperationStats {
  std::uint64_t calls = 0;
  std::uint64_t failures = 0;
  std::int64_t total_ns = 0;
  Histogram histogram;
};

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

/// Parses a positive count option ("trace_buffer"), refusing anything else by name.
std::size_t parse_count(const Options& options, const std::string& key, std::size_t fallback,
                        std::size_t max) {
  const auto it = options.find(key);
  if (it == options.end()) return fallback;
  std::size_t v = 0;
  const std::string& text = it->second;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v == 0 || v > max) {
    throw std::invalid_argument("option " + key + "='" + support::escape_text(text) +
                                "': expected a count from 1 to " + std::to_string(max));
  }
  return v;
}

class Trace final : public LayerBase {
 public:
  static constexpr std::size_t default_capacity = 1u << 18;  // events; about 40 MiB at most
  static constexpr std::size_t max_capacity = 1u << 24;

  Trace(const gpuplug_layer_next_t& next, const gpuplug_layer_services_t& services,
        std::string backend, const Options& options)
      : LayerBase(next, services, std::move(backend)),
        capacity_(parse_count(options, "trace_buffer", default_capacity, max_capacity)),
        origin_(Clock::now()) {
    if (auto it = options.find("trace_file"); it != options.end()) {
      if (it->second.empty()) throw std::invalid_argument("option trace_file='': expected a file name");
      file_ = it->second;
    }
    ring_.reserve(std::min<std::size_t>(capacity_, 4096));
  }

  ~Trace() {
    summarize();
    write_file();
  }

  template <auto Slot, class... A>
  auto on(A... args) {
    const auto start = Clock::now();
    const auto status = call_next<Slot>(args...);
    const auto end = Clock::now();
    if constexpr (std::is_same_v<std::remove_cv_t<decltype(status)>, gpuplug_status_t>) {
      Event e;
      e.slot = slot_index<Slot>();
      e.start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(start - origin_).count();
      e.duration_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
      e.status = status;
      describe<Slot>(e, status, args...);
      record(std::move(e));
    }
    return status;
  }

 private:
  /// Fills the slot-specific fields of `e` from the call's arguments (and results).
  template <auto Slot, class... A>
  void describe(Event& e, gpuplug_status_t status, A... args) {
    const auto arg = [&](auto index) { return std::get<index()>(std::tuple<A...>(args...)); };
    using P = gpuplug_plugin_v1;
    using I0 = std::integral_constant<std::size_t, 0>;
    using I1 = std::integral_constant<std::size_t, 1>;
    using I2 = std::integral_constant<std::size_t, 2>;
    using I3 = std::integral_constant<std::size_t, 3>;
    if constexpr (same_slot<Slot, &P::alloc> || same_slot<Slot, &P::alloc_managed>) {
      e.b = arg(I0{});
      e.a = status == GPUPLUG_STATUS_SUCCESS ? *arg(I2{}) : 0;
      if (const char* site = arg(I1{}); site != nullptr) e.text = support::escape_text(site);
      if (status == GPUPLUG_STATUS_SUCCESS) e.live_bytes = note_alloc(e.a, e.b);
    } else if constexpr (same_slot<Slot, &P::free>) {
      e.a = arg(I0{});
      if (status == GPUPLUG_STATUS_SUCCESS) e.b = note_free(e.a, e.live_bytes);
    } else if constexpr (same_slot<Slot, &P::copy_h2d> || same_slot<Slot, &P::copy_d2d>) {
      e.a = arg(I0{});
      e.b = arg(I2{});
    } else if constexpr (same_slot<Slot, &P::copy_d2h>) {
      e.a = arg(I1{});
      e.b = arg(I2{});
    } else if constexpr (same_slot<Slot, &P::copy_h2d_async> || same_slot<Slot, &P::copy_d2d_async>) {
      e.a = arg(I0{});
      e.b = arg(I2{});
      e.stream = arg(I3{});
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::copy_d2h_async>) {
      e.a = arg(I1{});
      e.b = arg(I2{});
      e.stream = arg(I3{});
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::memset_d8>) {
      e.a = arg(I0{});
      e.b = arg(I2{});
      e.stream = std::get<3>(std::tuple<A...>(args...));
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::stream_create> || same_slot<Slot, &P::event_create>) {
      e.a = status == GPUPLUG_STATUS_SUCCESS ? *arg(I0{}) : 0;
    } else if constexpr (same_slot<Slot, &P::stream_destroy> ||
                         same_slot<Slot, &P::stream_synchronize>) {
      e.stream = arg(I0{});
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::event_record>) {
      e.a = arg(I0{});
      e.stream = arg(I1{});
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::stream_wait_event>) {
      e.stream = arg(I0{});
      e.a = arg(I1{});
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::load_module> ||
                         same_slot<Slot, &P::unload_module> ||
                         same_slot<Slot, &P::load_module_file>) {
      if (const char* name = arg(I0{}); name != nullptr) e.text = support::escape_text(name);
      if constexpr (same_slot<Slot, &P::load_module>) e.b = arg(I2{});
    } else if constexpr (same_slot<Slot, &P::get_function>) {
      const std::string name = std::string(arg(I0{})) + "::" + arg(I1{});
      e.text = support::escape_text(name);
      if (status == GPUPLUG_STATUS_SUCCESS) {
        e.a = *arg(I2{});
        std::lock_guard lock(names_mutex_);
        kernel_names_[e.a] = e.text;
      }
    } else if constexpr (same_slot<Slot, &P::import_memory>) {
      // An imported range is live like an allocation (free forgets it); its bytes count.
      e.b = arg(I1{});
      e.a = status == GPUPLUG_STATUS_SUCCESS ? *arg(I3{}) : 0;
      if (const char* site = arg(I2{}); site != nullptr) e.text = support::escape_text(site);
      if (status == GPUPLUG_STATUS_SUCCESS) e.live_bytes = note_alloc(e.a, e.b);
    } else if constexpr (same_slot<Slot, &P::import_stream>) {
      e.a = status == GPUPLUG_STATUS_SUCCESS ? *arg(I1{}) : 0;
      e.b = reinterpret_cast<std::uintptr_t>(arg(I0{}));  // the native stream
    } else if constexpr (same_slot<Slot, &P::native_handles>) {
      e.stream = arg(I0{});
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::native_pointer>) {
      e.a = arg(I0{});
    } else if constexpr (same_slot<Slot, &P::launch>) {
      e.a = arg(I0{});
      e.grid = arg(I1{});
      e.block = arg(I2{});
      e.b = arg(I3{});  // shared bytes
      e.stream = std::get<4>(std::tuple<A...>(args...));
      e.on_stream = true;
    }
  }

  /// Returns the live bytes after the allocation.
  std::uint64_t note_alloc(std::uint64_t ptr, std::uint64_t bytes) {
    std::lock_guard lock(mutex_);
    live_[ptr] = bytes;
    live_bytes_ += bytes;
    allocated_bytes_ += bytes;
    return live_bytes_;
  }
  /// Returns the bytes freed; `live` gets the live bytes after.
  std::uint64_t note_free(std::uint64_t ptr, std::uint64_t& live) {
    std::lock_guard lock(mutex_);
    const auto it = live_.find(ptr);
    live = live_bytes_;
    if (it == live_.end()) return 0;
    const std::uint64_t bytes = it->second;
    live_.erase(it);
    live_bytes_ -= bytes;
    freed_bytes_ += bytes;
    live = live_bytes_;
    return bytes;
  }

  void record(Event e) {
    std::lock_guard lock(mutex_);
    // A small, stable number for the calling thread (1, 2, ...), for its track in the file.
    e.thread = threads_.try_emplace(std::this_thread::get_id(), threads_.size() + 1).first->second;
    OperationStats& s = stats_[e.slot];
    ++s.calls;
    s.failures += e.status != GPUPLUG_STATUS_SUCCESS;
    s.total_ns += e.duration_ns;
    s.histogram.add(e.duration_ns);
    if (e.on_stream) streams_.insert(e.stream);
    // The ring keeps the last `capacity_` events; the counters above cover every call.
    if (ring_.size() < capacity_) {
      ring_.push_back(std::move(e));
    } else {
      ring_[next_ % capacity_] = std::move(e);
      ++dropped_;
    }
    ++next_;
  }

  std::string describe_args(const Event& e) const {
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
      case slot_native_pointer: add("device_ptr", hex(e.a)); break;
      case slot_event_create: case slot_event_record: case slot_stream_wait_event:
        add("event", hex(e.a));
        break;
      case slot_load_module: case slot_unload_module: case slot_load_module_file:
        add("module", e.text);
        if (e.slot == slot_load_module) add("image_bytes", std::to_string(e.b), false);
        break;
      case slot_get_function:
        add("kernel", e.text);
        add("handle", hex(e.a));
        break;
      case slot_launch: {
        std::string name;
        {
          std::lock_guard lock(names_mutex_);
          const auto it = kernel_names_.find(e.a);
          name = it != kernel_names_.end() ? it->second : hex(e.a);
        }
        add("kernel", name);
        add("grid", std::to_string(e.grid.x) + "x" + std::to_string(e.grid.y) + "x" +
                        std::to_string(e.grid.z));
        add("block", std::to_string(e.block.x) + "x" + std::to_string(e.block.y) + "x" +
                         std::to_string(e.block.z));
        add("shared_bytes", std::to_string(e.b), false);
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
  std::string title(const Event& e) const {
    std::string t = slot_names[e.slot];
    if (e.slot == slot_launch) {
      std::lock_guard lock(names_mutex_);
      if (const auto it = kernel_names_.find(e.a); it != kernel_names_.end()) t += " " + it->second;
    }
    if (e.status != GPUPLUG_STATUS_SUCCESS) t += " (failed)";
    return t;
  }

  void summarize() {
    std::string text = "trace summary";
    std::uint64_t calls = 0;
    for (const auto& [slot, s] : stats_) calls += s.calls;
    text += ": " + std::to_string(calls) + " calls";
    for (const auto& [slot, s] : stats_) {
      text += "\n  " + std::string(slot_names[slot]) + ": " + std::to_string(s.calls) + " calls";
      if (s.failures != 0) text += " (" + std::to_string(s.failures) + " failed)";
      text += ", total " + milliseconds(static_cast<double>(s.total_ns)) + ", p50 <= " +
              microseconds(s.histogram.percentile(s.calls, 0.5)) + ", p99 <= " +
              microseconds(s.histogram.percentile(s.calls, 0.99));
    }
    text += "\n  memory: " + support::describe_bytes(allocated_bytes_) + " allocated, " +
            support::describe_bytes(freed_bytes_) + " freed, " +
            support::describe_bytes(live_bytes_) + " live";
    if (dropped_ != 0) {
      text += "\n  " + std::to_string(dropped_) + " events dropped: the ring keeps the last " +
              std::to_string(capacity_) + " (option trace_buffer)";
    }
    log(GPUPLUG_LOG_INFO, text);
  }

  /// Opens the trace file: `trace_file` as given (replaced), else gpuplug-trace-<pid>.json in
  /// the working directory, or -<pid>.1.json, .2, ... when another backend of this process
  /// already wrote that one (created exclusively, never replaced).
  int open_file(std::string& path) const {
    if (!file_.empty()) {
      path = file_;
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

  std::string json() const {
    const std::string pid = std::to_string(::getpid());
    std::string out = "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"backend\":" +
                      support::json_string(backend()) +
                      ",\"dropped_events\":" + std::to_string(dropped_) +
                      ",\"ring_capacity\":" + std::to_string(capacity_) + "},\"traceEvents\":[\n";
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
         ",\"tid\":0,\"args\":{\"name\":" + support::json_string("gpuplug " + backend()) + "}}");
    for (const auto& [id, number] : threads_) {
      emit("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" +
           std::to_string(number) + ",\"args\":{\"name\":\"thread " + std::to_string(number) +
           "\"}}");
    }
    // A stream's track shows when work was queued on it (the call), not when the device ran it.
    std::map<std::uint64_t, std::uint64_t> stream_tracks;
    for (const std::uint64_t stream : streams_) {
      const std::uint64_t tid = 1000000 + stream_tracks.size();
      stream_tracks[stream] = tid;
      emit("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" +
           std::to_string(tid) + ",\"args\":{\"name\":" +
           support::json_string(stream == 0 ? std::string("stream default (queued)")
                                            : "stream " + support::hex(stream) + " (queued)") +
           "}}");
    }
    const std::size_t n = ring_.size();
    const std::size_t oldest = dropped_ == 0 ? 0 : next_ % capacity_;
    for (std::size_t i = 0; i < n; ++i) {
      const Event& e = ring_[(oldest + i) % n];
      const std::string common = "\"pid\":" + pid + ",\"ts\":" + us(e.start_ns) +
                                 ",\"dur\":" + us(std::max<std::int64_t>(e.duration_ns, 1)) +
                                 ",\"name\":" + support::json_string(title(e)) +
                                 ",\"cat\":\"gpuplug\",\"args\":{" + describe_args(e) + "}";
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

  void write_file() noexcept {
    try {
      std::lock_guard lock(mutex_);
      std::string path;
      const int fd = open_file(path);
      if (fd < 0) {
        log(GPUPLUG_LOG_ERROR, "trace: cannot write '" + support::escape_text(path) + "': " +
                                   support::errno_text(errno));
        return;
      }
      const std::string text = json();
      std::size_t written = 0;
      while (written < text.size()) {
        const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        written += static_cast<std::size_t>(n);
      }
      const int close_errno = ::close(fd) == 0 ? 0 : errno;
      if (written != text.size() || close_errno != 0) {
        log(GPUPLUG_LOG_ERROR, "trace: writing '" + support::escape_text(path) + "' failed: " +
                                   support::errno_text(close_errno ? close_errno : errno));
        return;
      }
      log(GPUPLUG_LOG_INFO, "trace: wrote " + std::to_string(ring_.size()) + " calls to '" +
                                support::escape_text(path) + "'" +
                                (dropped_ ? " (" + std::to_string(dropped_) + " dropped)" : ""));
    } catch (const std::exception& e) {
      log(GPUPLUG_LOG_ERROR, std::string("trace: not written: ") + e.what());
    }
  }

  const std::size_t capacity_;
  const Clock::time_point origin_;
  std::string file_;  // empty: the default name

  mutable std::mutex mutex_;  // everything below but the kernel names
  std::vector<Event> ring_;
  std::uint64_t next_ = 0;     // events recorded
  std::uint64_t dropped_ = 0;  // events overwritten in the ring
  std::map<SlotIndex, OperationStats> stats_;
  std::map<std::thread::id, std::uint64_t> threads_;
  std::set<std::uint64_t> streams_;
  std::unordered_map<std::uint64_t, std::uint64_t> live_;  // pointer -> bytes
  std::uint64_t live_bytes_ = 0, allocated_bytes_ = 0, freed_bytes_ = 0;

  mutable std::mutex names_mutex_;
  std::unordered_map<std::uint64_t, std::string> kernel_names_;  // handle -> module::function
};

gpuplug_plugin_v1 trace_table() noexcept {
  gpuplug_plugin_v1 t{};
  t.struct_size = sizeof t;
  t.abi_version = GPUPLUG_ABI_VERSION;
  intercept_every_slot<Trace>(t);
  t.destroy = &destroy_layer<Trace>;
  return t;
}

const char* const trace_keys[] = {"trace_file", "trace_buffer", nullptr};

}  // namespace

const gpuplug_layer_v1& trace_layer() noexcept {
  static const gpuplug_plugin_v1 table = trace_table();
  static const gpuplug_layer_v1 layer{
      sizeof(gpuplug_layer_v1), GPUPLUG_LAYER_VERSION, "trace",
      "every call with its arguments, duration and status, as Chrome trace-event JSON",
      trace_keys, &create_layer<Trace>, &table};
  return layer;
}

}  // namespace gpuplug::detail::layers
