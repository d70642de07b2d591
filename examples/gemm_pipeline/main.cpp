// SPDX-License-Identifier: Apache-2.0
// gemm_pipeline: a verified two-layer MLP on the backend the registry picks, through its OpCache.
//
//   H = relu(X * W1 + b1)   X: m x k, W1: k x n   route gemm_f32
//   Y = relu(H * W2 + b2)   W2: n x n             route gemm_a_e4m3 where advertised, else gemm_f32
//
// Every kernel is resolved through the backend's OpCache each step (hits after the first), the
// GEMM grid comes from the kernel's published n_tile, activations live in OpCache scratch and the
// weights come from alloc_with_fallback. Each step is checked against a CPU reference; the run
// ends with Teardown::release_all and an empty ledger. docs/gemm-pipeline.md explains it all.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <gpuplug/gpuplug.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "options.hpp"
#include "reference.hpp"

namespace gemm_pipeline {
namespace {

using gpuplug::DevicePtr;
using gpuplug::Dim3;
using gpuplug::GpuBackend;
using gpuplug::KernelHandle;
using gpuplug::LogLevel;
using gpuplug::OpCache;

constexpr int exit_success = 0;
constexpr int exit_verification = 1;
constexpr int exit_usage = 2;
constexpr int exit_runtime = 3;

// Tolerances on the error measure of reference.hpp (|got - want| / sum|a*b|).
// f32 route: f32 summation over K terms is off by at most K*2^-24 (1.5e-5 at K = 256) and
// typically ~sqrt(K)*2^-24; 1e-4 leaves margin for any summation order or FMA use.
constexpr double f32_tolerance = 1e-4;
// E4M3 route: the reference rounds the *backend's own* H through kernels/common/e4m3.h, bit for
// bit as the kernel must, so the E4M3 quantisation (up to 1/16 relative per element) cancels out
// and only accumulation error remains. That lets the tolerance stay tight; it is still ten times
// the f32 one because the route exists for vendor FP8 paths, whose accumulators may carry fewer
// bits than an f32 FMA chain. Without the matched rounding no tight tolerance would hold: the
// summary reports that quantisation effect separately, for information.
constexpr double e4m3_tolerance = 1e-3;
// Grid rule of the gemm kernels when a module publishes no <func>_n_tile.
constexpr std::uint32_t default_n_tile = 16;
constexpr std::uint32_t gemm_block_rows = 16;
constexpr std::uint32_t elementwise_block = 256;

std::string format_bytes(std::uint64_t bytes) {
  char buf[64];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " B", bytes);
  } else if (bytes < (std::uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  } else if (bytes < (std::uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GiB",
                  static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  }
  return buf;
}

std::string format_double(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

/// SplitMix64: a tiny generator whose output is the same with every standard library, so a run's
/// data (and thus its figures) are reproducible everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  /// Uniform in [lo, hi).
  float uniform(float lo, float hi) {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float unit = static_cast<float>(z >> 40) * 0x1.0p-24f;  // [0, 1)
    return lo + (hi - lo) * unit;
  }

 private:
  std::uint64_t state_;
};

void fill(std::vector<float>& v, Rng& rng, float lo, float hi) {
  for (float& x : v) x = rng.uniform(lo, hi);
}

/// The model on the host: the source of the uploads and the reference's operands.
struct HostModel {
  std::vector<float> w1, b1, w2, b2;
  HostModel(std::uint32_t n, std::uint32_t k)
      : w1(std::size_t{k} * n), b1(n), w2(std::size_t{n} * n), b2(n) {
    Rng rng(0x5EED);
    // 1/sqrt(fan_in) keeps pre-activations O(1) for any size, so errors compare across shapes.
    const float s1 = 1.0f / std::sqrt(static_cast<float>(k));
    const float s2 = 1.0f / std::sqrt(static_cast<float>(n));
    fill(w1, rng, -s1, s1);
    fill(b1, rng, -0.1f, 0.1f);
    fill(w2, rng, -s2, s2);
    fill(b2, rng, -0.1f, 0.1f);
  }
};

/// Where a weight buffer landed.
enum class Placement {
  device,     // device memory
  fell_back,  // this allocation hit out-of-memory and set the backend's latch
  latched,    // the latch was already set: straight to managed memory
};

/// The model's weights on one backend: allocated with OpCache::alloc_with_fallback, so they spill
/// into managed memory once device memory runs out. Freed only by release (via Teardown), never
/// by a destructor: a resource must go back while its backend is alive.
class Weights final : public gpuplug::ModelResource<GpuBackend> {
 public:
  struct Buffer {
    const char* name = "";
    DevicePtr ptr;
    std::size_t bytes = 0;
    Placement placement = Placement::device;
  };

  /// Allocates and uploads w1, b1, w2, b2 in that order. On failure what was allocated stays
  /// recorded here, so release() frees it.
  void load(GpuBackend& gpu, const HostModel& host) {
    OpCache& op = gpu.op_cache();
    const std::array<const std::vector<float>*, 4> sources{&host.w1, &host.b1, &host.w2, &host.b2};
    const std::array<const char*, 4> names{"w1", "b1", "w2", "b2"};
    for (std::size_t i = 0; i < buffers_.size(); ++i) {
      Buffer& b = buffers_[i];
      b.name = names[i];
      b.bytes = sources[i]->size() * sizeof(float);
      const bool was_latched = op.alloc_fell_back();
      b.ptr = op.alloc_with_fallback(gpu, b.bytes);
      b.placement = was_latched            ? Placement::latched
                    : op.alloc_fell_back() ? Placement::fell_back
                                           : Placement::device;
      gpu.copy_h2d(b.ptr, sources[i]->data(), b.bytes);
    }
  }

  const std::array<Buffer, 4>& buffers() const noexcept { return buffers_; }
  DevicePtr w1() const noexcept { return buffers_[0].ptr; }
  DevicePtr b1() const noexcept { return buffers_[1].ptr; }
  DevicePtr w2() const noexcept { return buffers_[2].ptr; }
  DevicePtr b2() const noexcept { return buffers_[3].ptr; }

  std::string_view label() const override { return "weights"; }

  /// Frees every buffer, keeps going past a failed free, forgets them all (so a second call is
  /// harmless), then throws one Error naming the buffers that failed.
  void release(GpuBackend& gpu) override {
    std::string failures;
    for (Buffer& b : buffers_) {
      const DevicePtr p = std::exchange(b.ptr, DevicePtr{});
      if (!p) continue;
      try {
        gpu.free(p);
      } catch (const std::exception& e) {
        failures += (failures.empty() ? "" : "; ") + std::string(b.name) + ": " + e.what();
      }
    }
    if (!failures.empty()) {
      throw gpuplug::Error(gpuplug::Status::internal, std::string(gpu.name()),
                           "freeing weights failed: " + failures);
    }
  }

 private:
  std::array<Buffer, 4> buffers_;
};

/// The kernel layer 2 runs: the A-to-E4M3 GEMM when the backend's gemm module has it and it
/// advertises a_e4m3, else the plain f32 GEMM.
struct Route {
  const char* func = "gemm_f32";
  bool e4m3 = false;
};

/// Decided once per backend, before the first step (a failed resolution memoizes nothing, so
/// retrying it every step would ask the backend every step).
Route choose_layer2_route(GpuBackend& gpu) {
  OpCache& op = gpu.op_cache();
  try {
    const KernelHandle h = op.kernel(gpu, "gemm", "gemm_a_e4m3");
    if (op.a_e4m3(h)) return {"gemm_a_e4m3", true};
    gpuplug::log(LogLevel::info, gpu.name(),
                 "gemm::gemm_a_e4m3 does not advertise a_e4m3; layer 2 uses gemm_f32");
  } catch (const gpuplug::Error& e) {
    if (e.status() != gpuplug::Status::not_found) throw;
    gpuplug::log(LogLevel::info, gpu.name(),
                 "gemm::gemm_a_e4m3 unavailable (" + e.message() + "); layer 2 uses gemm_f32");
  }
  return {};
}

std::uint32_t ceil_div(std::uint32_t a, std::uint32_t b) { return (a + b - 1) / b; }

/// The kernel contract's GEMM grid: ceil(N / n_tile) x ceil(M / 16) blocks of 16 x 16 threads.
Dim3 gemm_grid(const OpCache& op, KernelHandle h, std::uint32_t M, std::uint32_t N) {
  std::uint32_t tile = op.n_tile(h).value_or(default_n_tile);
  if (tile == 0) tile = default_n_tile;  // a module publishing 0 would divide by zero
  return {ceil_div(N, tile), ceil_div(M, gemm_block_rows), 1};
}

/// Running maxima of one route's error measure.
struct RouteStats {
  std::string name;
  double tolerance = 0;
  LayerError worst;
  std::optional<std::pair<std::uint32_t, LayerError>> first_failure;  // (step, element)

  void add(std::uint32_t step, const LayerError& e) {
    if (e.rel > worst.rel) worst = e;
    if (!(e.rel <= tolerance) && !first_failure) first_failure = {step, e};  // NaN fails too
  }
};

/// Everything a run holds. Host buffers are sized once, so steps after the first allocate
/// nothing on the host either.
class Pipeline {
 public:
  Pipeline(GpuBackend& gpu, const CommandLine& cl)
      : gpu_(gpu),
        op_(gpu.op_cache()),
        m_(cl.m),
        n_(cl.n),
        k_(cl.k),
        steps_(cl.steps),
        host_(cl.n, cl.k),
        x_(std::size_t{m_} * k_),
        h_(std::size_t{m_} * n_),
        y_(std::size_t{m_} * n_),
        interactive_(isatty(fileno(stdout)) != 0) {}

  /// Returns the process exit status. Releases everything through the Teardown on every path.
  int run(const std::string& selector_note) {
    gpuplug::Teardown teardown;
    teardown.add(op_);       // released last: scratch was reserved first
    teardown.add(weights_);  // released first
    try {
      setup();
      for (std::uint32_t s = 1; s <= steps_; ++s) {
        step(s);
        if (s == 1) allocs_after_warmup_ = gpu_.ledger_stats().total_allocs;
      }
      allocs_at_end_ = gpu_.ledger_stats().total_allocs;
      if (interactive_) std::printf("\n");
    } catch (...) {
      if (interactive_) std::printf("\n");
      try {
        teardown.release_all(gpu_);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gemm_pipeline: teardown after the failure also failed: %s\n",
                     e.what());
      }
      throw;
    }
    std::ostringstream cache_state;
    cache_state << op_;
    teardown.release_all(gpu_);  // throws (exit 3) naming each resource that failed
    const gpuplug::LedgerStats at_exit = gpu_.ledger_stats();
    return summarize(selector_note, cache_state.str(), at_exit);
  }

 private:
  void setup() {
    // Layer 2's route first: resolving it loads the gemm module.
    route2_ = choose_layer2_route(gpu_);
    l1_ = {"gemm_f32", tolerance(f32_tolerance, k_)};
    l2_ = {route2_.func, tolerance(route2_.e4m3 ? e4m3_tolerance : f32_tolerance, n_)};
    route1_key_ = "route:gemm_f32";
    route2_key_ = std::string("route:") + route2_.func;

    // Activations are reserved before the weights: scratch is device memory only, while the
    // weights can spill into managed memory, so under a tight --device-memory-limit the
    // activations get the device memory and the weights fall back.
    op_.scratch(gpu_, "x", x_.size() * sizeof(float));
    op_.scratch(gpu_, "h", h_.size() * sizeof(float));
    op_.scratch(gpu_, "y", y_.size() * sizeof(float));
    const std::uint64_t scratch_bytes = (x_.size() + h_.size() + y_.size()) * sizeof(float);

    weights_.load(gpu_, host_);
    std::uint64_t weight_bytes = 0;
    for (const auto& b : weights_.buffers()) weight_bytes += b.bytes;
    std::printf("memory: activations %s in op scratch (device); weights %s\n",
                format_bytes(scratch_bytes).c_str(), format_bytes(weight_bytes).c_str());
    if (op_.alloc_fell_back()) {
      for (const auto& b : weights_.buffers()) {
        const char* where =
            b.placement == Placement::device ? "device memory"
            : b.placement == Placement::fell_back
                ? "managed memory (device out of memory: fell back to managed memory, latch set)"
                : "managed memory (latched: straight to managed)";
        std::printf("  weight %-2s %10s -> %s\n", b.name, format_bytes(b.bytes).c_str(), where);
      }
      if (op_.once("alloc-fallback")) {
        gpuplug::log(LogLevel::warning, gpu_.name(),
                     "weights do not fit in device memory: they now live in managed memory, and "
                     "every later allocation through alloc_with_fallback goes straight there");
      }
    }
    std::fflush(stdout);
  }

  void step(std::uint32_t s) {
    // A fresh input batch per step, so every step's check is a new one.
    Rng rng(0xDA7A0000ull + s);
    fill(x_, rng, -1.0f, 1.0f);

    // Hits after the first step: no lock, no allocation.
    const KernelHandle gemm1 = op_.kernel(gpu_, "gemm", "gemm_f32");
    const KernelHandle gemm2 = op_.kernel(gpu_, "gemm", route2_.func);
    const KernelHandle bias_relu = op_.kernel(gpu_, "activation", "bias_relu");
    const DevicePtr x = op_.scratch(gpu_, "x", x_.size() * sizeof(float));
    const DevicePtr h = op_.scratch(gpu_, "h", h_.size() * sizeof(float));
    const DevicePtr y = op_.scratch(gpu_, "y", y_.size() * sizeof(float));
    gpu_.copy_h2d(x, x_.data(), x_.size() * sizeof(float));

    const Dim3 block16{16, 16, 1};
    const Dim3 elementwise{ceil_div(m_ * n_, elementwise_block), 1, 1};
    const Dim3 block256{elementwise_block, 1, 1};
    const Dim3 grid1 = gemm_grid(op_, gemm1, m_, n_);
    const Dim3 grid2 = gemm_grid(op_, gemm2, m_, n_);
    log_route(route1_key_, gemm1, grid1, m_, n_, k_);
    log_route(route2_key_, gemm2, grid2, m_, n_, n_);

    const auto t0 = std::chrono::steady_clock::now();
    gpu_.launch_args(gemm1, grid1, block16, 0, {}, m_, n_, k_, x.value, weights_.w1().value,
                     h.value);
    gpu_.launch_args(bias_relu, elementwise, block256, 0, {}, m_, n_, weights_.b1().value, h.value);
    gpu_.launch_args(gemm2, grid2, block16, 0, {}, m_, n_, n_, h.value, weights_.w2().value,
                     y.value);
    gpu_.launch_args(bias_relu, elementwise, block256, 0, {}, m_, n_, weights_.b2().value, y.value);
    gpu_.synchronize();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s == 1) first_seconds_ = seconds;
    if (s > 1) steady_seconds_ += seconds;

    verify(s, h, y);
    progress(s, seconds);
  }

