// SPDX-License-Identifier: Apache-2.0
// What the trace layer records (one Event per call, counters per operation) and the writers that
// turn a recording into text: the Chrome trace-event JSON file and the summary logged at info.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <gpuplug/layer.h>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "layers/slots.hpp"

namespace gpuplug::detail::layers::trace {

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
  // launch: the first 8 bytes of each argument (little-endian, zero-padded), as many as the
  // kernel's `<func>_args` names; empty when its module publishes none.
  std::vector<std::uint64_t> arg_words;
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

/// Everything one trace layer recorded, as the writers read it.
struct Recording {
  std::size_t capacity = 0;    // the ring's size (option trace_buffer)
  std::vector<Event> ring;     // the last `capacity` events, oldest at next % capacity once full
  std::uint64_t next = 0;      // events recorded
  std::uint64_t dropped = 0;   // events overwritten in the ring
  std::map<SlotIndex, OperationStats> stats;          // every call, dropped or not
  std::map<std::thread::id, std::uint64_t> threads;   // calling thread -> its track number
  std::set<std::uint64_t> streams;                    // streams the calls named
  std::uint64_t live_bytes = 0, allocated_bytes = 0, freed_bytes = 0;
};

/// Kernel handle -> "module::function" (escaped), for launches.
using KernelNames = std::unordered_map<std::uint64_t, std::string>;

/// The summary logged when the layer goes: calls, failures, total, p50 and p99 per operation,
/// memory, dropped events.
std::string summary(const Recording& r);

/// The trace file's text (Chrome trace-event JSON) for backend `backend`: a track per thread,
/// a track per stream (when work was queued, not when it ran), live-bytes counters.
std::string trace_json(const Recording& r, const std::string& backend, const KernelNames& names);

/// Opens the trace file for writing: `requested` as given (replaced, never through a link), else
/// gpuplug-trace-<pid>.json in the working directory, or -<pid>.1.json, .2, ... when another
/// backend of this process already wrote that one (created exclusively, never replaced). `path`
/// gets the name tried last; returns the descriptor, or -1 with errno set.
int open_trace_file(const std::string& requested, std::string& path);

}  // namespace gpuplug::detail::layers::trace
