// SPDX-License-Identifier: Apache-2.0
// Many models on one backend: a model cache per model, OpCache(gpu, name), with its
// own scratch, latch and gates and the backend's shared kernel memo. Releasing one model's cache
// frees that model's scratch only; the backend's own cache cannot be released from under them.
#define BOOST_TEST_MODULE op_cache_models
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <gpuplug/gpuplug.hpp>
#include <latch>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "contains.hpp"
#include "counting_backend.hpp"
#include "host_backend.hpp"
#include "stderr_capture.hpp"
#include "test_print.hpp"

namespace {

using gpuplug::DevicePtr;
using gpuplug::Error;
using gpuplug::GpuBackend;
using gpuplug::KernelHandle;
using gpuplug::OpCache;
using gpuplug::Status;
using gpuplug::Teardown;
using gpuplug::test::contains;
using gpuplug::test::CountingBackend;
using gpuplug::test::Host;
using gpuplug::test::StderrCapture;

// Writes `bytes` bytes of `fill` into p and reads them back: true when p is a live allocation of
// gpu that holds what was written (the host plugin range-checks copies against its ledger, so a
// freed buffer is an Error here, not a crash).
bool usable(GpuBackend& gpu, DevicePtr p, std::size_t bytes, std::uint8_t fill = 0x5A) {
  std::vector<std::uint8_t> out(bytes, fill), in(bytes, 0);
  try {
    gpu.copy_h2d(p, out.data(), bytes);
    gpu.copy_d2h(in.data(), p, bytes);
  } catch (const Error&) {
    return false;
  }
  return in == out;
}

// True when the buffer still holds `fill` in each of its `bytes` bytes.
bool holds(GpuBackend& gpu, DevicePtr p, std::size_t bytes, std::uint8_t fill) {
  std::vector<std::uint8_t> in(bytes, 0);
  try {
    gpu.copy_d2h(in.data(), p, bytes);
  } catch (const Error&) {
    return false;
  }
  return in == std::vector<std::uint8_t>(bytes, fill);
}

std::string printed(const OpCache& c) {
  std::ostringstream os;
  os << c;
  return os.str();
}

// The Error a call throws (nullopt when it throws none).
template <class F>
std::optional<Error> error_of(F&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

std::filesystem::path test_kernel_dir() { return GPUPLUG_TEST_HOST_KERNEL_DIR; }

}  // namespace

BOOST_AUTO_TEST_SUITE(op_cache_models)

// A crash seen once, made deterministic: model A's release must leave model B's scratch
// live on the ledger and usable. With both models on gpu.op_cache() (the pattern gemm_pipeline
// taught), A's Teardown freed B's buffer and B's next step used freed memory.
BOOST_AUTO_TEST_CASE(releasing_one_models_cache_leaves_the_other_models_scratch_live) {
  Host host;
  GpuBackend& gpu = *host.gpu;
  OpCache a(gpu, "model A");
  OpCache b(gpu, "model B");
  Teardown teardown_a, teardown_b;
  teardown_a.add(a);
  teardown_b.add(b);
  // The same tag in two models is two buffers.
  const DevicePtr ax = a.scratch(gpu, "x", 4096);
  const DevicePtr bx = b.scratch(gpu, "x", 4096);
  BOOST_TEST(ax != bx);
  BOOST_TEST(usable(gpu, bx, 4096, 0xB0));
  BOOST_TEST(contains(gpu.alloc_report(), "op scratch (model A): x"));
  BOOST_TEST(contains(gpu.alloc_report(), "op scratch (model B): x"));
  const gpuplug::LedgerStats before = gpu.ledger_stats();

  teardown_a.release_all(gpu);  // model A is done; B keeps serving

  BOOST_TEST(gpu.live_alloc_count() == before.live_count - 1);  // only A's buffer went
  BOOST_TEST(gpu.live_bytes() == before.live_bytes - 4096);
  BOOST_TEST(!contains(gpu.alloc_report(), "op scratch (model A): x"));
  BOOST_TEST(contains(gpu.alloc_report(), "op scratch (model B): x"));
  BOOST_TEST(holds(gpu, bx, 4096, 0xB0));       // B's data survived A's release
  BOOST_TEST(b.scratch(gpu, "x", 4096) == bx);  // and B's cache still has it: a hit
  BOOST_TEST(usable(gpu, bx, 4096));
  BOOST_TEST(a.scratch_count() == 0u);
  BOOST_TEST(b.scratch_count() == 1u);

  teardown_b.release_all(gpu);
  BOOST_TEST(gpu.live_alloc_count() == 0u);
  BOOST_TEST(gpu.live_bytes() == 0u);
}

// The dangerous pattern is loudly wrong: on a shared backend (model caches alive), releasing the
// backend's own cache is refused, names the reason and changes nothing.
BOOST_AUTO_TEST_CASE(the_backends_own_cache_cannot_be_released_while_model_caches_share_it) {
  Host host;
  GpuBackend& gpu = *host.gpu;
  OpCache& shared = gpu.op_cache();
  const DevicePtr legacy = shared.scratch(gpu, "legacy", 256);
  const KernelHandle axpy = shared.kernel(gpu, "axpy", "axpy");
  {
    auto model = std::make_unique<OpCache>(gpu, "model A");
    BOOST_TEST(shared.model_cache_count() == 1u);
    Teardown old_pattern;
    old_pattern.add(shared);  // a model that holds gpu.op_cache() in its Teardown
    const std::optional<Error> e = error_of([&] { old_pattern.release_all(gpu); });
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST_INFO(e->what());
    BOOST_TEST(contains(e->message(), "op scratch: "));
    BOOST_TEST(contains(e->message(), "release of the backend's own cache refused: 1 model cache"));
    BOOST_TEST(contains(e->message(), "each model releases its own OpCache, never gpu.op_cache()"));
    const std::optional<Error> direct = error_of([&] { shared.release(gpu); });
    BOOST_TEST_REQUIRE(direct.has_value());
    BOOST_TEST(direct->status() == Status::invalid_argument);
    // Nothing changed: the scratch is live, the memo answers both caches.
    BOOST_TEST(shared.scratch_count() == 1u);
    BOOST_TEST(usable(gpu, legacy, 256));
    BOOST_TEST(model->kernel(gpu, "axpy", "axpy") == axpy);
    model->release(gpu);
  }
  // With the model cache gone the backend's cache is one model's again: release works.
  BOOST_TEST(shared.model_cache_count() == 0u);
  shared.release(gpu);
  BOOST_TEST(shared.scratch_count() == 0u);
  BOOST_TEST(gpu.live_alloc_count() == 0u);
}

BOOST_AUTO_TEST_CASE(model_caches_share_the_backends_kernel_memo) {
  Host host;
  CountingBackend gpu(*host.gpu);
  OpCache a(gpu, "model A");
  OpCache b(gpu);
  BOOST_TEST(a.is_model_cache());
  BOOST_TEST(!gpu.op_cache().is_model_cache());
  BOOST_TEST(gpu.op_cache().model_cache_count() == 2u);
  BOOST_TEST(a.label() == "op scratch (model A)");
  BOOST_TEST(b.label() == "op scratch");

  const KernelHandle ga = a.kernel(gpu, "gemm", "gemm_a_e4m3");
  BOOST_TEST(b.kernel(gpu, "gemm", "gemm_a_e4m3") == ga);  // resolved once per backend
  BOOST_TEST(gpu.op_cache().kernel(gpu, "gemm", "gemm_a_e4m3") == ga);
  BOOST_TEST(gpu.kernel_calls_for("gemm", "gemm_a_e4m3") == 1u);
  BOOST_TEST(b.a_e4m3(ga));  // records are the memo's too
  BOOST_TEST((b.n_tile(ga) == a.n_tile(ga)));
  BOOST_TEST(a.kernel_count() == 1u);
  BOOST_TEST(printed(a) == "OpCache { kernels: 1, scratch: 0 }");

  // Releasing a model cache keeps the backend's memo: another model still hits it.
  a.scratch(gpu, "t", 64);
  a.release(gpu);
  BOOST_TEST(a.scratch_count() == 0u);
  BOOST_TEST(b.kernel(gpu, "gemm", "gemm_a_e4m3") == ga);
  BOOST_TEST(a.kernel(gpu, "gemm", "gemm_a_e4m3") == ga);
  BOOST_TEST(gpu.kernel_calls_for("gemm", "gemm_a_e4m3") == 1u);
}

// unload_module forgets the module in the backend's memo, which every model cache reads: no
// model cache hands out a handle into the unloaded module.
BOOST_AUTO_TEST_CASE(unload_module_forgets_the_modules_handles_for_every_model_cache) {
  Host host;
  GpuBackend& gpu = *host.gpu;
  gpu.load_module_file("probe", test_kernel_dir() / "test_probe.so");
  OpCache a(gpu, "model A");
  OpCache b(gpu, "model B");
  const KernelHandle h = a.kernel(gpu, "probe", "block_probe");
  BOOST_TEST(b.kernel(gpu, "probe", "block_probe") == h);
  const KernelHandle axpy = b.kernel(gpu, "axpy", "axpy");
  BOOST_TEST(a.kernel_count() == 2u);

  gpu.unload_module("probe");

  BOOST_TEST(a.kernel_count() == 1u);
  BOOST_TEST(b.kernel_count() == 1u);
  // The module is not in modules_dir: a lookup must reach the backend and fail, not return h.
  for (OpCache* c : {&a, &b}) {
    const std::optional<Error> e = error_of([&] { c->kernel(gpu, "probe", "block_probe"); });
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->status() == Status::not_found);
  }
  BOOST_TEST(a.kernel(gpu, "axpy", "axpy") == axpy);  // other modules stay memoized

