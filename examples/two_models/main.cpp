// SPDX-License-Identifier: Apache-2.0
// two_models: two models on ONE backend, served from two threads (docs/opcache.md, "Models on a
// shared backend").
//
// Each model is one layer, Y = relu(X * W + b), with sizes of its own. What it shows:
// - each model has its own OpCache, made for the shared backend: OpCache(gpu, "model A"). Its
//   scratch, allocation latch and gates are the model's; kernel handles are the backend's and
//   shared (each kernel is resolved once for both models);
// - each model has its own Teardown, so it is released on its own: model A is released while
//   model B keeps serving, and B's scratch and weights are untouched;
// - the backend has a device_memory_limit that leaves room for the activations only, so each
//   model's weights fall back to managed memory and each model's cache latches on its own;
// - the weights are allocated with a call site naming the model ("weights (model A)"), so the
//   ledger's report tells the models apart;
// - every step is checked against a CPU reference, and the run ends on an empty ledger.
//
// Usage: two_models [SELECTOR]   (default "host"; exit 0 pass, 1 verification failure, 3 error)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <gpuplug/gpuplug.hpp>
#include <latch>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using gpuplug::DevicePtr;
using gpuplug::GpuBackend;
using gpuplug::KernelHandle;

constexpr std::uint32_t kGemmBlockRows = 16;  // the GEMM kernels' launch rule: blocks of 16 x 16
constexpr std::uint32_t kDefaultNTile = 16;   // when the module publishes no gemm_f32_n_tile
constexpr double kTolerance = 1e-4;           // f32 summation, as in gemm_pipeline

std::uint32_t ceil_div(std::uint32_t a, std::uint32_t b) { return (a + b - 1) / b; }

/// Deterministic data (SplitMix64), the same with every standard library.
float next_uniform(std::uint64_t& state, float lo, float hi) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return lo + (hi - lo) * static_cast<float>(z >> 40) * 0x1.0p-24f;
}

/// A model's memory on the backend that is not scratch: its weights and its stream. Released
/// through the model's Teardown, never by a destructor (a resource goes back while its backend
/// is alive).
class DeviceState final : public gpuplug::ModelResource<GpuBackend> {
 public:
  explicit DeviceState(std::string label) : label_(std::move(label)) {}
  DevicePtr w, b;
  gpuplug::Stream stream;
  bool has_stream = false;

  std::string_view label() const override { return label_; }
  /// Each handle is forgotten before it is given back, so a retry after a failure (Teardown
  /// retries) never frees anything twice.
  void release(GpuBackend& gpu) override {
    if (std::exchange(has_stream, false)) gpu.destroy_stream(std::exchange(stream, {}));
    if (w) gpu.free(std::exchange(w, {}));
    if (b) gpu.free(std::exchange(b, {}));
  }

 private:
  std::string label_;
};

