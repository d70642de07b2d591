// SPDX-License-Identifier: Apache-2.0
// The vulkan backend's native handles (<gpuplug/vulkan_handles.h>) on a real Vulkan device
// (lavapipe in CI; CTest skips this test without one): the objects are the backend's own and
// consistent (vkGetDeviceQueue gives the same queue), a library beside it may submit to the queue
// under lock_queue while gpuplug works from other threads, and imports are refused as
// unsupported, saying why.
#define BOOST_TEST_MODULE test_vulkan_native
#include <gpuplug/vulkan_handles.h>
#include <vulkan/vulkan.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <gpuplug/gpuplug.hpp>
#include <string>
#include <thread>
#include <vector>

#include "contains.hpp"

namespace {

std::shared_ptr<gpuplug::GpuBackend> vulkan_backend() {
  gpuplug::PluginRegistry registry;
  registry.discover();
  return registry.create("vulkan:0!");
}

const gpuplug_vulkan_handles_t& handles_of(const gpuplug::NativeHandles& h) {
  BOOST_TEST_REQUIRE(h.context != nullptr);
  return *static_cast<const gpuplug_vulkan_handles_t*>(h.context);
}

}  // namespace

BOOST_AUTO_TEST_CASE(handles_are_the_backends_own_objects) {
  const auto gpu = vulkan_backend();
  const gpuplug::NativeHandles h = gpu->native(gpuplug::Stream{});
  BOOST_TEST(h.vendor == "vulkan");
  BOOST_TEST(h.device == 0);
  const gpuplug_vulkan_handles_t& v = handles_of(h);
  BOOST_TEST(v.struct_size == sizeof(gpuplug_vulkan_handles_t));
  BOOST_TEST(v.api_version >= VK_API_VERSION_1_2);
  BOOST_TEST_REQUIRE(v.device != nullptr);
  BOOST_TEST_REQUIRE(v.queue != nullptr);
  BOOST_TEST(h.stream == v.queue);
  BOOST_TEST(v.semaphore == nullptr);
  VkQueue queue = VK_NULL_HANDLE;
  vkGetDeviceQueue(static_cast<VkDevice>(v.device), v.queue_family, v.queue_index, &queue);
  BOOST_TEST(static_cast<void*>(queue) == v.queue);
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(static_cast<VkPhysicalDevice>(v.physical_device), &props);
  BOOST_TEST(std::string(props.deviceName) == gpu->device_info().name);
  // A created stream runs on the same queue; the struct stays where it was.
  const gpuplug::Stream s = gpu->create_stream();
  const gpuplug::NativeHandles hs = gpu->native(s);
  BOOST_TEST(hs.stream == v.queue);
  BOOST_TEST(hs.context == h.context);
  gpu->destroy_stream(s);
}

BOOST_AUTO_TEST_CASE(a_library_submits_under_the_queue_lock_while_gpuplug_works) {
  const auto gpu = vulkan_backend();
  const gpuplug_vulkan_handles_t& v = handles_of(gpu->native(gpuplug::Stream{}));
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back([&, t] {
      std::vector<std::uint8_t> back(4096);
      while (!stop.load()) {
        const gpuplug::DevicePtr p = gpu->alloc(4096, "worker");
        gpu->memset(p, static_cast<std::uint8_t>(t + 1), 4096);
        gpu->copy_d2h(back.data(), p, 4096);
        gpu->free(p);
        if (back[4095] != t + 1) throw std::runtime_error("memset lost");
      }
    });
  }
  for (int i = 0; i < 200; ++i) {
    v.lock_queue(v.queue_owner);
    const VkResult r = vkQueueWaitIdle(static_cast<VkQueue>(v.queue));
    v.unlock_queue(v.queue_owner);
    BOOST_TEST_REQUIRE(r == VK_SUCCESS);
  }
  stop = true;
  for (auto& w : workers) w.join();
}

BOOST_AUTO_TEST_CASE(imports_are_unsupported_and_say_why) {
  const auto gpu = vulkan_backend();
  std::vector<float> host(16);
  try {
    (void)gpu->import_memory(host.data(), sizeof(float) * host.size(), nullptr, "outside");
    BOOST_FAIL("import_memory was accepted");
  } catch (const gpuplug::Error& e) {
    BOOST_TEST((e.status() == gpuplug::Status::unsupported), e.what());
    BOOST_TEST(gpuplug::test::contains(e.what(), "vulkan:0"), e.what());
    BOOST_TEST(gpuplug::test::contains(e.what(), "external_memory"), e.what());
  }
  BOOST_TEST(gpu->ledger_stats().live_count == 0u);  // the refused import left nothing behind
}