  /// One info line per (route, shape) per backend: first_shape de-duplicates across steps.
  /// `key` is "route:<func>", built once in setup so that steady-state steps allocate nothing.
  void log_route(std::string_view key, KernelHandle hk, Dim3 grid, std::uint32_t M, std::uint32_t N,
                 std::uint32_t K) {
    if (!op_.first_shape(key, M, N, K)) return;
    const std::optional<std::uint32_t> tile = op_.n_tile(hk);
    std::ostringstream msg;
    msg << "route " << key.substr(key.find(':') + 1) << ": C[" << M << "x" << N << "] = A[" << M
        << "x" << K << "] * B[" << K << "x" << N << "]"
        << (op_.a_e4m3(hk) ? ", A rounded to E4M3" : "") << ", n_tile "
        << tile.value_or(default_n_tile) << (tile ? "" : " (default: none published)") << ", grid "
        << grid.x << "x" << grid.y << " of 16x16";
    gpuplug::log(LogLevel::info, gpu_.name(), msg.str());
  }

  void verify(std::uint32_t s, DevicePtr h, DevicePtr y) {
    gpu_.copy_d2h(h_.data(), h, h_.size() * sizeof(float));
    gpu_.copy_d2h(y_.data(), y, y_.size() * sizeof(float));
    l1_.add(s, check_layer(x_, host_.w1, host_.b1, h_, m_, n_, k_, acc_, mag_));
    // Layer 2's reference starts from the backend's own H, so each route is judged on its own;
    // on the E4M3 route it is rounded exactly as the kernel rounds its A operand.
    if (route2_.e4m3) {
      round_through_e4m3(h_, hq_);
      l2_.add(s, check_layer(hq_, host_.w2, host_.b2, y_, m_, n_, n_, acc_, mag_));
      if (s == 1) {  // information only: what the E4M3 rounding itself costs
        quantisation_effect_ = check_layer(h_, host_.w2, host_.b2, y_, m_, n_, n_, acc_, mag_).rel;
      }
    } else {
      l2_.add(s, check_layer(h_, host_.w2, host_.b2, y_, m_, n_, n_, acc_, mag_));
    }
  }