  // Loaded again: resolved afresh, and the new handle is shared again.
  gpu.load_module_file("probe", test_kernel_dir() / "test_probe.so");
  const KernelHandle fresh = b.kernel(gpu, "probe", "block_probe");
  BOOST_TEST(a.kernel(gpu, "probe", "block_probe") == fresh);
  a.release(gpu);
  b.release(gpu);
}

BOOST_AUTO_TEST_CASE(alloc_with_fallback_records_the_call_site_on_the_ledger) {
  Host host;
  auto small = host.another({{"device_memory_limit", "64K"}});
  GpuBackend& gpu = *small;
  OpCache a(gpu, "model A");
  const DevicePtr w = a.alloc_with_fallback(gpu, 1024, "weights (model A)");
  BOOST_TEST(contains(gpu.alloc_report(), "weights (model A)"));
  // Past the limit the managed fallback is recorded under the same site.
  const DevicePtr big = a.alloc_with_fallback(gpu, 128 * 1024, "big weights (model A)");
  BOOST_TEST(a.alloc_fell_back());
  BOOST_TEST(gpu.ledger_stats().live_managed_bytes == 128u * 1024u);
  BOOST_TEST(contains(gpu.alloc_report(), "big weights (model A)"));
  // The default site is the calling function, as for GpuBackend::alloc.
  const DevicePtr d = a.alloc_with_fallback(gpu, 16);
  BOOST_TEST_INFO(gpu.alloc_report());
  BOOST_TEST(contains(gpu.alloc_report(), "test_method"));
  for (const DevicePtr p : {w, big, d}) gpu.free(p);
  a.release(gpu);
  BOOST_TEST(gpu.live_alloc_count() == 0u);
}

