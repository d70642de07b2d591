// SPDX-License-Identifier: Apache-2.0
// gemm_f32 on host against OpenBLAS's cblas_sgemm, in one run, on the same buffers (the host
// backend's device memory is host memory), at M = N = K = 64 ... 2048 and at odd shapes. Rows:
//  - `kernel 1t`: the gemm module's blocks called on this thread alone, in grid order (dlopen,
//    no dispatch), against OpenBLAS with 1 thread;
//  - `api threads=T`: a host backend created with the option threads=T, through GpuBackend::launch
//    and synchronize (the launching thread runs blocks too: T workers + 1), against OpenBLAS with
//    min(T + 1, CPUs) threads, the number of threads the grid runs on;
//  - the same for gemm_a_e4m3 (its ratio is to gemm_f32's time).
// Each figure is the best (and the median) of kTrials timed trials, the two libraries
// interleaved trial by trial so that load from elsewhere hits both alike; on a shared machine the
// best is the figure that is least the other users'. One-thread rows count this thread's CPU
// time, the others wall time. Peak: the FLOP/s of a loop of
// independent FMAs on registers (AVX-512 or AVX2, as the kernel in use), measured on one thread
// here in CPU time, times the threads; the CPU's MHz from /proc/cpuinfo is printed beside it.
// GPUPLUG_HOST_GEMM_ISA=avx512|avx2|portable forces the kernel (docs/kernels.md); --module PATH
// measures another build of the gemm module (an older one, for a before/after table), loaded
// with load_module_file in the backends; --quick runs 256, 512 and 1024 only; --shape N or
// --shape MxNxK (repeatable) runs those shapes only.
#include <cblas.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <functional>
#include <gpuplug/gpuplug.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps(), which -Wmaybe-uninitialized
// reports at every use; nothing here reads an undefined lane.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

extern "C" void openblas_set_num_threads(int);

namespace {

constexpr int kTrials = 11;

using Clock = std::chrono::steady_clock;

struct Timing {
  double median, best;  // seconds per call
};

/// Seconds of CPU time this thread has used: what a one-thread row times, so that the time the
/// thread spends descheduled (the machine is shared) is not counted.
double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
double wall_seconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

/// Times `calls` calls of each function per trial, interleaved, over kTrials trials, on this
/// thread's CPU clock (`one_thread`) or the wall clock. After a trial of `b` (OpenBLAS) with
/// `b_threads` > 1 it sleeps 200 ms: OpenBLAS's idle threads spin for about 2^28 cycles after a
/// call, which would take the CPUs from the trial of `a` that follows. Each timed batch follows
/// one untimed call of the same function, so that neither library's first call after the other's
/// trial (or the sleep) pays for waking its worker threads and the CPUs' clocks: a trial times
/// the steady state of back-to-back calls, as in a loop of GEMMs.
std::pair<Timing, Timing> time_pair(const std::function<void()>& a, const std::function<void()>& b,
                                    int calls, bool one_thread, unsigned b_threads) {
  const auto now = one_thread ? thread_seconds : wall_seconds;
  auto settle = [&] {
    if (b_threads > 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  };
  std::vector<double> ta, tb;
  a();  // warm: first touches, kernel resolution, OpenBLAS's buffers
  b();
  settle();
  for (int t = 0; t < kTrials; ++t) {
    for (int which = 0; which < 2; ++which) {
      const auto& f = which == 0 ? a : b;
      f();  // untimed: wakes the library's threads (asleep after the settle or the other's trial)
      const double start = now();
      for (int i = 0; i < calls; ++i) f();
      (which == 0 ? ta : tb).push_back((now() - start) / calls);
    }
    settle();
  }
  auto stat = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return Timing{v[v.size() / 2], v.front()};
  };
  return {stat(ta), stat(tb)};
}

#if defined(__x86_64__)
// 16 independent chains of FMAs on registers, 2 per chain an iteration: the core's FMA
// throughput, which no GEMM can pass. Returns FLOP/s.
__attribute__((target("avx512f"))) double peak512(std::uint64_t iters) {
  __m512 acc[16];
  const __m512 x = _mm512_set1_ps(1.0f), y = _mm512_set1_ps(0.999f);
  for (auto& v : acc) v = x;
  const double start = thread_seconds();
  for (std::uint64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (auto& v : acc) v = _mm512_fmadd_ps(v, y, x);
#pragma GCC unroll 16
    for (auto& v : acc) v = _mm512_fmadd_ps(v, y, x);
  }
  const double s = thread_seconds() - start;
  __m512 sum = acc[0];
  for (int i = 1; i < 16; ++i) sum = _mm512_add_ps(sum, acc[i]);
  if (_mm512_reduce_add_ps(sum) == 12345.0f) std::puts("");  // keeps the loop
  return 2.0 * 32.0 * 16.0 * static_cast<double>(iters) / s;
}
__attribute__((target("avx2,fma"))) double peak256(std::uint64_t iters) {
  __m256 acc[12];
  const __m256 x = _mm256_set1_ps(1.0f), y = _mm256_set1_ps(0.999f);
  for (auto& v : acc) v = x;
  const double start = thread_seconds();
  for (std::uint64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (auto& v : acc) v = _mm256_fmadd_ps(v, y, x);
#pragma GCC unroll 12
    for (auto& v : acc) v = _mm256_fmadd_ps(v, y, x);
  }
  const double s = thread_seconds() - start;
  __m256 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm256_add_ps(sum, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, sum);
  if (out[0] == 12345.0f) std::puts("");  // keeps the loop
  return 2.0 * 24.0 * 8.0 * static_cast<double>(iters) / s;
}
#endif

/// One thread's peak FLOP/s for the kernel `isa` (2 AVX-512, 1 AVX2): the best of 5 runs.
double measured_peak(std::uint32_t isa) {
  double best = 0.0;
#if defined(__x86_64__)
  for (int i = 0; i < 5; ++i)
    best = std::max(best, isa == 2 ? peak512(1'000'000) : isa == 1 ? peak256(1'000'000) : 0.0);
#else
  (void)isa;
#endif
  return best;
}

std::string cpu_mhz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

struct Shape {
  std::uint32_t m, n, k;
};

/// The gemm module's kernel called block by block on this thread (the executor's order).
struct DirectModule {
  void* handle = nullptr;
  using Fn = void (*)(const gpuplug_host_block_t*, void* const*);
  Fn f32 = nullptr, e4m3 = nullptr;
  std::uint32_t n_tile = 0, isa = 0;

