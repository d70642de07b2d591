// SPDX-License-Identifier: Apache-2.0
// select_backend: picks a backend from a selector, says why, runs axpy on it and checks on the CPU.
//
//   select_backend [SELECTOR]     e.g. "auto" (default), "host", "cuda:1", "cuda,hip,host", "hip!"
//
// Without an argument the selector is "auto", which GPUPLUG_BACKEND replaces when set.
// Exit status: 0 when the result matches the CPU reference, 1 otherwise or on any error.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <gpuplug/gpuplug.hpp>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc > 2 ||
      (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h"))) {
    std::cerr
        << "usage: select_backend [SELECTOR]   (default: auto, replaced by GPUPLUG_BACKEND)\n";
    return argc > 2 ? 2 : 0;
  }
  const std::string selector = argc == 2 ? argv[1] : "auto";
  try {
    gpuplug::PluginRegistry registry;
    registry.discover();
    const gpuplug::Selection selection = registry.select(selector);
    gpuplug::GpuBackend& gpu = *selection.backend;
    std::cout << "selector: " << selector;
    if (const char* env = std::getenv("GPUPLUG_BACKEND"); env != nullptr && *env != '\0') {
      std::cout << " (GPUPLUG_BACKEND='" << env << "' replaces \"auto\")";
    }
    std::cout << "\n";
    std::cout << selection.explain() << "\n";
    const gpuplug::DeviceInfo device = gpu.device_info();
    std::cout << "device:   " << device.name << " (" << device.arch << ")\n";

    // y = a*x + y on ~1M elements, with inputs whose exact result is easy to reason about.
    constexpr std::uint32_t n = 1u << 20;
    constexpr float a = 2.5f;
    std::vector<float> x(n);
    std::vector<float> y(n);
    for (std::uint32_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(i % 1000) * 0.25f;
      y[i] = static_cast<float>(i % 7) - 3.0f;
    }
    const std::size_t bytes = n * sizeof(float);
    const gpuplug::DevicePtr dx = gpu.alloc(bytes, "select_backend x");
    const gpuplug::DevicePtr dy = gpu.alloc(bytes, "select_backend y");
    gpu.copy_h2d(dx, x.data(), bytes);
    gpu.copy_h2d(dy, y.data(), bytes);

    // The backend's own OpCache memoizes the handle; the module comes from the plugin's kernels.
    const gpuplug::KernelHandle axpy = gpu.op_cache().kernel(gpu, "axpy", "axpy");
    const gpuplug::Dim3 grid{(n + 255) / 256, 1, 1};
    const gpuplug::Dim3 block{256, 1, 1};
    gpu.launch_args(axpy, grid, block, 0, gpuplug::Stream{}, n, a, dx.value, dy.value);
    gpu.synchronize();

    std::vector<float> result(n);
    gpu.copy_d2h(result.data(), dy, bytes);
    gpu.free(dx);
    gpu.free(dy);

    std::size_t mismatches = 0;
    double worst = 0.0;
    for (std::uint32_t i = 0; i < n; ++i) {
      const float expected = a * x[i] + y[i];
      const double err = std::fabs(static_cast<double>(result[i]) - expected);
      // A fused multiply-add on the device may differ from the CPU by one rounding.
      const double tolerance = 1e-6 * std::fabs(static_cast<double>(expected)) + 1e-6;
      worst = std::max(worst, err);
      if (!(err <= tolerance)) ++mismatches;
    }
    std::cout << "axpy:     n = " << n << ", max |error| = " << worst << "\n";
    if (mismatches != 0) {
      std::cout << "FAIL (" << mismatches << " of " << n << " elements differ from the CPU)\n";
      return 1;
    }
    std::cout << "PASS\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "select_backend: " << e.what() << "\n";
    std::cout << "FAIL\n";
    return 1;
  }
}
