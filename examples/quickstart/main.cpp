// SPDX-License-Identifier: Apache-2.0
// docs/quickstart.md shows this file in full: choose a backend, run axpy on it, check the result.
#include <cstdint>
#include <exception>
#include <gpuplug/gpuplug.hpp>
#include <iostream>
#include <vector>

int main() try {
  gpuplug::PluginRegistry registry;
  registry.discover();                            // finds <prefix>/lib/gpuplug/plugins/*.so
  gpuplug::Selection selection = registry.select("auto");  // or "cuda", "hip:1", "host"
  gpuplug::GpuBackend& gpu = *selection.backend;
  std::cout << selection.explain() << "\n";

  // y = a*x + y on the device, with the sample module "axpy" every plugin ships.
  constexpr std::uint32_t n = 1 << 20;
  constexpr float a = 2.0f;
  std::vector<float> x(n, 1.0f), y(n, 3.0f);
  const gpuplug::DevicePtr dx = gpu.alloc(n * sizeof(float), "x");
  const gpuplug::DevicePtr dy = gpu.alloc(n * sizeof(float), "y");
  gpu.copy_h2d(dx, x.data(), n * sizeof(float));
  gpu.copy_h2d(dy, y.data(), n * sizeof(float));

  const gpuplug::KernelHandle axpy = gpu.op_cache().kernel(gpu, "axpy", "axpy");  // module, kernel
  gpu.launch_args(axpy, gpuplug::Dim3{(n + 255) / 256, 1, 1}, gpuplug::Dim3{256, 1, 1},
                  /*shared_bytes=*/0, gpuplug::Stream{}, n, a, dx.value, dy.value);
  gpu.synchronize();
  gpu.copy_d2h(y.data(), dy, n * sizeof(float));
  gpu.free(dx);
  gpu.free(dy);

  for (float v : y) {
    if (v != 5.0f) {
      std::cerr << "quickstart: wrong result " << v << "\n";
      return 1;
    }
  }
  std::cout << "axpy on " << gpu.name() << ": " << n << " elements, all 5\n";
  return 0;
} catch (const gpuplug::Error& e) {  // status(), backend(), operation(), message()
  std::cerr << "quickstart: " << e.what() << "\n";
  return 1;
} catch (const std::exception& e) {
  std::cerr << "quickstart: " << e.what() << "\n";
  return 1;
}
