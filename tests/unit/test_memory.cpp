// SPDX-License-Identifier: Apache-2.0
// Memory you can see on the host plugin: snapshots, history, scopes, the
// out-of-memory report and observer; the same cases run on the HIP and CUDA fakes.
#define BOOST_TEST_MODULE memory
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <string>
#include <thread>
#include <vector>

#include "host_backend.hpp"
#include "memory_cases.hpp"

using namespace gpuplug;
using gpuplug::test::contains;
namespace cases = gpuplug::test::memory_cases;

namespace {

cases::MakeBackend host() {
  auto h = std::make_shared<test::Host>();
  return [h](const Options& options) { return h->another(options); };
}

}  // namespace

BOOST_AUTO_TEST_CASE(snapshot_lists_live_allocations_sites_and_peaks) {
  cases::check_snapshot(host());
}

BOOST_AUTO_TEST_CASE(memory_history_keeps_the_last_n_events) { cases::check_history(host()); }

BOOST_AUTO_TEST_CASE(scopes_nest_and_report_peak_and_net) { cases::check_scopes(host()); }

BOOST_AUTO_TEST_CASE(scopes_and_snapshots_hold_while_threads_allocate) {
  cases::check_hammer(host());
}

BOOST_AUTO_TEST_CASE(out_of_memory_names_request_limit_sites_and_scratch) {
  cases::check_out_of_memory_report(host());
}

BOOST_AUTO_TEST_CASE(out_of_memory_observer_may_retry_decline_or_throw) {
  cases::check_out_of_memory_observer(host());
}

BOOST_AUTO_TEST_CASE(managed_out_of_memory_gets_the_report_and_the_observer) {
  cases::check_managed_out_of_memory(host());
}

BOOST_AUTO_TEST_CASE(model_caches_scratch_is_in_the_snapshot_and_the_report) {
  cases::check_model_cache_scratch(host());
}

BOOST_AUTO_TEST_CASE(out_of_memory_while_scratch_grows_reports_without_deadlock) {
  cases::check_out_of_memory_in_scratch(host());
}

BOOST_AUTO_TEST_CASE(out_of_memory_says_device_and_managed_apart) {
  cases::check_out_of_memory_kinds(host());
}

// Models come and go (made, grown, released, destroyed) on threads of their own while another
// thread takes snapshots: every snapshot lists only caches that are alive, with whole rows (run
// under ASan and TSan, this is the check that the views never read a cache that is going).
BOOST_AUTO_TEST_CASE(snapshots_while_model_caches_come_and_go) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  std::atomic<bool> done{false};
  std::atomic<int> bad_rows{0};
  std::thread snapper([&] {
    while (!done.load()) {
      for (const ScratchMemory& m : gpu.memory_snapshot().op_scratch) {
        const bool known = m.cache.starts_with("op scratch (model ") && m.tag == "act";
        if (!known || m.live_bytes == 0 || m.retired_count > 1) bad_rows.fetch_add(1);
      }
    }
  });
  std::vector<std::thread> models;
  for (int t = 0; t < 3; ++t) {
    models.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        OpCache model(gpu, "model " + std::to_string(t));
        model.scratch(gpu, "act", 256);
        model.scratch(gpu, "act", 512);  // retires the first buffer
        model.release(gpu);
      }
    });
  }
  for (std::thread& m : models) m.join();
  done.store(true);
  snapper.join();
  BOOST_TEST(bad_rows.load() == 0);
  BOOST_TEST(gpu.memory_snapshot().op_scratch.empty());
  BOOST_TEST(gpu.live_bytes() == 0u);
}

BOOST_AUTO_TEST_CASE(op_scratch_is_reported_per_tag_live_and_retired) {
  test::Host h;
  GpuBackend& gpu = *h.gpu;
  gpu.op_cache().scratch(gpu, "act", 1024);
  gpu.op_cache().scratch(gpu, "act", 4096);  // outgrows: the 1 KiB buffer is retired
  gpu.op_cache().scratch(gpu, "logits", 512);
  const MemorySnapshot s = gpu.memory_snapshot();
  BOOST_TEST_REQUIRE(s.op_scratch.size() == 2u);
  BOOST_TEST(s.op_scratch[0].tag == "act");
  BOOST_TEST(s.op_scratch[0].cache == "op scratch");
  BOOST_TEST(s.op_scratch[0].live_bytes == 4096u);
  BOOST_TEST(s.op_scratch[0].retired_bytes == 1024u);
  BOOST_TEST(s.op_scratch[0].retired_count == 1u);
  BOOST_TEST(s.op_scratch[1].tag == "logits");
  BOOST_TEST(cases::site_named(s, "op scratch: act")->live_bytes == 5120u);
  BOOST_TEST(cases::site_named(s, "op scratch: logits") != nullptr);
  gpu.op_cache().release(gpu);
  BOOST_TEST(gpu.memory_snapshot().op_scratch.empty());
}

BOOST_AUTO_TEST_CASE(bad_snapshot_text_is_refused_naming_source_and_reason) {
  const auto refused = [](std::string_view text, std::string_view why) {
    try {
      parse_memory_snapshot(text, "a.json");
      BOOST_FAIL("accepted: " << text);
    } catch (const BadSnapshot& e) {
      BOOST_TEST(contains(e.what(), "a.json: "), e.what());
      BOOST_TEST(contains(e.what(), why), e.what());
    }
  };
  refused("{\"schema\": 1,", "line ");
  refused("{\"schema\": 2, \"totals\": {}}", "schema 2, this gpuplug reads 1");
  refused("{\"schema\": 1}", "has no \"totals\"");
  refused(
      "{\"schema\": 1, \"totals\": {\"live_bytes\": -1, \"live_count\": 0, \"peak_bytes\": 0, "
      "\"live_managed_bytes\": 0, \"total_allocs\": 0, \"total_frees\": 0}}",
      "totals: \"live_bytes\" is not an unsigned integer");
}