// The latch and the gates are per model cache; the device_memory_limit is per backend.
BOOST_AUTO_TEST_CASE(each_model_cache_has_its_own_latch_and_gates) {
  Host host;
  auto small = host.another({{"device_memory_limit", "64K"}});
  GpuBackend& gpu = *small;
  OpCache a(gpu, "model A");
  OpCache b(gpu, "model B");
  const DevicePtr big = a.alloc_with_fallback(gpu, 128 * 1024, "weights (model A)");
  BOOST_TEST(a.alloc_fell_back());
  BOOST_TEST(!b.alloc_fell_back());               // B has not run out (yet)
  BOOST_TEST(!gpu.op_cache().alloc_fell_back());  // nor has the backend's own cache
  const DevicePtr fits = b.alloc_with_fallback(gpu, 1024, "weights (model B)");
  BOOST_TEST(!b.alloc_fell_back());  // device memory was there for B's small request
  BOOST_TEST(gpu.ledger_stats().live_managed_bytes == 128u * 1024u);

  BOOST_TEST(a.once("loaded"));
  BOOST_TEST(b.once("loaded"));  // B's gates are its own
  BOOST_TEST(!a.once("loaded"));
  BOOST_TEST(a.first_n("tok", 1));
  BOOST_TEST(b.first_n("tok", 1));
  BOOST_TEST(!b.first_n("tok", 1));
  // Gates and latch survive a release, as for any cache.
  a.release(gpu);
  BOOST_TEST(a.alloc_fell_back());
  BOOST_TEST(!a.once("loaded"));
  gpu.free(big);
  gpu.free(fits);
  b.release(gpu);
}

