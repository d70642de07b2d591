// SPDX-License-Identifier: Apache-2.0
// The `trace` layer's hooks: every call of one backend with its arguments, duration and status,
// recorded in a bounded ring, and handed to the writers (trace_writer.cpp) when the backend is
// destroyed: Chrome trace-event JSON, and a summary per operation logged at info level.
#include "layers/trace.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <gpuplug/kernel_args.h>
#include <gpuplug/support/escape.hpp>
#include <gpuplug/support/text.hpp>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "layers/layer_support.hpp"
#include "layers/trace_writer.hpp"

namespace gpuplug::detail::layers {

namespace {

using namespace trace;  // the recording's types and writers (trace_writer.hpp)

using Clock = std::chrono::steady_clock;

template <auto Slot>
constexpr SlotIndex slot_index() noexcept {
#define GPUPLUG_SLOT_INDEX(slot) \
  if constexpr (same_slot<Slot, &gpuplug_plugin_v1::slot>) return slot_##slot; else
  GPUPLUG_LAYERED_SLOTS(GPUPLUG_SLOT_INDEX)
#undef GPUPLUG_SLOT_INDEX
  return slot_count;
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
    rec_.capacity = capacity_;
    rec_.ring.reserve(std::min<std::size_t>(capacity_, 4096));
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
    } else if constexpr (same_slot<Slot, &P::copy_h2d_async> || same_slot<Slot, &P::copy_d2d_async> ||
                         same_slot<Slot, &P::copy_h2d_async_retained>) {
      e.a = arg(I0{});
      e.b = arg(I2{});
      e.stream = arg(I3{});
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::copy_d2h_async>) {
      e.a = arg(I1{});
      e.b = arg(I2{});
      e.stream = arg(I3{});
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::copy_h2d_2d_async> ||
                         same_slot<Slot, &P::copy_d2h_2d_async> ||
                         same_slot<Slot, &P::copy_d2d_2d_async>) {
      // The device side (the destination, or the source of d2h) and the bytes the rows hold.
      const std::tuple<A...> t(args...);
      if constexpr (same_slot<Slot, &P::copy_d2h_2d_async>) {
        e.a = std::get<2>(t);
      } else {
        e.a = std::get<0>(t);
      }
      e.b = std::get<4>(t) * std::get<5>(t);
      e.stream = std::get<6>(t);
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::copy_peer_async>) {
      e.a = arg(I0{});  // the destination; the source is another backend's
      e.b = std::get<3>(std::tuple<A...>(args...));
      e.stream = std::get<4>(std::tuple<A...>(args...));
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::host_alloc_pinned>) {
      e.b = arg(I0{});
      e.a = status == GPUPLUG_STATUS_SUCCESS ? reinterpret_cast<std::uintptr_t>(*arg(I1{})) : 0;
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
#if GPUPLUG_ABI_VERSION_MINOR >= 3
    } else if constexpr (same_slot<Slot, &P::stream_begin_capture>) {
      e.stream = arg(I0{});
      e.b = static_cast<std::uint64_t>(arg(I1{}));  // the capture mode
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::stream_end_capture>) {
      e.stream = arg(I0{});
      e.a = status == GPUPLUG_STATUS_SUCCESS ? *arg(I1{}) : 0;  // the graph
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::graph_launch>) {
      e.a = arg(I0{});
      e.stream = arg(I1{});
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::graph_destroy>) {
      e.a = arg(I0{});
    } else if constexpr (same_slot<Slot, &P::stream_abort_capture> ||
                         same_slot<Slot, &P::stream_is_capturing>) {
      e.stream = arg(I0{});
      e.on_stream = true;
    } else if constexpr (same_slot<Slot, &P::stream_create_with_flags>) {
      e.b = arg(I0{});  // the flags
      e.a = status == GPUPLUG_STATUS_SUCCESS ? *arg(I1{}) : 0;
    } else if constexpr (same_slot<Slot, &P::alloc_arena>) {
      // An arena is not in the ledger's live bytes, so not in the trace's either.
      e.b = arg(I0{});
      e.a = status == GPUPLUG_STATUS_SUCCESS ? *arg(I2{}) : 0;
      if (const char* site = arg(I1{}); site != nullptr) e.text = support::escape_text(site);
    } else if constexpr (same_slot<Slot, &P::free_arena>) {
      e.a = arg(I0{});
#endif
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
        std::vector<std::uint32_t> sizes = argument_sizes(arg(I0{}), arg(I1{}));
        std::lock_guard lock(names_mutex_);
        kernel_names_[e.a] = e.text;
        if (sizes.empty()) {
          kernel_args_.erase(e.a);
        } else {
          kernel_args_[e.a] = std::move(sizes);
        }
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
    } else if constexpr (same_slot<Slot, &P::native_pointer> ||
                         same_slot<Slot, &P::host_address>) {
      e.a = arg(I0{});
    } else if constexpr (same_slot<Slot, &P::alloc_host_mapped>) {
      // Host memory: its bytes are not the device's live bytes, so no note_alloc.
      e.b = arg(I0{});
      e.a = status == GPUPLUG_STATUS_SUCCESS ? *std::get<3>(std::tuple<A...>(args...)) : 0;
      if (const char* site = arg(I1{}); site != nullptr) e.text = support::escape_text(site);
    } else if constexpr (same_slot<Slot, &P::free_host_mapped> ||
                         same_slot<Slot, &P::host_ptr_to_device>) {
      e.b = reinterpret_cast<std::uintptr_t>(arg(I0{}));  // the host pointer
    } else if constexpr (same_slot<Slot, &P::launch>) {
      e.a = arg(I0{});
      e.grid = arg(I1{});
      e.block = arg(I2{});
      e.b = arg(I3{});  // shared bytes
      e.stream = std::get<4>(std::tuple<A...>(args...));
      e.on_stream = true;
      e.arg_words = argument_words(e.a, std::get<5>(std::tuple<A...>(args...)));
    }
  }

