// SPDX-License-Identifier: Apache-2.0
// The graph checks test_cuda_graphs and test_hip_fake_runtime share (ABI 1.3): a GPU plugin's
// capture slots over a fake driver that records captures and replays them.
#pragma once

// Each function is the body of one test case. The vendor's test passes what differs: the words
// its driver uses for the capture errors, the entry point a driver without graphs lacks, and the
// fake's counters (replays run, live graph objects).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "plugin_table_harness.hpp"

namespace gpuplug::test {

struct GraphVendor {
  const char* unsupported_error;  // the driver's name of error 900
  const char* invalidated_error;  // ... and of 901
  std::function<long long()> replays;  // graph launches the fake ran
  std::function<long long()> live_graphs;  // graph objects (captured and instantiated) alive
};

/// A created stream of `dev`, destroyed at the end of the scope (a capture aborted first).
class CaptureStream {
 public:
  explicit CaptureStream(const Instance& dev) : dev_(dev) {
    dev_.ok(dev_.t.stream_create(dev_.inst, &s_), "stream_create");
  }
  CaptureStream(const Instance& dev, std::uint32_t flags) : dev_(dev) {
    dev_.ok(dev_.t.stream_create_with_flags(dev_.inst, flags, &s_), "stream_create_with_flags");
  }
  ~CaptureStream() {
    dev_.t.stream_abort_capture(dev_.inst, s_);
    dev_.t.stream_destroy(dev_.inst, s_);
  }
  CaptureStream(const CaptureStream&) = delete;
  CaptureStream& operator=(const CaptureStream&) = delete;
  std::uint64_t get() const noexcept { return s_; }