// Against the rules, a model cache outlives its backend: the backend's destructor cannot release
// its own cache (the model cache still shares its memo) and says so; destroying the model cache
// afterwards is memory-safe (it keeps the memo alive and never touches the backend).
BOOST_AUTO_TEST_CASE(a_model_cache_that_outlives_its_backend_is_reported_and_memory_safe) {
  Host host;
  std::shared_ptr<GpuBackend> gpu = host.another();
  auto model = std::make_unique<OpCache>(*gpu, "model A");
  model->kernel(*gpu, "axpy", "axpy");
  model->scratch(*gpu, "x", 64);
  model->release(*gpu);
  std::string log;
  {
    StderrCapture capture;
    gpu.reset();  // the last owner: the backend goes, the model cache stays
    log = capture.text();
  }
  BOOST_TEST_INFO("log: " << log);
  BOOST_TEST(contains(log, "release of the backend's own cache refused: 1 model cache"));
  BOOST_TEST(model->kernel_count() == 1u);  // the memo it shares is still alive
  model.reset();
}

// A model its Teardown ended allocates nothing more unseen: scratch and alloc_with_fallback of a
// released model cache are errors naming it, until rearm() says the model is back.
BOOST_AUTO_TEST_CASE(a_released_model_cache_refuses_to_allocate_until_rearmed) {
  Host host;
  GpuBackend& gpu = *host.gpu;
  OpCache model(gpu, "model A");
  Teardown teardown;
  teardown.add(model);
  model.scratch(gpu, "act", 4096);
  teardown.release_all(gpu);
  BOOST_TEST(gpu.live_alloc_count() == 0u);
  for (const auto& call : std::vector<std::function<void()>>{
           [&] { model.scratch(gpu, "act", 4096); },
           [&] { model.alloc_with_fallback(gpu, 64, "weights"); }}) {
    const std::optional<Error> e = error_of(call);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->status() == Status::invalid_argument, e->what());
    BOOST_TEST(contains(e->what(), "op scratch (model A)"), e->what());
    BOOST_TEST(contains(e->what(), "was released"), e->what());
  }
  BOOST_TEST(gpu.live_alloc_count() == 0u);  // nothing came back
  BOOST_TEST(model.kernel(gpu, "axpy", "axpy"));  // the backend's kernels stay the backend's
  model.rearm();
  BOOST_TEST(usable(gpu, model.scratch(gpu, "act", 4096), 4096));
  teardown.release_all(gpu);
  BOOST_TEST(gpu.live_alloc_count() == 0u);
}

// A model cache destroyed while it holds scratch says so at once, naming itself and the bytes,
// instead of leaving it to the backend's sweep at its own end.
BOOST_AUTO_TEST_CASE(a_model_cache_destroyed_holding_scratch_says_so_at_once) {
  Host host;
  GpuBackend& gpu = *host.gpu;
  auto model = std::make_unique<OpCache>(gpu, "model B");
  model->scratch(gpu, "act", 4096);
  model->scratch(gpu, "kv", 1024);
  std::string log;
  {
    StderrCapture capture;
    model.reset();
    log = capture.text();
  }
  BOOST_TEST_INFO("log: " << log);
  BOOST_TEST(contains(log, "OpCache 'op scratch (model B)' destroyed holding 2 scratch buffers"));
  BOOST_TEST(contains(log, "5120 bytes"));
  BOOST_TEST(gpu.live_alloc_count() == 2u);  // the ledger still has them, for the sweep
}

BOOST_AUTO_TEST_CASE(a_model_cache_is_bound_to_its_backend_for_life) {
  Host host;
  auto other = host.another();
  OpCache a(*host.gpu, "model A");
  a.scratch(*host.gpu, "x", 64);
  const auto refused = [](const std::optional<Error>& e) {
    return e && e->status() == Status::invalid_argument;
  };
  BOOST_TEST(refused(error_of([&] { a.kernel(*other, "axpy", "axpy"); })));
  BOOST_TEST(refused(error_of([&] { a.scratch(*other, "x", 64); })));
  BOOST_TEST(refused(error_of([&] { a.release(*other); })));
  BOOST_TEST(a.scratch_count() == 1u);
  a.release(*host.gpu);
  // Unlike a standalone cache, release does not unbind it: its memo is its backend's.
  BOOST_TEST(refused(error_of([&] { a.kernel(*other, "axpy", "axpy"); })));
  BOOST_TEST(other->live_alloc_count() == 0u);
  // Making it bound the backend's own cache (whose memo it reads) to the same backend.
  BOOST_TEST(refused(error_of([&] { host.gpu->op_cache().kernel(*other, "axpy", "axpy"); })));

  // A model cache for a backend whose own cache serves another backend is refused.
  Host fresh;
  CountingBackend decorator(*fresh.gpu);
  fresh.gpu->op_cache().kernel(decorator, "axpy", "axpy");  // binds its cache to the decorator
  BOOST_TEST(refused(error_of([&] { OpCache b(*fresh.gpu, "model B"); })));
  BOOST_TEST(fresh.gpu->op_cache().model_cache_count() == 0u);  // the refused one left no trace
  fresh.gpu->op_cache().release(decorator);
}

