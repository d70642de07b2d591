// SPDX-License-Identifier: Apache-2.0
// Must not compile with GPUPLUG_DANGLING defined: the backend of a temporary Selection, taken as
// a reference, dangles as soon as the statement ends. Must compile without it (the spellings
// that keep the Selection or the pointer alive). Checked by compile_check.cmake.
#include <gpuplug/gpuplug.hpp>

#include <memory>

void spellings(gpuplug::PluginRegistry& registry) {
#ifdef GPUPLUG_DANGLING
  gpuplug::GpuBackend& gpu = *registry.select("host").backend;
  (void)gpu;
#else
  auto selection = registry.select("host");
  gpuplug::GpuBackend& gpu = *selection.backend;
  std::shared_ptr<gpuplug::GpuBackend> kept = registry.select("host").backend;
  const std::shared_ptr<gpuplug::GpuBackend>& same = selection.backend;
  registry.select("host").backend->synchronize();
  if (selection.backend != nullptr && kept && same == selection.backend) gpu.synchronize();
#endif
}
