/* SPDX-License-Identifier: Apache-2.0
 * The Vulkan objects behind a vulkan backend, for a Vulkan library that works beside it
 * (docs/interop.md, "Native handles and import").
 *
 * `GpuBackend::native(stream)` on a vulkan backend (vendor "vulkan") returns in `context` a
 * `const gpuplug_vulkan_handles_t*` for that stream, and in `stream` the VkQueue its work runs on
 * (streams share a few queues of one family). The struct is the stream's and stays valid until
 * the stream is destroyed (the default stream's: until the backend is); each call refreshes it.
 * The objects belong to the backend; never destroy them through Vulkan.
 *
 * A gpuplug stream is a timeline semaphore: every operation queued on it signals the next value.
 * Before using what gpuplug's work queued so far produced, wait for `semaphore` to reach
 * `semaphore_value` (a vkQueueSubmit wait, or vkWaitSemaphores). Work submitted from outside is
 * not ordered with gpuplug's later work: wait for it (a fence, or vkQueueWaitIdle) before giving
 * gpuplug its results.
 *
 * Vulkan requires a queue's submissions to be externally synchronized: submit to `queue` (and
 * vkQueueWaitIdle it) only between `lock_queue(queue_owner)` and `unlock_queue(queue_owner)`,
 * which hold the lock gpuplug's own submissions take.
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
  void* semaphore;           /* VkSemaphore (timeline): the stream's, to wait on before using
                              * gpuplug's results (valid while the stream is) */
  uint64_t semaphore_value;  /* the value its work queued before native() reaches (0: none) */
  void* queue_owner;         /* the argument of lock_queue / unlock_queue */
  void (*lock_queue)(void* queue_owner);
  void (*unlock_queue)(void* queue_owner);
} gpuplug_vulkan_handles_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUPLUG_VULKAN_HANDLES_H */