// 8 threads on one backend: two long-lived models, each served by three threads (hits on the
// shared memo and on the model's own scratch and gates), and two threads that make, use,
// release and destroy model caches over and over. No thread's scratch may change under it, and
// the ledger ends empty.
BOOST_AUTO_TEST_CASE(many_threads_many_model_caches_on_one_backend) {
  Host host;
  GpuBackend& gpu = *host.gpu;
  constexpr std::size_t kBytes = 512;
  constexpr int kServeIters = 3000;
  constexpr int kChurnIters = 150;
  OpCache model_a(gpu, "model A");
  OpCache model_b(gpu, "model B");
  const DevicePtr ax = model_a.scratch(gpu, "x", kBytes);
  const DevicePtr bx = model_b.scratch(gpu, "x", kBytes);
  BOOST_TEST_REQUIRE(usable(gpu, ax, kBytes, 0xA1));
  BOOST_TEST_REQUIRE(usable(gpu, bx, kBytes, 0xB2));

  std::atomic<int> failures{0};
  std::atomic<int> first_true{0};
  std::latch start(8);
  const auto serve = [&](OpCache& model, DevicePtr x, std::uint8_t fill) {
    start.arrive_and_wait();
    for (int i = 0; i < kServeIters; ++i) {
      const KernelHandle g = model.kernel(gpu, "gemm", "gemm_f32");
      const KernelHandle r = model.kernel(gpu, "activation", "bias_relu");
      if (!g || !r || model.scratch(gpu, "x", kBytes) != x) ++failures;
      if (!model.n_tile(g).has_value()) ++failures;
      if (model.first_n("step", 5)) ++first_true;
      if (i % 500 == 0 && !holds(gpu, x, kBytes, fill)) ++failures;
    }
  };
  const auto churn = [&](int t) {
    start.arrive_and_wait();
    for (int i = 0; i < kChurnIters; ++i) {
      const std::uint8_t fill = static_cast<std::uint8_t>(16 * t + i % 16);
      OpCache mine(gpu, "churn " + std::to_string(t));
      Teardown teardown;
      teardown.add(mine);
      const DevicePtr p = mine.scratch(gpu, "x", kBytes);
      mine.scratch(gpu, "x", 2 * kBytes);  // grow: the old buffer retires, still valid
      if (!usable(gpu, p, kBytes, fill)) ++failures;
      if (!mine.once("loaded") || mine.once("loaded")) ++failures;
      if (!mine.kernel(gpu, "axpy", "axpy")) ++failures;
      const DevicePtr w = mine.alloc_with_fallback(gpu, 256, "weights (churn)");
      gpu.free(w);
      teardown.release_all(gpu);
    }
  };
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < 3; ++t) pool.emplace_back(serve, std::ref(model_a), ax, std::uint8_t{0xA1});
    for (int t = 0; t < 3; ++t) pool.emplace_back(serve, std::ref(model_b), bx, std::uint8_t{0xB2});
    for (int t = 0; t < 2; ++t) pool.emplace_back(churn, t);
  }
  BOOST_TEST(failures.load() == 0);
  BOOST_TEST(first_true.load() == 10);  // 5 per model: the gates are the models' own
  BOOST_TEST(holds(gpu, ax, kBytes, 0xA1));
  BOOST_TEST(holds(gpu, bx, kBytes, 0xB2));
  BOOST_TEST(gpu.op_cache().model_cache_count() == 2u);
  model_a.release(gpu);
  model_b.release(gpu);
  BOOST_TEST(gpu.live_alloc_count() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
