// SPDX-License-Identifier: Apache-2.0
// Conformance cases for concurrency: launches on many streams from many threads, allocations,
// caches.
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "gpuplug/support/text.hpp"
#include "helpers.hpp"

namespace gpuplug::conformance::detail {

namespace {

constexpr unsigned thread_count = 4;

/// Runs body(t) on `threads` threads released together; rethrows the first failure after joining
/// them all, so that a failing thread never leaves others running against a dying backend.
template <class Body>
void run_threads(unsigned threads, Body body) {
  std::atomic<unsigned> ready{0};
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < threads) std::this_thread::yield();
      try {
        body(t);
      } catch (...) {
        std::lock_guard lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  if (first) std::rethrow_exception(first);
}

void concurrent_launches_on_streams(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  constexpr std::uint32_t n = 4096;
  constexpr int rounds = 25;
  constexpr unsigned streams_per_thread = 2;
  run_threads(thread_count, [&](unsigned t) {
    struct Lane {
      Stream stream;
      DeviceBuffer x, y;
      std::vector<float> x0, y0, out;
    };
    std::vector<Lane> lanes(streams_per_thread);
    for (unsigned s = 0; s < streams_per_thread; ++s) {
      Lane& lane = lanes[s];
      // Thread 0's first lane uses the default stream, beside the created (non-blocking) ones.
      lane.stream = (t == 0 && s == 0) ? Stream{} : gpu.create_stream();
      lane.x0.resize(n);
      lane.y0.resize(n);
      for (std::uint32_t i = 0; i < n; ++i) {  // small integers: every sum is exact
        lane.x0[i] = static_cast<float>((i + t * 3 + s) % 13);
        lane.y0[i] = static_cast<float>((i * 5 + t) % 7);
      }
      lane.x = DeviceBuffer(gpu, n * sizeof(float));
      lane.y = DeviceBuffer(gpu, n * sizeof(float));
      gpu.copy_h2d_async(lane.x.ptr(), lane.x0.data(), n * sizeof(float), lane.stream);
      gpu.copy_h2d_async(lane.y.ptr(), lane.y0.data(), n * sizeof(float), lane.stream);
    }
    for (int r = 0; r < rounds; ++r) {
      for (Lane& lane : lanes) launch_axpy(gpu, n, 2.0f, lane.x.ptr(), lane.y.ptr(), lane.stream);
    }
    for (Lane& lane : lanes) {
      lane.out.assign(n, -1.0f);
      gpu.copy_d2h_async(lane.out.data(), lane.y.ptr(), n * sizeof(float), lane.stream);
    }
    for (Lane& lane : lanes) {
      gpu.synchronize(lane.stream);
      for (std::uint32_t i = 0; i < n; ++i) {
        const float want = lane.y0[i] + rounds * 2.0f * lane.x0[i];
        GPUPLUG_CHECK_MSG(lane.out[i] == want, "thread " << t << ", stream "
                                                         << support::hex(lane.stream.value)
                                                         << ", element " << i << ": " << lane.out[i]
                                                         << ", expected " << want);
      }
      if (lane.stream.value != 0) gpu.destroy_stream(lane.stream);
    }
  });
}

void concurrent_alloc_free(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  constexpr unsigned per_thread = 100;
  const LedgerStats base = gpu.ledger_stats();
  run_threads(thread_count, [&](unsigned t) {
    std::vector<std::uint8_t> data, back;
    for (unsigned i = 0; i < per_thread; ++i) {
      const std::size_t bytes = 1 + (std::size_t{i} * 7919 + t * 104729) % 65536;
      data.resize(bytes);
      back.assign(bytes, 0);
      for (std::size_t j = 0; j < bytes; ++j) data[j] = static_cast<std::uint8_t>(j + i + t);
      DeviceBuffer b(gpu, bytes);
      gpu.copy_h2d(b.ptr(), data.data(), bytes);
      gpu.copy_d2h(back.data(), b.ptr(), bytes);
      GPUPLUG_CHECK_MSG(back == data, "thread " << t << " read back other bytes than it wrote ("
                                                << bytes << " bytes)");
    }
  });
  const LedgerStats after = gpu.ledger_stats();
  GPUPLUG_CHECK_EQ(after.live_count, base.live_count);
  GPUPLUG_CHECK_EQ(after.live_bytes, base.live_bytes);
  GPUPLUG_CHECK_EQ(after.total_allocs, base.total_allocs + thread_count * per_thread);
  GPUPLUG_CHECK_EQ(after.total_frees, base.total_frees + thread_count * per_thread);
}

void concurrent_opcache(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  OpCache& cache = gpu.op_cache();
  constexpr int iterations = 2000;
  constexpr std::uint64_t gate = 10;
  const std::pair<const char*, const char*> keys[] = {
      {"axpy", "axpy"}, {"gemm", "gemm_f32"}, {"gemm", "gemm_a_e4m3"}, {"e4m3", "cast_f32_e4m3"}};
  std::atomic<int> once_true{0}, gate_true{0}, shape_true{0};
  std::vector<std::array<KernelHandle, 4>> seen(thread_count);
  std::vector<DevicePtr> scratch(thread_count);
  run_threads(thread_count, [&](unsigned t) {
    const std::string tag = "conformance_t" + std::to_string(t);
    for (int i = 0; i < iterations; ++i) {
      const auto& [module, func] = keys[(i + t) % 4];
      const KernelHandle h = cache.kernel(gpu, module, func);
      auto& slot = seen[t][(i + t) % 4];
      GPUPLUG_CHECK_MSG(!slot || slot == h,
                        "OpCache::kernel gave two handles for " << module << "::" << func);
      slot = h;
      const DevicePtr p = cache.scratch(gpu, tag, 4096);
      GPUPLUG_CHECK_MSG(!scratch[t] || scratch[t] == p, "scratch moved without growing");
      scratch[t] = p;
      if (cache.once("conformance_once")) once_true.fetch_add(1);
      if (cache.first_n("conformance_gate", gate)) gate_true.fetch_add(1);
      if (cache.first_shape("conformance_gemm", 64, 64, static_cast<std::uint64_t>(i % 8)))
        shape_true.fetch_add(1);
    }
  });
  GPUPLUG_CHECK_EQ(once_true.load(), 1);
  GPUPLUG_CHECK_EQ(gate_true.load(), static_cast<int>(gate));
  GPUPLUG_CHECK_EQ(shape_true.load(), 8);
  for (unsigned t = 1; t < thread_count; ++t) GPUPLUG_CHECK(seen[t] == seen[0]);
  GPUPLUG_CHECK_EQ(cache.kernel_count(), 4u);
  GPUPLUG_CHECK_EQ(cache.scratch_count(), std::size_t{thread_count});
  GPUPLUG_CHECK_EQ(gpu.ledger_stats().live_count, std::uint64_t{thread_count});
}

void concurrent_module_loads(Context& ctx) {
  GpuBackend& gpu = ctx.backend();
  const auto image = ctx.module_image("axpy");
  run_threads(thread_count, [&](unsigned t) {
    const std::string name = "axpy_thread_" + std::to_string(t);
    gpu.load_module(name, image);
    GPUPLUG_CHECK(gpu.has_module(name));
    const KernelHandle f = gpu.kernel(name, "axpy");
    const Stream s = gpu.create_stream();
    const std::vector<float> x(300, static_cast<float>(t + 1)), y(300, 1.0f);
    DeviceBuffer dx = to_device(gpu, x), dy = to_device(gpu, y);
    gpu.launch_args(f, Dim3{2, 1, 1}, Dim3{256, 1, 1}, 0, s, std::uint32_t{300}, 4.0f,
                    dx.ptr().value, dy.ptr().value);
    std::vector<float> out(300);
    gpu.copy_d2h_async(out.data(), dy.ptr(), 300 * sizeof(float), s);
    gpu.synchronize(s);
    gpu.destroy_stream(s);
    const float want = 1.0f + 4.0f * static_cast<float>(t + 1);
    GPUPLUG_CHECK_MSG(std::all_of(out.begin(), out.end(), [&](float v) { return v == want; }),
                      "axpy from module " << name << " gave wrong results");
  });
  for (unsigned t = 0; t < thread_count; ++t)
    GPUPLUG_CHECK(gpu.has_module("axpy_thread_" + std::to_string(t)));
}

const Case cases[] = {
    {"concurrent_launches_on_streams",
     "axpy launched on 8 streams (one the default) from 4 threads gives exact results",
     concurrent_launches_on_streams},
    {"concurrent_alloc_free",
     "alloc, copy and free from 4 threads keep every byte and the ledger exact",
     concurrent_alloc_free},
    {"concurrent_opcache", "OpCache from 4 threads: one handle per key, once once, first_n n times",
     concurrent_opcache},
    {"concurrent_module_loads", "modules loaded from bytes by 4 threads at once all load and run",
     concurrent_module_loads},
};

}  // namespace

std::span<const Case> concurrency_cases() { return cases; }

}  // namespace gpuplug::conformance::detail
