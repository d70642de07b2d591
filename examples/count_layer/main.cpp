// SPDX-License-Identifier: Apache-2.0
// count_layer_demo: an application that adds the count layer from its file and runs a few
// calls through it on host (docs/layers.md).
//   count_layer_demo <path to libgpuplug-layer-count.so>
#include <cstdio>
#include <exception>
#include <gpuplug/gpuplug.hpp>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: count_layer_demo LAYER_FILE\n");
    return 2;
  }
  try {
    gpuplug::set_log_level(gpuplug::LogLevel::info);
    gpuplug::PluginRegistry registry;
    registry.discover();
    const std::string name = registry.add_layer_file(argv[1]);
    std::printf("added layer '%s' from %s\n", name.c_str(), argv[1]);
    auto gpu = registry.create("host!", {{"layers", name}});
    std::vector<float> data(256, 1.0f);
    for (int i = 0; i < 3; ++i) {
      const gpuplug::DevicePtr p = gpu->alloc(data.size() * sizeof(float), "demo buffer");
      gpu->copy_h2d(p, data.data(), data.size() * sizeof(float));
      gpu->free(p);
    }
    gpu.reset();  // the layer logs its counts when the backend is destroyed
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "count_layer_demo: %s\n", e.what());
    return 1;
  }
}