/// One model: Y[m x n] = relu(X[m x k] * W[k x n] + b[n]).
class Model {
 public:
  Model(GpuBackend& gpu, std::string name, std::uint32_t m, std::uint32_t n, std::uint32_t k,
        std::uint64_t seed)
      : gpu_(gpu),
        name_(std::move(name)),
        m_(m),
        n_(n),
        k_(k),
        seed_(seed),
        op_(gpu, name_),  // this model's cache on the shared backend
        state_("weights and stream (" + name_ + ")"),
        w_(std::size_t{k} * n),
        b_(n),
        x_(std::size_t{m} * k),
        y_(std::size_t{m} * n) {
    teardown_.add(op_);     // released last: its scratch was reserved first
    teardown_.add(state_);  // released first
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& name() const { return name_; }

  /// Reserves the activations (device memory), then the weights (which may spill into managed
  /// memory), and uploads the weights.
  void load() {
    op_.scratch(gpu_, "x", x_.size() * sizeof(float));
    op_.scratch(gpu_, "y", y_.size() * sizeof(float));
    std::uint64_t rng = seed_;
    const float scale = 1.0f / std::sqrt(static_cast<float>(k_));
    for (float& v : w_) v = next_uniform(rng, -scale, scale);
    for (float& v : b_) v = next_uniform(rng, -0.1f, 0.1f);
    // The call site names the model, so the ledger's report tells A's weights from B's.
    const std::string site = "weights (" + name_ + ")";
    state_.w = op_.alloc_with_fallback(gpu_, w_.size() * sizeof(float), site.c_str());
    state_.b = op_.alloc_with_fallback(gpu_, b_.size() * sizeof(float), site.c_str());
    gpu_.copy_h2d(state_.w, w_.data(), w_.size() * sizeof(float));
    gpu_.copy_h2d(state_.b, b_.data(), b_.size() * sizeof(float));
    state_.stream = gpu_.create_stream();
    state_.has_stream = true;
    std::printf("%s: weights %zu bytes -> %s\n", name_.c_str(), (w_.size() + b_.size()) * 4,
                op_.alloc_fell_back() ? "fell back to managed memory (this model's latch is set)"
                                      : "device memory");
  }

  /// One step on a new input batch; returns the largest error against the CPU reference.
  double step(std::uint32_t s) {
    std::uint64_t rng = seed_ ^ (0xDA7A0000ull + s);
    for (float& v : x_) v = next_uniform(rng, -1.0f, 1.0f);
    // Hits after the first step: no lock, no allocation. The kernels are the backend's, shared.
    const KernelHandle gemm = op_.kernel(gpu_, "gemm", "gemm_f32");
    const KernelHandle bias_relu = op_.kernel(gpu_, "activation", "bias_relu");
    const DevicePtr x = op_.scratch(gpu_, "x", x_.size() * sizeof(float));
    const DevicePtr y = op_.scratch(gpu_, "y", y_.size() * sizeof(float));
    const std::uint32_t tile = op_.n_tile(gemm).value_or(kDefaultNTile);

    const gpuplug::Stream st = state_.stream;
    gpu_.copy_h2d_async(x, x_.data(), x_.size() * sizeof(float), st);
    const gpuplug::Dim3 grid{ceil_div(n_, tile == 0 ? kDefaultNTile : tile),
                             ceil_div(m_, kGemmBlockRows), 1};
    gpu_.launch_args(gemm, grid, {16, 16, 1}, 0, st, m_, n_, k_, x.value, state_.w.value, y.value);
    gpu_.launch_args(bias_relu, {ceil_div(m_ * n_, 256), 1, 1}, {256, 1, 1}, 0, st, m_, n_,
                     state_.b.value, y.value);
    gpu_.copy_d2h_async(y_.data(), y, y_.size() * sizeof(float), st);
    gpu_.synchronize(st);
    return max_error();
  }

  /// Frees this model's scratch, weights and stream; the other model is not touched.
  void release() { teardown_.release_all(gpu_); }

 private:
  // |got - want| / (sum |x*w| + |b|): f32 summation error is bounded relative to that sum.
  double max_error() const {
    double worst = 0;
    for (std::uint32_t i = 0; i < m_; ++i) {
      for (std::uint32_t j = 0; j < n_; ++j) {
        double acc = b_[j], mag = std::fabs(b_[j]);
        for (std::uint32_t p = 0; p < k_; ++p) {
          const double t = double{x_[std::size_t{i} * k_ + p]} * w_[std::size_t{p} * n_ + j];
          acc += t;
          mag += std::fabs(t);
        }
        const double want = acc > 0 ? acc : 0;
        const double err = std::fabs(y_[std::size_t{i} * n_ + j] - want) / (mag > 0 ? mag : 1);
        if (!(err <= worst)) worst = err;  // a NaN is infinitely wrong
      }
    }
    return worst;
  }

  GpuBackend& gpu_;
  const std::string name_;
  const std::uint32_t m_, n_, k_;
  const std::uint64_t seed_;
  gpuplug::OpCache op_;
  DeviceState state_;
  gpuplug::Teardown teardown_;
  std::vector<float> w_, b_, x_, y_;
};

/// Loads both models, serves them from two threads (A released while B serves), releases B and
/// checks results and the ledger. Returns the exit status.
int serve(GpuBackend& gpu, Model& a, Model& b) {
  a.load();  // A's weights hit the limit: A's cache latches (and warns, naming model A)
  b.load();  // B's cache has its own latch: B tries device memory, then falls back too
  std::printf("ledger by call site:\n%s\n", gpu.alloc_report(6).c_str());

  // Two threads, one per model. A serves a few steps and is released while B keeps serving.
  constexpr std::uint32_t steps_a = 4, steps_b = 8;
  std::latch a_released(1);
  double worst_a = 0, worst_b = 0;
  std::uint32_t b_steps_after_a = 0;
  std::exception_ptr error_a, error_b;
  {
    std::jthread serve_a([&] {
      try {
        for (std::uint32_t s = 1; s <= steps_a; ++s) worst_a = std::max(worst_a, a.step(s));
        a.release();  // frees A's scratch, weights and stream: B's are untouched
      } catch (...) {
        error_a = std::current_exception();
      }
      a_released.count_down();
    });
    std::jthread serve_b([&] {
      try {
        for (std::uint32_t s = 1; s <= steps_b; ++s) {
          if (s == steps_b / 2 + 1) a_released.wait();  // the second half runs after A is gone
          worst_b = std::max(worst_b, b.step(s));
          if (s > steps_b / 2) ++b_steps_after_a;
        }
      } catch (...) {
        error_b = std::current_exception();
      }
    });
  }
  if (error_a) std::rethrow_exception(error_a);
  if (error_b) std::rethrow_exception(error_b);
  std::printf("model A released after %u steps; model B served %u more steps after it\n", steps_a,
              b_steps_after_a);
  b.release();

  const gpuplug::LedgerStats at_exit = gpu.ledger_stats();
  std::printf("max error: model A %.2e, model B %.2e (tolerance %.0e)\n", worst_a, worst_b,
              kTolerance);
  std::printf("ledger at exit: %llu bytes in %llu allocations\n",
              static_cast<unsigned long long>(at_exit.live_bytes),
              static_cast<unsigned long long>(at_exit.live_count));
  const bool pass = worst_a <= kTolerance && worst_b <= kTolerance && at_exit.live_bytes == 0 &&
                    at_exit.live_count == 0;
  if (at_exit.live_count != 0) std::printf("%s\n", gpu.alloc_report().c_str());
  std::printf("result: %s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

int run(const std::string& selector) {
  // Activations (x and y): A 32x128 + 32x128 floats (32 KiB), B 16x64 + 16x96 (10 KiB). The
  // limit leaves 4 KiB beyond them, so neither model's weights fit in device memory: each model
  // falls back to managed memory, and each model's cache latches on its own.
  constexpr std::uint64_t activations = (32 * 128 + 32 * 128 + 16 * 64 + 16 * 96) * 4;
  gpuplug::PluginRegistry registry;
  registry.discover();
  gpuplug::Options options{{"device_memory_limit", std::to_string(activations + 4096)}};
  gpuplug::Selection selection = registry.select(selector, options);
  GpuBackend& gpu = *selection.backend;
  std::printf("backend: %s, device_memory_limit %llu bytes\n", std::string(gpu.name()).c_str(),
              static_cast<unsigned long long>(activations + 4096));

  Model a(gpu, "model A", 32, 128, 128, 0xA11CE);
  Model b(gpu, "model B", 16, 96, 64, 0xB0B);
  try {
    return serve(gpu, a, b);
  } catch (...) {
    // Give everything back on the error path too (release is idempotent), then report.
    for (Model* m : {&a, &b}) {
      try {
        m->release();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "two_models: releasing %s also failed: %s\n", m->name().c_str(),
                     e.what());
      }
    }
    throw;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc > 1 ? argv[1] : "host");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "two_models: %s\n", e.what());
    return 3;
  }
}