  double flops_per_step() const { return 2.0 * m_ * n_ * k_ + 2.0 * m_ * n_ * n_; }

  void progress(std::uint32_t s, double seconds) {
    const double gflops = seconds > 0 ? flops_per_step() / seconds * 1e-9 : 0.0;
    const bool ok = !l1_.first_failure && !l2_.first_failure;
    if (interactive_) {
      std::printf("\rstep %u/%u  %8.2f ms  %7.2f GFLOP/s  errors %.1e / %.1e %s", s, steps_,
                  seconds * 1e3, gflops, l1_.worst.rel, l2_.worst.rel, ok ? "ok " : "FAIL");
    } else {
      std::printf("step %u/%u: %.2f ms, %.2f GFLOP/s, max error %s %.1e, %s %.1e%s\n", s, steps_,
                  seconds * 1e3, gflops, l1_.name.c_str(), l1_.worst.rel, l2_.name.c_str(),
                  l2_.worst.rel, ok ? "" : " FAIL");
    }
    std::fflush(stdout);
  }

  int summarize(const std::string& selector_note, const std::string& cache_state,
                const gpuplug::LedgerStats& at_exit) {
    const std::uint32_t timed_steps = steps_ > 1 ? steps_ - 1 : 1;
    const double timed_seconds = steps_ > 1 ? steady_seconds_ : first_seconds_;
    const double gflops =
        timed_seconds > 0 ? flops_per_step() * timed_steps / timed_seconds * 1e-9 : 0.0;
    const std::uint64_t new_allocs = allocs_at_end_ - allocs_after_warmup_;

    auto row = [](const char* label, const std::string& value) {
      std::printf("  %-28s %s\n", label, value.c_str());
    };
    auto route_row = [&](const char* label, const RouteStats& r) {
      row(label, r.name + ": max error " + format_double("%.2e", r.worst.rel) + " (tolerance " +
                     format_double("%.0e", r.tolerance) + ")" + (r.first_failure ? "  FAIL" : ""));
    };
    std::printf("\nsummary\n");
    row("backend:", std::string(gpu_.name()) + "  " + selector_note);
    row("shape:", "X " + std::to_string(m_) + "x" + std::to_string(k_) + ", W1 " +
                      std::to_string(k_) + "x" + std::to_string(n_) + ", W2 " + std::to_string(n_) +
                      "x" + std::to_string(n_));
    row("steps:", std::to_string(steps_));
    row("GFLOP/s:", format_double("%.2f", gflops) +
                        (steps_ > 1 ? " (steps 2.." + std::to_string(steps_) + ", launch to sync)"
                                    : " (step 1, includes first-use costs)"));
    row("step 1 (warm-up):", format_double("%.2f ms", first_seconds_ * 1e3));
    route_row("layer 1 route:", l1_);
    route_row("layer 2 route:", l2_);
    if (route2_.e4m3) {
      row("E4M3 rounding effect:", format_double("%.2e", quantisation_effect_) +
                                       " vs an unrounded f32 reference (step 1; information)");
    }
    std::uint64_t on_device = 0, managed = 0;
    for (const auto& b : weights_.buffers()) {
      (b.placement == Placement::device ? on_device : managed) += b.bytes;
    }
    row("weights:", format_bytes(on_device) + " device, " + format_bytes(managed) + " managed" +
                        (op_.alloc_fell_back() ? " (fallback latched)" : ""));
    row("op cache before teardown:", cache_state);
    row("allocations after warm-up:", std::to_string(new_allocs) + " (ledger total_allocs " +
                                          std::to_string(allocs_after_warmup_) + " after step 1, " +
                                          std::to_string(allocs_at_end_) + " at the end)");
    row("ledger at exit:", std::to_string(at_exit.live_bytes) + " bytes in " +
                               std::to_string(at_exit.live_count) + " allocations");

    int status = exit_success;
    for (const RouteStats* r : {&l1_, &l2_}) {
      if (!r->first_failure) continue;
      const auto& [s, e] = *r->first_failure;
      std::fprintf(stderr,
                   "gemm_pipeline: verification failed: %s, first at step %u, element (%u, %u): "
                   "got %.9g, expected %.9g, error %.2e > tolerance %.0e\n",
                   r->name.c_str(), s, e.row, e.col, static_cast<double>(e.got), e.want, e.rel,
                   r->tolerance);
      status = exit_verification;
    }
    if (new_allocs != 0) {
      std::fprintf(stderr,
                   "gemm_pipeline: %" PRIu64
                   " allocations after warm-up; steady state must allocate nothing\n",
                   new_allocs);
      status = exit_verification;
    }
    if (at_exit.live_bytes != 0 || at_exit.live_count != 0) {
      std::fprintf(stderr, "gemm_pipeline: the ledger is not empty after teardown:\n%s\n",
                   gpu_.alloc_report().c_str());
      status = exit_verification;
    }
    std::printf("%s\n", status == exit_success ? "result: PASS" : "result: FAIL");
    return status;
  }

