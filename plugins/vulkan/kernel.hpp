// SPDX-License-Identifier: Apache-2.0
// What a Vulkan function handle and module handle point at (modules.cpp makes them, launch.cpp
// runs them).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "container.hpp"
#include "driver.hpp"

namespace gpuplug::vulkan {

/// One kernel: its shader module and pipeline layout (one push-constant range), and a pipeline
/// per workgroup size asked for. Everything but `pipelines` is immutable after load, so launches
/// read it without a lock.
struct Kernel {
  std::string name;
  std::string entry;
  std::array<std::uint32_t, 3> local_size{1, 1, 1};
  std::array<std::uint32_t, 3> local_size_ids{};
  std::uint32_t push_bytes = 0;
  std::vector<PushArg> args;
  VkShaderModule shader = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;

  std::mutex mutex;  // guards pipelines
  std::vector<std::pair<std::array<std::uint32_t, 3>, VkPipeline>> pipelines;
};

/// One loaded module: its kernels (sorted by name) and its globals in device memory.
struct LoadedModule {
  struct Global {
    std::string name;
    std::uint64_t address = 0;
    std::uint64_t bytes = 0;
  };
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::vector<Global> globals;
};

}  // namespace gpuplug::vulkan
