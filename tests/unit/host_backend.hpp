// SPDX-License-Identifier: Apache-2.0
// Host: the real host plugin of this build tree behind a PluginRegistry, for the unit tests of
// what the core builds on a backend (OpCache, Teardown).
#pragma once

#include <gpuplug/gpuplug.hpp>
#include <memory>

namespace gpuplug::test {

/// A registry that discovered this build tree's plugins, and a backend of its host plugin
/// ("host!": the host plugin or an error, whatever GPUPLUG_BACKEND says).
struct Host {
  PluginRegistry registry;
  std::shared_ptr<GpuBackend> gpu;

  Host() {
    registry.discover();
    gpu = registry.create("host!");
  }
  /// Another backend of the same device, with state of its own.
  std::shared_ptr<GpuBackend> another(const Options& options = {}) {
    return registry.create("host!", options);
  }
};

}  // namespace gpuplug::test