  GpuBackend& gpu_;
  OpCache& op_;
  const std::uint32_t m_, n_, k_, steps_;
  const HostModel host_;
  Weights weights_;
  Route route2_;
  std::string route1_key_, route2_key_;  // "route:<func>", the first_shape keys of the routes
  RouteStats l1_, l2_;
  // Host buffers, sized once: the step's input, the backend's H and Y, H rounded through E4M3,
  // and the reference's accumulators.
  std::vector<float> x_, h_, y_, hq_;
  std::vector<double> acc_, mag_;
  const bool interactive_;
  double first_seconds_ = 0, steady_seconds_ = 0, quantisation_effect_ = 0;
  std::uint64_t allocs_after_warmup_ = 0, allocs_at_end_ = 0;
};

/// The selector and where it came from, for messages: the option, the variable or the default.
struct Selector {
  std::string text;
  std::string source;  // "--backend", "GPUPLUG_BACKEND" or "default"
};

Selector choose_selector(const CommandLine& cl) {
  if (cl.backend) return {*cl.backend, "--backend"};
  if (const char* env = std::getenv("GPUPLUG_BACKEND"); env != nullptr && *env != '\0') {
    return {env, "GPUPLUG_BACKEND"};
  }
  return {"auto", "default"};
}

/// Rejects a selector that cannot parse or names a backend no plugin here has and no vendor
/// gpuplug ships (a typo like "nosuch"), before the registry would try it.
void check_selector(const Selector& sel, const gpuplug::PluginRegistry& registry) {
  std::vector<gpuplug::SelectorItem> items;
  try {
    items = gpuplug::parse_selector(sel.text);
  } catch (const gpuplug::Error& e) {
    throw UsageError(sel.source + ": invalid selector '" + sel.text + "': " + e.message());
  }
  std::set<std::string> known{"auto", "cuda", "hip", "host"};
  for (const auto& p : registry.plugins()) known.insert(p.name);
  for (const auto& item : items) {
    if (known.count(item.name) != 0) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw UsageError(sel.source + ": unknown backend '" + item.name + "' in selector '" + sel.text +
                     "' (known: " + list + ")");
  }
}

