// SPDX-License-Identifier: Apache-2.0
// The memory-you-can-see checks every backend runs through the shared ledger: host
// (test_memory), the HIP fake runtime (test_hip_fake_runtime) and the CUDA fake driver.
#pragma once

// Each function is the body of one test case; `make` creates a fresh backend of the plugin under
// test with the given options, so that each check starts from an empty ledger.

#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <functional>
#include <gpuplug/gpuplug.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "contains.hpp"

namespace gpuplug::test::memory_cases {

using MakeBackend = std::function<std::shared_ptr<GpuBackend>(const Options&)>;

inline const SiteMemory* site_named(const MemorySnapshot& s, std::string_view site) {
  for (const SiteMemory& m : s.sites)
    if (m.site == site) return &m;
  return nullptr;
}

/// Live allocations, per-site totals and peaks, the totals, the limit, and a JSON round trip.
inline void check_snapshot(const MakeBackend& make) {
  const auto gpu = make({{"device_memory_limit", "64M"}});
  const DevicePtr w1 = gpu->alloc(3000, "load_weights");
  const DevicePtr w2 = gpu->alloc(1000, "load_weights");
  const DevicePtr a = gpu->alloc(500, "activations");
  gpu->free(a);
  MemorySnapshot s = gpu->memory_snapshot();
  BOOST_TEST(s.complete);
  BOOST_TEST(s.backend == std::string(gpu->name()));
  BOOST_TEST(s.totals.live_bytes == 4000u);
  BOOST_TEST(s.totals.live_count == 2u);
  BOOST_TEST(s.totals.peak_bytes == 4500u);
  BOOST_TEST(s.totals.total_allocs == 3u);
  BOOST_TEST(s.totals.total_frees == 1u);
  BOOST_TEST(s.device_memory_limit.value_or(0) == 64u << 20);
  BOOST_TEST_REQUIRE(s.device.has_value());
  BOOST_TEST(s.device->total_bytes > 0u);
  BOOST_TEST_REQUIRE(s.allocations.size() == 2u);
  BOOST_TEST(s.allocations[0].ptr.value == w1.value);  // by sequence
  BOOST_TEST(s.allocations[0].bytes == 3000u);
  BOOST_TEST(s.allocations[0].site == "load_weights");
  BOOST_TEST((s.allocations[0].kind == AllocKind::device));
  BOOST_TEST(s.allocations[1].ptr.value == w2.value);
  BOOST_TEST(s.allocations[0].sequence < s.allocations[1].sequence);
  BOOST_TEST(!s.allocations[0].time_ns.has_value());  // memory_history is off
  const SiteMemory* weights = site_named(s, "load_weights");
  BOOST_TEST_REQUIRE(weights != nullptr);
  BOOST_TEST(weights->live_bytes == 4000u);
  BOOST_TEST(weights->live_count == 2u);
  BOOST_TEST(weights->peak_bytes == 4000u);
  const SiteMemory* act = site_named(s, "activations");
  BOOST_TEST_REQUIRE(act != nullptr);
  BOOST_TEST(act->live_bytes == 0u);
  BOOST_TEST(act->peak_bytes == 500u);
  BOOST_TEST(s.sites.front().site == "load_weights");  // largest live first
  BOOST_TEST(s.history_capacity == 0u);
  BOOST_TEST(s.history.empty());

  // The JSON says the same, read back.
  const MemorySnapshot back = parse_memory_snapshot(to_json(s), "round trip");
  BOOST_TEST(back.backend == s.backend);
  BOOST_TEST(back.totals.peak_bytes == s.totals.peak_bytes);
  BOOST_TEST(back.allocations.size() == s.allocations.size());
  BOOST_TEST(back.allocations[1].ptr.value == w2.value);
  BOOST_TEST(back.sites.size() == s.sites.size());
  BOOST_TEST((back.device_memory_limit == s.device_memory_limit));

  // reset_peak: the peaks start again from what is live.
  gpu->reset_peak();
  s = gpu->memory_snapshot();
  BOOST_TEST(s.totals.peak_bytes == 4000u);
  BOOST_TEST(site_named(s, "activations") == nullptr);  // nothing live, no peak: not listed
  gpu->free(w1);
  gpu->free(w2);
}

/// memory_history=N keeps the last N alloc and free events, oldest first, with times.
inline void check_history(const MakeBackend& make) {
  const auto gpu = make({{"memory_history", "4"}});
  std::vector<DevicePtr> p;
  for (int i = 0; i < 3; ++i) p.push_back(gpu->alloc(100 * (i + 1), "step"));
  gpu->free(p[0]);
  gpu->free(p[1]);
  gpu->free(p[2]);
  const MemorySnapshot s = gpu->memory_snapshot();
  BOOST_TEST(s.history_capacity == 4u);
  BOOST_TEST(s.history_dropped == 2u);
  BOOST_TEST_REQUIRE(s.history.size() == 4u);
  BOOST_TEST(!s.history[0].is_free);  // the third alloc
  BOOST_TEST(s.history[0].bytes == 300u);
  BOOST_TEST(s.history[1].is_free);
  BOOST_TEST(s.history[1].ptr.value == p[0].value);
  BOOST_TEST(s.history[3].ptr.value == p[2].value);
  BOOST_TEST(s.history[3].site == "step");
  for (std::size_t i = 1; i < s.history.size(); ++i) {
    BOOST_TEST(s.history[i].sequence == s.history[i - 1].sequence + 1);
    BOOST_TEST(s.history[i].time_ns >= s.history[i - 1].time_ns);
  }
  // With history on, live allocations carry their time.
  const DevicePtr q = gpu->alloc(8, "timed");
  BOOST_TEST(gpu->memory_snapshot().allocations.at(0).time_ns.has_value());
  gpu->free(q);

  // A bad value is refused at create, naming the option.
  try {
    make({{"memory_history", "lots"}});
    BOOST_FAIL("memory_history=lots was accepted");
  } catch (const Error& e) {
    BOOST_TEST(contains(e.what(), "memory_history"), e.what());
  }
}

/// Scopes nest: each reports the peak above its start and the net change, inner work included.
inline void check_scopes(const MakeBackend& make) {
  const auto gpu = make({});
  const DevicePtr before = gpu->alloc(1000, "before");
  MemoryScope outer(*gpu, "model");
  const DevicePtr a = gpu->alloc(2000, "layer 1");
  {
    MemoryScope inner(*gpu, "layer 2");
    const DevicePtr b = gpu->alloc(5000, "layer 2");
    gpu->free(b);
    const MemoryScopeResult r = inner.end();
    BOOST_TEST(r.name == "layer 2");
    BOOST_TEST(r.peak_bytes == 5000u);
    BOOST_TEST(r.net_bytes == 0);
    BOOST_TEST(inner.end().peak_bytes == 5000u);  // ending again returns the same result
  }
  gpu->free(before);
  const MemoryScopeResult r = outer.end();
  BOOST_TEST(r.peak_bytes == 7000u);  // a + b above the start
  BOOST_TEST(r.net_bytes == 1000);    // + a - before
  gpu->free(a);
}

/// Many threads allocate inside their own scopes while another takes snapshots: every snapshot is
/// consistent with itself, no scope sees more than all threads together ever hold (a scope
/// counts the whole backend, so another thread's free can hide part of its own peak), and no
/// event is lost.
inline void check_hammer(const MakeBackend& make) {
  const auto gpu = make({{"memory_history", "64"}});
  constexpr int threads = 4;
  constexpr int rounds = 200;
  std::atomic<bool> done{false};
  std::atomic<int> bad_snapshots{0};
  std::thread snapper([&] {
    while (!done.load()) {
      const MemorySnapshot s = gpu->memory_snapshot();
      std::uint64_t sum = 0;
      for (const LiveAllocation& a : s.allocations) sum += a.bytes;
      if (sum != s.totals.live_bytes || s.allocations.size() != s.totals.live_count)
        bad_snapshots.fetch_add(1);
    }
  });
  std::vector<std::thread> workers;
  std::atomic<int> impossible_peaks{0};
  constexpr std::uint64_t most_ever_live = 64 * (1 + 2 + 3 + 4) + 64 * threads;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        MemoryScope scope(*gpu, "worker " + std::to_string(t));
        const DevicePtr p = gpu->alloc(64 * (t + 1), "hammer");
        const DevicePtr q = gpu->alloc(64, "hammer");
        gpu->free(p);
        gpu->free(q);
        if (scope.end().peak_bytes > most_ever_live) impossible_peaks.fetch_add(1);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  done.store(true);
  snapper.join();
  BOOST_TEST(bad_snapshots.load() == 0);
  BOOST_TEST(impossible_peaks.load() == 0);
  const MemorySnapshot s = gpu->memory_snapshot();
  BOOST_TEST(s.totals.live_bytes == 0u);
  BOOST_TEST(s.totals.total_allocs == std::uint64_t{2} * threads * rounds);
  BOOST_TEST(s.history_dropped + s.history.size() == std::uint64_t{4} * threads * rounds);
}

/// An allocation past device_memory_limit says what was asked, the limit, what is live and where,
/// and the OpCache scratch held.
inline void check_out_of_memory_report(const MakeBackend& make) {
  const auto gpu = make({{"device_memory_limit", "1M"}});
  const DevicePtr w = gpu->alloc(400 << 10, "load_weights");
  gpu->op_cache().scratch(*gpu, "act", 256 << 10);
  gpu->op_cache().scratch(*gpu, "act", 300 << 10);  // retires the 256 KiB buffer
  try {
    gpu->alloc(512 << 10, "grow_cache");
    BOOST_FAIL("alloc past device_memory_limit succeeded");
  } catch (const Error& e) {
    const std::string m = e.what();
    BOOST_TEST_MESSAGE(m);
    BOOST_TEST((e.status() == Status::out_of_memory));
    BOOST_TEST(contains(m, "out of memory allocating 512.0 KiB at grow_cache"), m);
    // The live and the retired buffer share their site.
    BOOST_TEST(contains(m,
                        "956.0 KiB live (956.0 KiB device, 0 B managed): 556.0 KiB op scratch: "
                        "act, 400.0 KiB load_weights"),
               m);
    BOOST_TEST(contains(m, "device_memory_limit 1.0 MiB of device memory"), m);
    BOOST_TEST(contains(m, "op scratch held: 300.0 KiB live, 256.0 KiB retired"), m);
  }
  gpu->op_cache().release(*gpu);
  gpu->free(w);
}

/// The observer sees the report and may free memory and ask for a retry; an observer that throws
/// leaves the caller with the out-of-memory Error, saying so; its own allocations do not call it
/// again.
inline void check_out_of_memory_observer(const MakeBackend& make) {
  const auto gpu = make({{"device_memory_limit", "1M"}});
  DevicePtr cache = gpu->alloc(800 << 10, "cache");
  int calls = 0;
  gpu->set_out_of_memory_observer([&](const OutOfMemory& oom) {
    ++calls;
    BOOST_TEST(oom.requested_bytes == 512u << 10);
    BOOST_TEST(oom.site == "needs_room");
    BOOST_TEST(contains(oom.report, "800.0 KiB cache"), oom.report);
    gpu->free(cache);
    cache = DevicePtr{};
    return OutOfMemoryAction::retry;
  });
  const DevicePtr room = gpu->alloc(512 << 10, "needs_room");
  BOOST_TEST(calls == 1);
  BOOST_TEST(gpu->live_bytes() == 512u << 10);

  // Declining: the report is thrown.
  gpu->set_out_of_memory_observer([&](const OutOfMemory&) {
    ++calls;
    return OutOfMemoryAction::fail;
  });
  BOOST_CHECK_THROW(gpu->alloc(768 << 10, "too_big"), Error);
  BOOST_TEST(calls == 2);

  // Throwing: still Error(out_of_memory), naming the observer's failure; and an allocation the
  // observer makes that fails too does not call it again.
  gpu->set_out_of_memory_observer([&](const OutOfMemory&) -> OutOfMemoryAction {
    ++calls;
    gpu->alloc(900 << 10, "inside the observer");  // fails: reported, observer not re-entered
    return OutOfMemoryAction::retry;
  });
  try {
    gpu->alloc(768 << 10, "too_big");
    BOOST_FAIL("alloc succeeded");
  } catch (const Error& e) {
    BOOST_TEST((e.status() == Status::out_of_memory));
    BOOST_TEST(calls == 3);
    BOOST_TEST(contains(e.what(), "at too_big"), e.what());
    BOOST_TEST(contains(e.what(), "the out-of-memory observer failed: "), e.what());
    BOOST_TEST(contains(e.what(), "at inside the observer"), e.what());
  }
  gpu->set_out_of_memory_observer({});
  BOOST_CHECK_THROW(gpu->alloc(768 << 10, "too_big"), Error);
  BOOST_TEST(calls == 3);
  gpu->free(room);
}

// alloc_managed's out-of-memory gets the same report and observer as alloc's, naming itself.
// The faults layer makes the first managed allocation fail, so any plugin with managed memory
// can run it.
inline void check_managed_out_of_memory(const MakeBackend& make) {
  const Options faults = {{"layers", "faults"}, {"faults", "alloc_managed@1=out_of_memory"}};
  {
    const auto gpu = make(faults);
    const DevicePtr held = gpu->alloc(4096, "held");
    int calls = 0;
    std::string operation;
    std::string report;
    gpu->set_out_of_memory_observer([&](const OutOfMemory& oom) {
      ++calls;
      operation = std::string(oom.operation);
      report = std::string(oom.report);
      return OutOfMemoryAction::retry;  // the fault was the first call only: the retry succeeds
    });
    const DevicePtr spill = gpu->alloc_managed(1024, "spill");
    BOOST_TEST(calls == 1);
    BOOST_TEST(operation == "alloc_managed");
    BOOST_TEST(contains(report, "out of memory allocating 1.0 KiB of managed memory at spill"), report);
    BOOST_TEST(contains(report, "4.0 KiB held"), report);
    BOOST_TEST(gpu->live_bytes() == 4096u + 1024u);
    gpu->free(spill);
    gpu->free(held);
  }
  const auto gpu = make(faults);  // no observer: the report is the Error
  try {
    gpu->alloc_managed(1024, "spill");
    BOOST_FAIL("alloc_managed succeeded");
  } catch (const Error& e) {
    BOOST_TEST((e.status() == Status::out_of_memory));
    BOOST_TEST(e.operation() == "alloc_managed");
    BOOST_TEST(contains(e.what(), "out of memory allocating 1.0 KiB of managed memory at spill: "),
               e.what());
    BOOST_TEST(contains(e.what(), "op scratch held: "), e.what());
  }
  BOOST_TEST(gpu->live_bytes() == 0u);
}

inline const ScratchMemory* scratch_named(const MemorySnapshot& s, std::string_view cache,
                                          std::string_view tag) {
  for (const ScratchMemory& m : s.op_scratch)
    if (m.cache == cache && m.tag == tag) return &m;
  return nullptr;
}

/// Two models on one backend, each with its model cache (OpCache(gpu, name), the README's
/// pattern): the snapshot's op_scratch has every cache's tags beside the backend's own, each
/// naming its cache, and the out-of-memory report counts them; a released or destroyed model
/// cache leaves the views.
inline void check_model_cache_scratch(const MakeBackend& make) {
  const auto gpu = make({{"device_memory_limit", "1M"}});
  gpu->op_cache().scratch(*gpu, "act", 64 << 10);
  auto a = std::make_unique<OpCache>(*gpu, "model A");
  auto b = std::make_unique<OpCache>(*gpu, "model B");
  a->scratch(*gpu, "act", 100 << 10);
  a->scratch(*gpu, "act", 200 << 10);  // retires the 100 KiB buffer
  b->scratch(*gpu, "logits", 300 << 10);
  MemorySnapshot s = gpu->memory_snapshot();
  BOOST_TEST_REQUIRE(s.op_scratch.size() == 3u);
  const ScratchMemory* a_act = scratch_named(s, "op scratch (model A)", "act");
  BOOST_TEST_REQUIRE(a_act != nullptr);
  BOOST_TEST(a_act->live_bytes == 200u << 10);
  BOOST_TEST(a_act->retired_bytes == 100u << 10);
  BOOST_TEST(a_act->retired_count == 1u);
  BOOST_TEST_REQUIRE(scratch_named(s, "op scratch (model B)", "logits") != nullptr);
  BOOST_TEST_REQUIRE(scratch_named(s, "op scratch", "act") != nullptr);
  BOOST_TEST(s.op_scratch.front().cache == "op scratch (model A)");  // most held first
  // The ledger's site of a scratch buffer is "<cache>: <tag>", the row's cache and tag.
  BOOST_TEST(site_named(s, "op scratch (model A): act")->live_bytes == 300u << 10);
  // The JSON says the same.
  const MemorySnapshot back = parse_memory_snapshot(to_json(s), "round trip");
  BOOST_TEST(back.op_scratch.size() == 3u);
  BOOST_TEST(scratch_named(back, "op scratch (model B)", "logits") != nullptr);

  try {
    gpu->alloc(512 << 10, "grow_cache");
    BOOST_FAIL("alloc past device_memory_limit succeeded");
  } catch (const Error& e) {
    const std::string m = e.what();
    BOOST_TEST(contains(m,
                        "op scratch held: 564.0 KiB live, 100.0 KiB retired (OpCache::release "
                        "frees both): 300.0 KiB op scratch (model A), 300.0 KiB op scratch "
                        "(model B), 64.0 KiB op scratch"),
               m);
  }

  a->release(*gpu);
  s = gpu->memory_snapshot();
  BOOST_TEST(scratch_named(s, "op scratch (model A)", "act") == nullptr);
  BOOST_TEST(s.op_scratch.size() == 2u);
  a.reset();
  b->release(*gpu);
  BOOST_TEST(gpu->memory_snapshot().op_scratch.size() == 1u);  // the backend's own
  b.reset();
  gpu->op_cache().release(*gpu);
  BOOST_TEST(gpu->memory_snapshot().op_scratch.empty());
}

/// Running out of memory while a scratch buffer grows (inside the cache's own miss) reports,
/// rather than waiting on the cache it is reporting on: for the backend's cache and for a model
/// cache, each report naming the scratch already held.
inline void check_out_of_memory_in_scratch(const MakeBackend& make) {
  const auto gpu = make({{"device_memory_limit", "1M"}});
  auto model = std::make_unique<OpCache>(*gpu, "model A");
  model->scratch(*gpu, "act", 256 << 10);
  gpu->op_cache().scratch(*gpu, "kv", 128 << 10);
  for (OpCache* cache : {&gpu->op_cache(), model.get()}) {
    try {
      cache->scratch(*gpu, "act", 2 << 20);
      BOOST_FAIL("scratch past device_memory_limit succeeded");
    } catch (const Error& e) {
      const std::string m = e.what();
      BOOST_TEST((e.status() == Status::out_of_memory));
      BOOST_TEST(contains(m, "at " + std::string(cache->label()) + ": act"), m);
      BOOST_TEST(contains(m, "op scratch held: 384.0 KiB live, 0 B retired"), m);
      BOOST_TEST(contains(m, "256.0 KiB op scratch (model A), 128.0 KiB op scratch"), m);
    }
  }
  model->release(*gpu);
  model.reset();
  gpu->op_cache().release(*gpu);
}

/// Device and managed memory apart: device_memory_limit counts device memory only, so the report
/// says how much of what is live is which, and which sites hold managed memory.
inline void check_out_of_memory_kinds(const MakeBackend& make) {
  const auto gpu = make({{"device_memory_limit", "1M"}});
  const DevicePtr w = gpu->alloc(768 << 10, "weights");
  const DevicePtr spill = gpu->alloc_managed(1 << 20, "spill");
  const DevicePtr mixed_d = gpu->alloc(128 << 10, "kv");
  const DevicePtr mixed_m = gpu->alloc_managed(64 << 10, "kv");
  const MemorySnapshot s = gpu->memory_snapshot();
  const MemoryKinds k = live_by_kind(s);
  BOOST_TEST(k.device == 896u << 10);
  BOOST_TEST(k.managed == 1088u << 10);
  BOOST_TEST(k.external == 0u);
  try {
    gpu->alloc(512 << 10, "grow_cache");
    BOOST_FAIL("alloc past device_memory_limit succeeded");
  } catch (const Error& e) {
    const std::string m = e.what();
    BOOST_TEST(contains(m,
                        "1.9 MiB live (896.0 KiB device, 1.1 MiB managed): 1.0 MiB spill "
                        "(managed), 768.0 KiB weights, 192.0 KiB kv (64.0 KiB managed)"),
               m);
    BOOST_TEST(contains(m, "device_memory_limit 1.0 MiB of device memory"), m);
  }
  for (const DevicePtr p : {w, spill, mixed_d, mixed_m}) gpu->free(p);
}

}  // namespace gpuplug::test::memory_cases
