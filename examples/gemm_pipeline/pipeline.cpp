// SPDX-License-Identifier: Apache-2.0
// The pipeline of gemm_pipeline: setup, the steps and their checks, the summary (pipeline.hpp).
#include "pipeline.hpp"

#include "openblas.hpp"

#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gemm_pipeline {

using gpuplug::DevicePtr;
using gpuplug::Dim3;
using gpuplug::GpuBackend;
using gpuplug::KernelHandle;
using gpuplug::LogLevel;
using gpuplug::OpCache;

namespace {

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

/// Decided once per backend, before the first step (a failed resolution memoizes nothing, so
/// retrying it every step would ask the backend every step).
Route choose_layer2_route(GpuBackend& gpu, OpCache& op) {
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

}  // namespace

Pipeline::Pipeline(GpuBackend& gpu, const Shape& shape)
    : gpu_(gpu),
      op_(gpu, "mlp"),
      m_(shape.m),
      n_(shape.n),
      k_(shape.k),
      steps_(shape.steps),
      compare_blas_(shape.compare_blas),
      host_(shape.n, shape.k),
      x_(std::size_t{m_} * k_),
      h_(std::size_t{m_} * n_),
      y_(std::size_t{m_} * n_),
      interactive_(isatty(fileno(stdout)) != 0) {}

namespace {

/// "run/mem.json" -> "run/mem.warmup.json"; "mem" -> "mem.warmup".
std::string warmup_snapshot_path(const std::string& file) {
  const std::filesystem::path p(file);
  return (p.parent_path() / (p.stem().string() + ".warmup" + p.extension().string())).string();
}

void write_snapshot(gpuplug::GpuBackend& gpu, const std::string& file) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << gpuplug::to_json(gpu.memory_snapshot());
  out.close();
  if (!out) throw std::runtime_error("cannot write the memory snapshot '" + file + "'");
  std::printf("memory snapshot: %s\n", file.c_str());
}

}  // namespace

int Pipeline::run(const std::string& selector_note, const std::string& memory_snapshot) {
  gpuplug::Teardown teardown;
  teardown.add(op_);       // released last: scratch was reserved first
  teardown.add(weights_);  // released first
  try {
    setup();
    for (std::uint32_t s = 1; s <= steps_; ++s) {
      step(s);
      if (s == 1) {
        allocs_after_warmup_ = gpu_.ledger_stats().total_allocs;
        if (!memory_snapshot.empty()) write_snapshot(gpu_, warmup_snapshot_path(memory_snapshot));
      }
    }
    allocs_at_end_ = gpu_.ledger_stats().total_allocs;
    if (interactive_) std::printf("\n");
  } catch (...) {
    if (interactive_) std::printf("\n");
    try {
      teardown.release_all(gpu_);
      // What the failure left behind once Teardown ran: nothing, unless a release failed too.
      const gpuplug::LedgerStats left = gpu_.ledger_stats();
      std::fprintf(stderr,
                   "gemm_pipeline: teardown after the failure: ledger at exit: %" PRIu64
                   " bytes in %" PRIu64 " allocations\n",
                   left.live_bytes, left.live_count);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gemm_pipeline: teardown after the failure also failed: %s\n", e.what());
    }
    throw;
  }
  std::ostringstream cache_state;
  cache_state << op_;
  teardown.release_all(gpu_);  // throws (exit 3) naming each resource that failed
  if (!memory_snapshot.empty()) write_snapshot(gpu_, memory_snapshot);
  const gpuplug::LedgerStats at_exit = gpu_.ledger_stats();
  return summarize(selector_note, cache_state.str(), at_exit);
}

void Pipeline::setup() {
  // Layer 2's route first: resolving it loads the gemm module.
  route2_ = choose_layer2_route(gpu_, op_);
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

  weights_.load(gpu_, op_, host_);
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

void Pipeline::step(std::uint32_t s) {
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
  gpu_.launch_args(gemm1, grid1, block16, 0, {}, m_, n_, k_, x.value, weights_.w1().value, h.value);
  gpu_.launch_args(bias_relu, elementwise, block256, 0, {}, m_, n_, weights_.b1().value, h.value);
  gpu_.launch_args(gemm2, grid2, block16, 0, {}, m_, n_, n_, h.value, weights_.w2().value, y.value);
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
void Pipeline::log_route(std::string_view key, KernelHandle hk, Dim3 grid, std::uint32_t M,
                         std::uint32_t N, std::uint32_t K) {
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

void Pipeline::verify(std::uint32_t s, DevicePtr h, DevicePtr y) {
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

void Pipeline::progress(std::uint32_t s, double seconds) {
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

int Pipeline::summarize(const std::string& selector_note, const std::string& cache_state,
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
  if (compare_blas_) {
    const BlasRun blas = openblas_pipeline(host_, m_, n_, k_, steps_);
    row("OpenBLAS GFLOP/s:",
        blas.gflops > 0 ? format_double("%.2f", blas.gflops) + " (the same steps with cblas_sgemm on the CPU, " +
                              std::to_string(blas.threads) + " threads; gpuplug / OpenBLAS " +
                              format_double("%.2f", gflops / blas.gflops) + ")"
                        : "unavailable: " + blas.why);
  }
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

}  // namespace gemm_pipeline
