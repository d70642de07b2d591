// SPDX-License-Identifier: Apache-2.0
// The vulkan backend's native handles (<gpuplug/vulkan_handles.h>) on a real Vulkan device
// (lavapipe in CI; CTest skips this test without one): the objects are the backend's own and
// consistent (vkGetDeviceQueue gives the same queue), a stream's semaphore value covers the work
// queued on it, a library beside it may submit to the queue under lock_queue while gpuplug
// works from other threads, and imports are refused as unsupported, saying why.
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
  BOOST_TEST(v.semaphore != nullptr);
  VkQueue queue = VK_NULL_HANDLE;
  vkGetDeviceQueue(static_cast<VkDevice>(v.device), v.queue_family, v.queue_index, &queue);
  BOOST_TEST(static_cast<void*>(queue) == v.queue);
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(static_cast<VkPhysicalDevice>(v.physical_device), &props);
  BOOST_TEST(std::string(props.deviceName) == gpu->device_info().name);
  // A created stream has its own struct and timeline, on a queue of the same family.
  const gpuplug::Stream s = gpu->create_stream();
  const gpuplug::NativeHandles hs = gpu->native(s);
  const gpuplug_vulkan_handles_t& w = handles_of(hs);
  BOOST_TEST(hs.context != h.context);
  BOOST_TEST(w.semaphore != v.semaphore);
  BOOST_TEST(w.device == v.device);
  BOOST_TEST(w.queue_family == v.queue_family);
  vkGetDeviceQueue(static_cast<VkDevice>(w.device), w.queue_family, w.queue_index, &queue);
  BOOST_TEST(static_cast<void*>(queue) == hs.stream);
  gpu->destroy_stream(s);
}

// What a library beside gpuplug relies on: the value native() gives covers the work queued on
// the stream before it, and once the semaphore reaches it that work's results are there.
BOOST_AUTO_TEST_CASE(the_semaphore_value_covers_the_work_queued_before) {
  const auto gpu = vulkan_backend();
  const gpuplug::Stream s = gpu->create_stream();
  constexpr std::size_t kBytes = std::size_t{1} << 20;
  const gpuplug::DevicePtr p = gpu->alloc(kBytes, "covered");
  const std::uint64_t before = handles_of(gpu->native(s)).semaphore_value;
  gpu->memset(p, 0x5a, kBytes, s);
  const gpuplug_vulkan_handles_t& w = handles_of(gpu->native(s));
  BOOST_TEST(w.semaphore_value > before);
  const auto device = static_cast<VkDevice>(w.device);
  const auto semaphore = static_cast<VkSemaphore>(w.semaphore);
  VkSemaphoreWaitInfo wait{};
  wait.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
  wait.semaphoreCount = 1;
  wait.pSemaphores = &semaphore;
  wait.pValues = &w.semaphore_value;
  BOOST_TEST_REQUIRE(vkWaitSemaphores(device, &wait, 10'000'000'000ull) == VK_SUCCESS);
  std::uint64_t reached = 0;
  BOOST_TEST_REQUIRE(vkGetSemaphoreCounterValue(device, semaphore, &reached) == VK_SUCCESS);
  BOOST_TEST(reached >= w.semaphore_value);
  std::vector<std::uint8_t> back(kBytes);
  gpu->copy_d2h(back.data(), p, kBytes);
  BOOST_TEST((back.front() == 0x5a && back.back() == 0x5a));
  gpu->free(p);
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