  explicit DirectModule(const std::string& path) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) throw std::runtime_error(std::string("dlopen: ") + dlerror());
    f32 = reinterpret_cast<Fn>(dlsym(handle, "gemm_f32"));
    e4m3 = reinterpret_cast<Fn>(dlsym(handle, "gemm_a_e4m3"));
    const auto* tile = static_cast<const std::uint32_t*>(dlsym(handle, "gemm_f32_n_tile"));
    const auto* isa_sym = static_cast<const std::uint32_t*>(dlsym(handle, "gemm_host_isa"));
    if (f32 == nullptr || e4m3 == nullptr || tile == nullptr)
      throw std::runtime_error(path + " lacks gemm_f32, gemm_a_e4m3 or gemm_f32_n_tile");
    n_tile = *tile;
    isa = isa_sym != nullptr ? *isa_sym : 0;  // a module from before the kernels: portable
  }
  void run(Fn fn, Shape s, const float* a, const float* b, float* c) const {
    std::uint64_t pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b),
                  pc = reinterpret_cast<std::uintptr_t>(c);
    void* params[] = {&s.m, &s.n, &s.k, &pa, &pb, &pc};
    gpuplug_host_block_t blk{};
    blk.grid_dim = {(s.n + n_tile - 1) / n_tile, (s.m + 15) / 16, 1};
    blk.block_dim = {16, 16, 1};
    for (std::uint32_t y = 0; y < blk.grid_dim.y; ++y)
      for (std::uint32_t x = 0; x < blk.grid_dim.x; ++x) {
        blk.block_idx = {x, y, 0};
        fn(&blk, params);
      }
  }
};

// The largest dimension --shape takes: three of them stay far inside a 32-bit grid and the
// buffers inside this machine's memory.
constexpr unsigned kMaxDim = 8192;