 private:
  const Instance& dev_;
  std::uint64_t s_ = 0;
};

inline bool capturing(const Instance& dev, std::uint64_t stream) {
  std::int32_t c = -1;
  dev.ok(dev.t.stream_is_capturing(dev.inst, stream, &c), "stream_is_capturing");
  return c != 0;
}

/// A synchronize during a capture is the driver's 900, a later operation on the poisoned stream
/// its 901: both CAPTURE_INVALIDATED with the driver's name and the stream; the stream still
/// captures; abort (of the invalidated capture) ends it with no graph left behind, and the stream
/// runs work again.
inline void check_synchronize_invalidates_and_abort_recovers(const GraphVendor& v) {
  Instance dev;
  CaptureStream s(dev);
  constexpr std::uint64_t bytes = 256;
  const std::uint64_t y = dev.alloc(bytes);
  const long long graphs_before = v.live_graphs();
  dev.ok(dev.t.stream_begin_capture(dev.inst, s.get(), GPUPLUG_CAPTURE_MODE_RELAXED), "begin");
  dev.ok(dev.t.memset_d8(dev.inst, y, 1, bytes, s.get()), "memset (recorded)");
  std::string e = dev.expect(dev.t.stream_synchronize(dev.inst, s.get()),
                             GPUPLUG_STATUS_CAPTURE_INVALIDATED, "stream_synchronize");
  BOOST_TEST(contains(e, v.unsupported_error), e);
  BOOST_TEST(contains(e, "stream " + std::to_string(s.get())), e);
  BOOST_TEST(capturing(dev, s.get()));
  e = dev.expect(dev.t.memset_d8(dev.inst, y, 2, bytes, s.get()),
                 GPUPLUG_STATUS_CAPTURE_INVALIDATED, "memset on the poisoned stream");
  BOOST_TEST(contains(e, v.invalidated_error), e);
  dev.ok(dev.t.stream_abort_capture(dev.inst, s.get()), "abort of the invalidated capture");
  BOOST_TEST(!capturing(dev, s.get()));
  BOOST_TEST(v.live_graphs() == graphs_before);
  dev.ok(dev.t.stream_abort_capture(dev.inst, s.get()), "abort with nothing captured");
  dev.ok(dev.t.memset_d8(dev.inst, y, 0x3C, bytes, s.get()), "memset after the abort");
  std::vector<std::uint8_t> out(bytes, 0);
  dev.ok(dev.t.copy_d2h_async(dev.inst, out.data(), y, bytes, s.get()), "copy_d2h_async");
  dev.ok(dev.t.stream_synchronize(dev.inst, s.get()), "stream_synchronize after the abort");
  BOOST_TEST(out == std::vector<std::uint8_t>(bytes, 0x3C));
  // A poisoned capture cannot be ended into a graph: 901, and the stream leaves the capture.
  dev.ok(dev.t.stream_begin_capture(dev.inst, s.get(), GPUPLUG_CAPTURE_MODE_RELAXED), "begin");
  dev.expect(dev.t.synchronize(dev.inst), GPUPLUG_STATUS_CAPTURE_INVALIDATED, "synchronize");
  std::uint64_t g = 1;
  e = dev.expect(dev.t.stream_end_capture(dev.inst, s.get(), &g),
                 GPUPLUG_STATUS_CAPTURE_INVALIDATED, "end of a poisoned capture");
  BOOST_TEST(contains(e, v.invalidated_error), e);
  BOOST_TEST(g == 0u);
  BOOST_TEST(!capturing(dev, s.get()));
  BOOST_TEST(v.live_graphs() == graphs_before);
  dev.ok(dev.t.free(dev.inst, y), "free");
}

/// Work on the default stream during a capture: the driver refuses it, invalidating the capture,
/// when the capturing stream is blocking (stream_create, or the flags GPUPLUG_STREAM_BLOCKING),
/// and runs it when the stream is non-blocking (the plugin passed the flag on to the driver).
inline void check_default_stream_work_follows_stream_flags() {
  Instance dev;
  constexpr std::uint64_t bytes = 256;
  const std::uint64_t y = dev.alloc(bytes);
  const std::uint64_t z = dev.alloc(bytes);
  for (const bool blocking : {true, false}) {
    CaptureStream s(dev, blocking ? GPUPLUG_STREAM_BLOCKING : GPUPLUG_STREAM_NON_BLOCKING);
    dev.ok(dev.t.stream_begin_capture(dev.inst, s.get(), GPUPLUG_CAPTURE_MODE_RELAXED), "begin");
    dev.ok(dev.t.memset_d8(dev.inst, y, 1, bytes, s.get()), "memset (recorded)");
    const gpuplug_status_t st = dev.t.memset_d8(dev.inst, z, 0x3C, bytes, 0);
    if (blocking) {
      BOOST_TEST(st == GPUPLUG_STATUS_CAPTURE_INVALIDATED, "default-stream memset: " << st);
      dev.expect(dev.t.memset_d8(dev.inst, y, 2, bytes, s.get()),
                 GPUPLUG_STATUS_CAPTURE_INVALIDATED, "memset on the invalidated capture");
      dev.ok(dev.t.stream_abort_capture(dev.inst, s.get()), "abort");
      continue;
    }
    dev.ok(st, "default-stream memset beside a non-blocking capture");
    std::vector<std::uint8_t> out(bytes, 0);
    dev.ok(dev.t.copy_d2h(dev.inst, out.data(), z, bytes), "copy_d2h");
    BOOST_TEST(out == std::vector<std::uint8_t>(bytes, 0x3C));
    std::uint64_t g = 0;
    dev.ok(dev.t.stream_end_capture(dev.inst, s.get(), &g), "end of the valid capture");
    dev.ok(dev.t.graph_launch(dev.inst, g, s.get()), "graph_launch");
    dev.ok(dev.t.stream_synchronize(dev.inst, s.get()), "stream_synchronize");
    dev.ok(dev.t.copy_d2h(dev.inst, out.data(), y, bytes), "copy_d2h");
    BOOST_TEST(out == std::vector<std::uint8_t>(bytes, 1));
    dev.ok(dev.t.graph_destroy(dev.inst, g), "graph_destroy");
  }
  dev.ok(dev.t.free(dev.inst, y), "free");
  dev.ok(dev.t.free(dev.inst, z), "free");
}

/// A capture of a memset, an upload from a temporary overwritten right after, and a download
/// replays `rounds` times: the fake counts each replay, the upload brings what the temporary held
/// at capture (the plugin staged it), and once the graph is destroyed no graph object is left.
inline void check_replays_are_counted_and_uploads_staged(const GraphVendor& v) {
  Instance dev;
  CaptureStream s(dev);
  constexpr std::uint64_t bytes = 512;
  const std::uint64_t x = dev.alloc(bytes);
  std::vector<std::uint8_t> temporary(bytes), out(bytes, 0);
  for (std::size_t i = 0; i < bytes; ++i) temporary[i] = static_cast<std::uint8_t>(i * 7 + 1);
  const std::vector<std::uint8_t> expected = temporary;
  const long long graphs_before = v.live_graphs();
  dev.ok(dev.t.stream_begin_capture(dev.inst, s.get(), GPUPLUG_CAPTURE_MODE_GLOBAL), "begin");
  BOOST_TEST(capturing(dev, s.get()));
  dev.ok(dev.t.memset_d8(dev.inst, x, 0, bytes, s.get()), "memset (recorded)");
  dev.ok(dev.t.copy_h2d_async(dev.inst, x, temporary.data(), bytes, s.get()), "upload (recorded)");
  dev.ok(dev.t.copy_d2h_async(dev.inst, out.data(), x, bytes, s.get()), "download (recorded)");
  std::fill(temporary.begin(), temporary.end(), 0xEE);  // a replay must not see this
  BOOST_TEST(out == std::vector<std::uint8_t>(bytes, 0));  // nothing ran
  std::uint64_t g = 0;
  dev.ok(dev.t.stream_end_capture(dev.inst, s.get(), &g), "end_capture");
  BOOST_TEST(g != 0u);
  BOOST_TEST(!capturing(dev, s.get()));
  const long long before = v.replays();
  for (int round = 0; round < 3; ++round) {
    std::fill(out.begin(), out.end(), 0);
    dev.ok(dev.t.graph_launch(dev.inst, g, s.get()), "graph_launch");
    dev.ok(dev.t.stream_synchronize(dev.inst, s.get()), "stream_synchronize");
    BOOST_TEST(out == expected, "round " << round);
  }
  BOOST_TEST(v.replays() - before == 3);
  dev.ok(dev.t.graph_destroy(dev.inst, g), "graph_destroy");
  BOOST_TEST(v.live_graphs() == graphs_before);
  dev.expect(dev.t.graph_launch(dev.inst, g, s.get()), GPUPLUG_STATUS_INVALID_ARGUMENT,
             "graph_launch of a destroyed graph");
  BOOST_TEST(v.replays() - before == 3);
  dev.ok(dev.t.synchronize(dev.inst), "synchronize");
  dev.ok(dev.t.free(dev.inst, x), "free");
}

/// A GLOBAL capture refuses an allocation from any thread (the driver's 900): the capture is
/// invalidated, ending it is 901, and the allocation then succeeds.
inline void check_global_capture_refuses_alloc(const GraphVendor& v) {
  Instance dev;
  CaptureStream s(dev);
  dev.ok(dev.t.stream_begin_capture(dev.inst, s.get(), GPUPLUG_CAPTURE_MODE_GLOBAL), "begin");
  std::uint64_t p = 0;
  const std::string e = dev.expect(dev.t.alloc(dev.inst, 64, "test", &p),
                                   GPUPLUG_STATUS_CAPTURE_INVALIDATED, "alloc in a global capture");
  BOOST_TEST(contains(e, v.unsupported_error), e);
  std::uint64_t g = 0;
  dev.expect(dev.t.stream_end_capture(dev.inst, s.get(), &g), GPUPLUG_STATUS_CAPTURE_INVALIDATED,
             "end of the invalidated capture");
  p = dev.alloc(64);
  dev.ok(dev.t.free(dev.inst, p), "free");
}

/// A driver without the graph entry points: the plugin loads and works, begin_capture is
/// UNSUPPORTED naming the missing entry point, abort does nothing and nothing captures.
inline void check_graphs_unsupported_without_the_symbols(const char* missing) {
  Instance dev;
  CaptureStream s(dev);
  const std::string e =
      dev.expect(dev.t.stream_begin_capture(dev.inst, s.get(), GPUPLUG_CAPTURE_MODE_RELAXED),
                 GPUPLUG_STATUS_UNSUPPORTED, "stream_begin_capture");
  BOOST_TEST(contains(e, std::string("does not provide ") + missing), e);
  dev.ok(dev.t.stream_abort_capture(dev.inst, s.get()), "stream_abort_capture");
  BOOST_TEST(!capturing(dev, s.get()));
  std::uint64_t g = 0;
  dev.expect(dev.t.stream_end_capture(dev.inst, s.get(), &g), GPUPLUG_STATUS_UNSUPPORTED,
             "stream_end_capture");
  const std::uint64_t y = dev.alloc(64);
  dev.ok(dev.t.memset_d8(dev.inst, y, 1, 64, s.get()), "memset");  // the rest works
  dev.ok(dev.t.stream_synchronize(dev.inst, s.get()), "stream_synchronize");
  dev.ok(dev.t.free(dev.inst, y), "free");
}

}  // namespace gpuplug::test
