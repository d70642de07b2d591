// SPDX-License-Identifier: Apache-2.0
// Pitched 2D copies (ABI 1.3, docs/memory.md "Pitched 2D copies") on host: one
// copy_d2d_2d_async of H rows against H copy_d2d_async of one row each, on one created stream,
// each followed by a synchronize. Both are timed in the same run, alternately (so that the
// machine's state drifts the same for both), and the ratio of the medians is printed:
//   H=<rows> width=<bytes> pitch=<bytes>: 2d <us> us, per-row <us> us, per-row / 2d = <ratio>x
// A plain timed program (no Google Benchmark): `bench_pitched [repetitions]`. GPUPLUG_BENCH_BACKEND
// (a selector, default "host!") runs it on another backend.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <gpuplug/gpuplug.hpp>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    ::setenv("GPUPLUG_PLUGIN_PATH", GPUPLUG_BENCH_PLUGIN_DIR, /*overwrite=*/0);
    const int repetitions = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
    const char* selector = std::getenv("GPUPLUG_BENCH_BACKEND");
    gpuplug::PluginRegistry registry;
    registry.discover();
    const auto gpu = registry.create(selector != nullptr && *selector != '\0' ? selector : "host!");
    constexpr std::size_t width = 256, pitch = 1024;
    std::printf("bench_pitched on %s, %d repetitions, medians\n", std::string(gpu->name()).c_str(),
                repetitions);
    for (const std::size_t rows : {16u, 256u, 4096u}) {
      const gpuplug::DevicePtr src = gpu->alloc(pitch * rows, "bench_pitched src");
      const gpuplug::DevicePtr dst = gpu->alloc(pitch * rows, "bench_pitched dst");
      gpu->memset(src, 1, pitch * rows);
      gpu->memset(dst, 0, pitch * rows);
      gpu->synchronize();
      const gpuplug::Stream stream = gpu->create_stream();
      std::vector<double> two_d, per_row;
      for (int i = 0; i < repetitions; ++i) {
        auto t0 = Clock::now();
        gpu->copy_d2d_2d_async(dst, pitch, src, pitch, width, rows, stream);
        gpu->synchronize(stream);
        auto t1 = Clock::now();
        for (std::size_t r = 0; r < rows; ++r)
          gpu->copy_d2d_async(dst + r * pitch, src + r * pitch, width, stream);
        gpu->synchronize(stream);
        auto t2 = Clock::now();
        two_d.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        per_row.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
      }
      gpu->destroy_stream(stream);
      gpu->free(dst);
      gpu->free(src);
      const double a = median(two_d), b = median(per_row);
      std::printf("H=%zu width=%zu pitch=%zu: 2d %.2f us, per-row %.2f us, per-row / 2d = %.1fx\n",
                  rows, width, pitch, a, b, b / a);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_pitched: %s\n", e.what());
    return 1;
  }
  return 0;
}