  /// The sizes `module`'s `<func>_args` publishes (read through the levels below, as the core
  /// reads them), or none: no such global, a size or version this layer does not know, more
  /// than GPUPLUG_KERNEL_ARGS_MAX arguments.
  std::vector<std::uint32_t> argument_sizes(const char* module, const char* func) const {
    const std::string symbol = std::string(func) + GPUPLUG_KERNEL_ARGS_SUFFIX;
    std::uint64_t address = 0, bytes = 0;
    if (call_next<&gpuplug_plugin_v1::get_global>(module, symbol.c_str(), &address, &bytes) !=
            GPUPLUG_STATUS_SUCCESS ||
        bytes < sizeof(gpuplug_kernel_args_t))
      return {};
    gpuplug_kernel_args_t published{};
    if (call_next<&gpuplug_plugin_v1::copy_d2h>(&published, address, sizeof published) != GPUPLUG_STATUS_SUCCESS ||
        published.version < 1 || published.count > GPUPLUG_KERNEL_ARGS_MAX)
      return {};
    return {published.sizes, published.sizes + published.count};
  }

  /// The first 8 bytes of each argument of a launch of `function`: the seed's launch trace, so
  /// that two steps' launches can be diffed. As many as the kernel's `<func>_args` names, which is
  /// what the kernel itself reads of `params`.
  std::vector<std::uint64_t> argument_words(std::uint64_t function, void** params) const {
    std::vector<std::uint64_t> words;
    if (params == nullptr) return words;
    std::lock_guard lock(names_mutex_);
    const auto it = kernel_args_.find(function);
    if (it == kernel_args_.end()) return words;
    words.reserve(it->second.size());
    for (std::size_t i = 0; i < it->second.size(); ++i) {
      std::uint64_t w = 0;
      if (params[i] != nullptr)
        std::memcpy(&w, params[i], std::min<std::size_t>(it->second[i], sizeof w));
      words.push_back(w);
    }
    return words;
  }

  /// Returns the live bytes after the allocation.
  std::uint64_t note_alloc(std::uint64_t ptr, std::uint64_t bytes) {
    std::lock_guard lock(mutex_);
    live_[ptr] = bytes;
    rec_.live_bytes += bytes;
    rec_.allocated_bytes += bytes;
    return rec_.live_bytes;
  }
  /// Returns the bytes freed; `live` gets the live bytes after.
  std::uint64_t note_free(std::uint64_t ptr, std::uint64_t& live) {
    std::lock_guard lock(mutex_);
    const auto it = live_.find(ptr);
    live = rec_.live_bytes;
    if (it == live_.end()) return 0;
    const std::uint64_t bytes = it->second;
    live_.erase(it);
    rec_.live_bytes -= bytes;
    rec_.freed_bytes += bytes;
    live = rec_.live_bytes;
    return bytes;
  }

  void record(Event e) {
    std::lock_guard lock(mutex_);
    // A small, stable number for the calling thread (1, 2, ...), for its track in the file.
    e.thread =
        rec_.threads.try_emplace(std::this_thread::get_id(), rec_.threads.size() + 1).first->second;
    OperationStats& s = rec_.stats[e.slot];
    ++s.calls;
    s.failures += e.status != GPUPLUG_STATUS_SUCCESS;
    s.total_ns += e.duration_ns;
    s.histogram.add(e.duration_ns);
    if (e.on_stream) rec_.streams.insert(e.stream);
    // The ring keeps the last `capacity_` events; the counters above cover every call.
    if (rec_.ring.size() < capacity_) {
      rec_.ring.push_back(std::move(e));
    } else {
      rec_.ring[rec_.next % capacity_] = std::move(e);
      ++rec_.dropped;
    }
    ++rec_.next;
  }

  void summarize() {
    std::string text;
    {
      std::lock_guard lock(mutex_);
      text = summary(rec_);
    }
    log(GPUPLUG_LOG_INFO, text);
  }

  void write_file() noexcept {
    try {
      std::lock_guard lock(mutex_);
      std::string path;
      const int fd = open_trace_file(file_, path);
      if (fd < 0) {
        log(GPUPLUG_LOG_ERROR, "trace: cannot write '" + support::escape_text(path) + "': " +
                                   support::errno_text(errno));
        return;
      }
      std::string text;
      {
        std::lock_guard names_lock(names_mutex_);
        text = trace_json(rec_, backend(), kernel_names_);
      }
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
      const std::uint64_t dropped = rec_.dropped;
      log(GPUPLUG_LOG_INFO, "trace: wrote " + std::to_string(rec_.ring.size()) + " calls to '" +
                                support::escape_text(path) + "'" +
                                (dropped ? " (" + std::to_string(dropped) + " dropped)" : ""));
    } catch (const std::exception& e) {
      log(GPUPLUG_LOG_ERROR, std::string("trace: not written: ") + e.what());
    }
  }

  const std::size_t capacity_;
  const Clock::time_point origin_;
  std::string file_;  // empty: the default name

  // Lock order: mutex_ before names_mutex_ (write_file holds both).
  mutable std::mutex mutex_;  // the recording and the live map
  Recording rec_;
  std::unordered_map<std::uint64_t, std::uint64_t> live_;  // pointer -> bytes

  mutable std::mutex names_mutex_;
  KernelNames kernel_names_;  // handle -> module::function
  // handle -> the argument sizes its `<func>_args` publishes; guarded by names_mutex_
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> kernel_args_;
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
