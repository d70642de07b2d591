// SPDX-License-Identifier: Apache-2.0
// GpuBackend::alloc's default `site` is the calling function's name (GPUPLUG_CALLER_FUNCTION),
// and the whole API compiles with the compiler this project is configured with; the kit check
// builds it with clang 14 too, which cannot compile std::source_location with libstdc++ 12 (the
// default argument used it before). Runs on the installed host plugin, found with no environment.
#include <gpuplug/gpuplug.hpp>

#include <cstdio>
#include <string>

namespace {

// The allocation the ledger should attribute to this function, by name.
gpuplug::DevicePtr allocate_weights_for_site_test(gpuplug::GpuBackend& gpu) { return gpu.alloc(4096); }

}  // namespace

int main() {
  try {
    gpuplug::PluginRegistry registry;
    registry.discover();
    auto gpu = registry.create("host!");
    const gpuplug::DevicePtr p = allocate_weights_for_site_test(*gpu);
    const std::string report = gpu->alloc_report(10);
    gpu->free(p);
    std::printf("%s\n", report.c_str());
    if (report.find("allocate_weights_for_site_test") == std::string::npos) {
      std::printf("FAILED: the ledger does not name the allocating function\n");
      return 1;
    }
    std::printf("ok: the default site is the caller's name\n");
    return 0;
  } catch (const gpuplug::Error& e) {  // typeinfo of gpuplug::Error crosses the boundary
    std::printf("FAILED: gpuplug::Error: %s\n", e.what());
    return 1;
  }
}