int run_main(int argc, char** argv) {
  CommandLine cl;
  try {
    cl = parse_command_line(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "gemm_pipeline: %s\n(see gemm_pipeline --help)\n", e.what());
    return exit_usage;
  }
  if (cl.help) {
    std::fputs(usage_text, stdout);
    return exit_success;
  }
  // Route lines are info-level; show them unless the user chose a level (option or GPUPLUG_LOG).
  if (cl.log_level) {
    gpuplug::set_log_level(*cl.log_level);
  } else if (const char* env = std::getenv("GPUPLUG_LOG"); env == nullptr || *env == '\0') {
    gpuplug::set_log_level(LogLevel::info);
  }

  gpuplug::PluginRegistry registry;
  registry.discover();
  const Selector selector = choose_selector(cl);
  gpuplug::Options plugin_options;
  if (cl.device_memory_limit) {
    plugin_options["device_memory_limit"] = std::to_string(*cl.device_memory_limit);
  }

  gpuplug::Selection selection;
  try {
    check_selector(selector, registry);
    selection = registry.select(selector.text, plugin_options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "gemm_pipeline: %s\n", e.what());
    return exit_usage;
  } catch (const gpuplug::Error& e) {
    // A selector the user gave that matches nothing here is a usage error; the default one
    // failing means this installation has no usable backend at all.
    std::fprintf(stderr, "gemm_pipeline: %s '%s': %s\n", selector.source.c_str(),
                 selector.text.c_str(), e.what());
    return selector.source == "default" ? exit_runtime : exit_usage;
  }
  GpuBackend& gpu = *selection.backend;
  std::printf("backend: %s\n", selection.explain().c_str());
  const std::string limit_note =
      cl.device_memory_limit ? ", device_memory_limit=" + std::to_string(*cl.device_memory_limit)
                             : "";
  std::printf("selector: '%s' (from %s)%s\n", selector.text.c_str(), selector.source.c_str(),
              limit_note.c_str());
  std::printf(
      "pipeline: X[%ux%u] -> H = relu(X*W1 + b1)[%ux%u] -> Y = relu(H*W2 + b2)[%ux%u], %u steps\n",
      cl.m, cl.k, cl.m, cl.n, cl.m, cl.n, cl.steps);
  std::fflush(stdout);

  const std::string note = "(selector '" + selector.text + "' from " + selector.source + ")";
  try {
    Pipeline pipeline(gpu, cl);
    return pipeline.run(note);
  } catch (const gpuplug::Error& e) {
    std::fprintf(stderr, "gemm_pipeline: error: %s\n", e.what());
    if (e.status() == gpuplug::Status::out_of_memory && cl.device_memory_limit) {
      // Only the weights can fall back to managed memory; activations need device memory.
      const std::uint64_t activations =
          (std::uint64_t{cl.m} * cl.k + 2 * std::uint64_t{cl.m} * cl.n) * sizeof(float);
      std::fprintf(stderr,
                   "gemm_pipeline: --device-memory-limit=%" PRIu64
                   " leaves no room for the activations, which need %" PRIu64
                   " bytes of device memory\n",
                   *cl.device_memory_limit, activations);
    }
    return exit_runtime;
  }
}

}  // namespace
}  // namespace gemm_pipeline

int main(int argc, char** argv) {
  try {
    return gemm_pipeline::run_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_pipeline: error: %s\n", e.what());
    return gemm_pipeline::exit_runtime;
  }
}
