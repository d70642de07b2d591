// SPDX-License-Identifier: Apache-2.0
// The model of gemm_pipeline: its weights on the host (deterministic data) and on a backend (a
// ModelResource whose buffers may spill into managed memory).
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <gpuplug/gpuplug.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gemm_pipeline {

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

inline void fill(std::vector<float>& v, Rng& rng, float lo, float hi) {
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

/// The model's weights on one backend: allocated with the model's OpCache::alloc_with_fallback,
/// so they spill into managed memory once device memory runs out. Freed only by release (via
/// Teardown), never by a destructor: a resource must go back while its backend is alive.
class Weights final : public gpuplug::ModelResource<gpuplug::GpuBackend> {
 public:
  struct Buffer {
    const char* name = "";
    gpuplug::DevicePtr ptr;
    std::size_t bytes = 0;
    Placement placement = Placement::device;
  };

  /// Allocates and uploads w1, b1, w2, b2 in that order. On failure what was allocated stays
  /// recorded here, so release() frees it.
  void load(gpuplug::GpuBackend& gpu, gpuplug::OpCache& op, const HostModel& host) {
    const std::array<const std::vector<float>*, 4> sources{&host.w1, &host.b1, &host.w2, &host.b2};
    const std::array<const char*, 4> names{"w1", "b1", "w2", "b2"};
    for (std::size_t i = 0; i < buffers_.size(); ++i) {
      Buffer& b = buffers_[i];
      b.name = names[i];
      b.bytes = sources[i]->size() * sizeof(float);
      const bool was_latched = op.alloc_fell_back();
      b.ptr = op.alloc_with_fallback(gpu, b.bytes, "weights");  // the ledger's call site
      b.placement = was_latched            ? Placement::latched
                    : op.alloc_fell_back() ? Placement::fell_back
                                           : Placement::device;
      gpu.copy_h2d(b.ptr, sources[i]->data(), b.bytes);
    }
  }

  const std::array<Buffer, 4>& buffers() const noexcept { return buffers_; }
  gpuplug::DevicePtr w1() const noexcept { return buffers_[0].ptr; }
  gpuplug::DevicePtr b1() const noexcept { return buffers_[1].ptr; }
  gpuplug::DevicePtr w2() const noexcept { return buffers_[2].ptr; }
  gpuplug::DevicePtr b2() const noexcept { return buffers_[3].ptr; }

  std::string_view label() const override { return "weights"; }

  /// Frees every buffer, keeps going past a failed free, forgets them all (so a second call is
  /// harmless), then throws one Error naming the buffers that failed.
  void release(gpuplug::GpuBackend& gpu) override {
    std::string failures;
    for (Buffer& b : buffers_) {
      const gpuplug::DevicePtr p = std::exchange(b.ptr, gpuplug::DevicePtr{});
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

}  // namespace gemm_pipeline
