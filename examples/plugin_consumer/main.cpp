// SPDX-License-Identifier: Apache-2.0
// plugin_consumer: selects a backend by name (default "example!"), runs axpy and checks it.
//
//   plugin_consumer [SELECTOR]   "example!" (default) insists on the example plugin: no fallback.
//
// The plugin is found on the core's search path: GPUPLUG_PLUGIN_PATH, then the plugins folder
// beside libgpuplug (<prefix>/lib/gpuplug/plugins). Exit status 0 when the result is right.
#include <cmath>
#include <cstdint>
#include <exception>
#include <gpuplug/gpuplug.hpp>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const std::string selector = argc > 1 ? argv[1] : "example!";
  try {
    gpuplug::PluginRegistry registry;
    registry.discover();
    const gpuplug::Selection selection = registry.select(selector);
    gpuplug::GpuBackend& gpu = *selection.backend;
    std::cout << selection.explain() << "\n";
    std::cout << "device: " << gpu.device_info().name << "\n";

    // y = a*x + y through the backend's OpCache (module "axpy" from the plugin's modules_dir).
    constexpr std::uint32_t n = 1000;
    constexpr float a = 2.0f;
    std::vector<float> x(n), y(n);
    for (std::uint32_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(i);
      y[i] = 1.0f;
    }
    const gpuplug::DevicePtr dx = gpu.alloc(n * sizeof(float), "consumer x");
    const gpuplug::DevicePtr dy = gpu.alloc(n * sizeof(float), "consumer y");
    gpu.copy_h2d(dx, x.data(), n * sizeof(float));
    gpu.copy_h2d(dy, y.data(), n * sizeof(float));
    const gpuplug::KernelHandle axpy = gpu.op_cache().kernel(gpu, "axpy", "axpy");
    gpu.launch_args(axpy, gpuplug::Dim3{(n + 255) / 256, 1, 1}, gpuplug::Dim3{256, 1, 1}, 0,
                    gpuplug::Stream{}, n, a, dx.value, dy.value);
    gpu.synchronize();
    gpu.copy_d2h(y.data(), dy, n * sizeof(float));
    gpu.free(dx);
    gpu.free(dy);

    std::uint32_t wrong = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
      if (y[i] != a * static_cast<float>(i) + 1.0f) ++wrong;
    }
    double sum = 0;
    for (float v : y) sum += v;
    std::cout << "axpy on " << gpu.name() << ": n=" << n << " sum(y)=" << sum << " ("
              << (wrong == 0 ? "correct" : std::to_string(wrong) + " wrong") << ")\n";
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "plugin_consumer: " << e.what() << "\n";
    return 1;
  }
}
