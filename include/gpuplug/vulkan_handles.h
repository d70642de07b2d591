/* SPDX-License-Identifier: Apache-2.0
 * The Vulkan objects behind a vulkan backend, for a Vulkan library that works beside it
 * (docs/interop.md, "Native handles and import").
 *
 * `GpuBackend::native(stream)` on a vulkan backend (vendor "vulkan") returns in `context` a
 * `const gpuplug_vulkan_handles_t*`, and in `stream` the VkQueue that stream's work runs on (every
 * stream's is the same queue). The struct and the objects belong to the backend and stay valid
 * until it is destroyed; never destroy them through Vulkan.
 *
 * Vulkan requires a queue's submissions to be externally synchronized: submit to `queue` (and
 * vkQueueWaitIdle it) only between `lock_queue(queue_owner)` and `unlock_queue(queue_owner)`,
 * which hold the lock gpuplug's own submissions take. Every operation gpuplug queues has
 * completed when its call returns, so work submitted afterwards sees its results once it starts
 * (`semaphore` is VK_NULL_HANDLE and `semaphore_value` 0: there is nothing to wait for).
 *
 * Plain C with fixed-size fields; a later version only appends fields, so read `struct_size`
 * first. Handles are cast to void*: include <vulkan/vulkan.h> to cast them back. */
#ifndef GPUPLUG_VULKAN_HANDLES_H
#define GPUPLUG_VULKAN_HANDLES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpuplug_vulkan_handles_t {
  uint32_t struct_size;      /* sizeof(gpuplug_vulkan_handles_t) of the plugin that filled it */
  uint32_t api_version;      /* the VkInstance's API version (VK_MAKE_API_VERSION) */
  uint32_t queue_family;     /* the queue family index of `queue` (compute capable) */
  uint32_t queue_index;      /* its index in that family (vkGetDeviceQueue) */
  void* instance;            /* VkInstance (one for the process) */
  void* physical_device;     /* VkPhysicalDevice */
  void* device;              /* VkDevice: bufferDeviceAddress, timelineSemaphore, shaderInt64 and
                              * storageBuffer8BitAccess enabled */
  void* queue;               /* VkQueue */
  void* semaphore;           /* VkSemaphore (timeline) to wait on before using gpuplug's results;
                              * VK_NULL_HANDLE: they are complete when each call returns */
  uint64_t semaphore_value;  /* the value to wait for (0 with no semaphore) */
  void* queue_owner;         /* the argument of lock_queue / unlock_queue */
  void (*lock_queue)(void* queue_owner);
  void (*unlock_queue)(void* queue_owner);
} gpuplug_vulkan_handles_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUPLUG_VULKAN_HANDLES_H */
