// SPDX-License-Identifier: Apache-2.0
// api.dlpack: the installed <gpuplug/dlpack.hpp> compiles with no DLPack of the application's
// own (another <dlpack/dlpack.h> first on the include path is never read), and a tensor exported
// from a shared backend outlives the application's reference to the backend.
#include <gpuplug/dlpack.hpp>
#include <gpuplug/gpuplug.hpp>

#include <cstdio>
#include <memory>
#include <vector>

static_assert(DLPACK_MAJOR_VERSION == 1, "the kit's DLPack header is 1.x");

int main() {
  gpuplug::PluginRegistry registry;
  registry.discover();
  std::shared_ptr<gpuplug::GpuBackend> gpu = registry.create("host!");
  const std::vector<float> values{1.0f, 2.0f, 3.0f, 4.0f};
  const gpuplug::DevicePtr ptr = gpu->alloc(values.size() * sizeof(float), "api.dlpack");
  gpu->copy_h2d(ptr, values.data(), values.size() * sizeof(float));
  const std::int64_t shape[] = {4};
  DLManagedTensorVersioned* t = gpuplug::to_dlpack(gpu, ptr, shape, DLDataType{kDLFloat, 32, 1});
  gpu.reset();  // the tensor keeps the backend alive
  const float* data = static_cast<const float*>(t->dl_tensor.data);
  const bool same = t->version.major == 1 && data[3] == 4.0f;
  t->deleter(t);
  if (!same) {
    std::fprintf(stderr, "api.dlpack: the exported tensor does not hold the values\n");
    return 1;
  }
  std::printf("api.dlpack: DLPack %d.%d from the kit; the tensor outlived the backend's owner\n",
              DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
  return 0;
}