/// "N" (M = N = K) or "MxNxK", each from 1 to kMaxDim; nullopt for anything else.
std::optional<Shape> parse_shape(const char* text) {
  std::uint32_t d[3] = {0, 0, 0};
  int parsed = 0;
  const char* p = text;
  for (;;) {
    if (parsed == 3 || *p < '0' || *p > '9') return {};  // no sign, space or fourth number
    char* end = nullptr;
    errno = 0;
    const unsigned long v = std::strtoul(p, &end, 10);
    if (errno != 0 || v == 0 || v > kMaxDim) return {};
    d[parsed++] = static_cast<std::uint32_t>(v);
    if (*end == '\0') break;
    if (*end != 'x') return {};
    p = end + 1;
  }
  if (parsed == 1) return Shape{d[0], d[0], d[0]};
  if (parsed != 3) return {};
  return Shape{d[0], d[1], d[2]};
}

int calls_for(Shape s) {
  const double flop = 2.0 * s.m * s.n * s.k;
  return std::max(1, static_cast<int>(1e8 / flop));  // a trial of about 1 ms to 20 ms
}

void row(const char* what, Shape s, const Timing& ours, const Timing& blas, double peak) {
  const double flop = 2.0 * s.m * s.n * s.k;
  const double g = flop / ours.best / 1e9, gb = flop / blas.best / 1e9;
  std::printf("%-20s %5u x %5u x %5u  %7.1f (med %6.1f)  %7.1f (med %6.1f)  %5.2f (med %4.2f)  %4.0f%%\n",
              what, s.m, s.n, s.k, g, flop / ours.median / 1e9, gb, flop / blas.median / 1e9,
              g / gb, blas.median / ours.median, peak > 0 ? 100.0 * g * 1e9 / peak : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    bool quick = false;
    std::string module = GPUPLUG_BENCH_GEMM_MODULE;
    std::vector<Shape> asked;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--quick") == 0) {
        quick = true;
      } else if (std::strcmp(argv[i], "--module") == 0 && i + 1 < argc) {
        module = argv[++i];
      } else if (std::strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
        const std::optional<Shape> shape = parse_shape(argv[++i]);
        if (!shape) {
          std::fprintf(stderr, "bench_gemm: --shape '%s': not N or MxNxK with each from 1 to %u\n",
                       argv[i], kMaxDim);
          return 2;
        }
        asked.push_back(*shape);
      } else {
        std::fprintf(stderr,
                     "usage: bench_gemm [--quick] [--shape N|MxNxK]... [--module PATH]  (bad "
                     "argument '%s')\n",
                     argv[i]);
        return 2;
      }
    }
    ::setenv("GPUPLUG_PLUGIN_PATH", GPUPLUG_BENCH_PLUGIN_DIR, /*overwrite=*/0);
    ::unsetenv("GPUPLUG_LAYERS");
    gpuplug::set_log_level(gpuplug::LogLevel::warning);
    const DirectModule direct(module);
    const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    const double peak1 = measured_peak(direct.isa);
    const char* isa_name[] = {"portable", "avx2", "avx512"};
    std::printf("module %s\n", module.c_str());
    std::printf("kernel %s (gemm_host_isa %u), n_tile %u; %u CPUs at %s MHz (/proc/cpuinfo); "
                "measured peak %.1f GFLOP/s per thread (%s FMA loop)\n",
                isa_name[direct.isa < 3 ? direct.isa : 0], direct.isa, direct.n_tile, cpus,
                cpu_mhz().c_str(), peak1 / 1e9, direct.isa == 2 ? "AVX-512" : "AVX2");
    std::printf("GFLOP/s: best of %d trials (median in brackets); ratio = gpuplug / OpenBLAS; "
                "%% of peak = gpuplug's best / (peak x threads)\n", kTrials);
    std::printf("%-20s %-21s  %-20s  %-20s  %-16s  %5s\n", "row", "M x N x K", "gpuplug",
                "OpenBLAS", "ratio", "peak");

    std::vector<Shape> shapes = {{64, 64, 64},       {256, 256, 256},   {512, 512, 512},
                                 {1024, 1024, 1024}, {2048, 2048, 2048}, {17, 33, 100},
                                 {100, 255, 33},     {255, 255, 255},   {1000, 1000, 1000},
                                 {333, 777, 555}};
    if (quick) shapes = {{256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}};
    if (!asked.empty()) shapes = asked;

    gpuplug::PluginRegistry registry;
    registry.discover();
    std::vector<std::shared_ptr<gpuplug::GpuBackend>> gpus;
    for (const unsigned t : {1u, 2u}) {
      gpus.push_back(registry.create("host!", {{"threads", std::to_string(t)}}));
      gpus.back()->load_module_file("bench_gemm", module);
    }

    for (const Shape s : shapes) {
      std::mt19937 gen(s.m * 31 + s.n * 7 + s.k);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      const int calls = calls_for(s);
      for (std::size_t gi = 0; gi <= gpus.size(); ++gi) {
        // Row 0: the module alone on this thread; rows 1..: through a backend.
        gpuplug::GpuBackend* gpu = gi == 0 ? nullptr : gpus[gi - 1].get();
        gpuplug::GpuBackend& mem = gpu != nullptr ? *gpu : *gpus[0];
        const std::size_t na = std::size_t{s.m} * s.k, nb = std::size_t{s.k} * s.n,
                          nc = std::size_t{s.m} * s.n;
        const gpuplug::DevicePtr da = mem.alloc(na * 4, "bench_gemm A");
        const gpuplug::DevicePtr db = mem.alloc(nb * 4, "bench_gemm B");
        const gpuplug::DevicePtr dc = mem.alloc(nc * 4, "bench_gemm C");
        float* a = da.as<float>();
        float* b = db.as<float>();
        float* c = dc.as<float>();
        for (std::size_t i = 0; i < na; ++i) a[i] = dist(gen);
        for (std::size_t i = 0; i < nb; ++i) b[i] = dist(gen);
        std::memset(c, 0, nc * 4);
        const unsigned threads = gi == 0 ? 1u : std::min(cpus, static_cast<unsigned>(gi) + 1u);
        auto blas = [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(s.m),
                      static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, a, static_cast<int>(s.k),
                      b, static_cast<int>(s.n), 0.0f, c, static_cast<int>(s.n));
        };
        openblas_set_num_threads(static_cast<int>(threads));
        std::function<void()> f32, e4m3;
        if (gpu == nullptr) {
          f32 = [&] { direct.run(direct.f32, s, a, b, c); };
          e4m3 = [&] { direct.run(direct.e4m3, s, a, b, c); };
        } else {
          gpuplug::OpCache& op = gpu->op_cache();
          const gpuplug::KernelHandle hf = op.kernel(*gpu, "bench_gemm", "gemm_f32");
          const gpuplug::KernelHandle he = op.kernel(*gpu, "bench_gemm", "gemm_a_e4m3");
          const std::uint32_t tile = op.n_tile(hf).value_or(16);
          const gpuplug::Dim3 grid{(s.n + tile - 1) / tile, (s.m + 15) / 16, 1};
          auto launch = [gpu, grid, s, da, db, dc](gpuplug::KernelHandle h) {
            gpu->launch_args(h, grid, {16, 16, 1}, 0, {}, s.m, s.n, s.k, da.value, db.value,
                             dc.value);
            gpu->synchronize();
          };
          f32 = [launch, hf] { launch(hf); };
          e4m3 = [launch, he] { launch(he); };
        }
        const std::string name = gi == 0 ? "kernel 1t" : "api threads=" + std::to_string(gi);
        const bool one = gi == 0;
        const auto [ours, theirs] = time_pair(f32, blas, calls, one, threads);
        row((name + " f32").c_str(), s, ours, theirs, peak1 * threads);
        const auto [oe, of] = time_pair(e4m3, f32, calls, one, 1);
        const double flop = 2.0 * s.m * s.n * s.k;
        std::printf("%-20s %5u x %5u x %5u  %7.1f (med %6.1f)  gemm_f32 %7.1f      %5.2f (med %4.2f)\n",
                    (name + " a_e4m3").c_str(), s.m, s.n, s.k, flop / oe.best / 1e9,
                    flop / oe.median / 1e9, flop / of.best / 1e9, of.best / oe.best,
                    of.median / oe.median);
        mem.free(da);
        mem.free(db);
        mem.free(dc);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gemm: %s\n", e.what());
    return 1;
  }
}
