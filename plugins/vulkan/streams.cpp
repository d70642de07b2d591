// SPDX-License-Identifier: Apache-2.0
// VulkanDevice streams and events: timelines (timeline.hpp) and their points; the command
// buffers and staging regions submissions use.
#include <atomic>
#include <chrono>
#include <exception>
#include <string>
#include <thread>

#include "device.hpp"
#include "submit.hpp"

namespace gpuplug::vulkan {
namespace {

// Stream and event values are unique in the process, so that one backend's value is never live
// in another (the SDK then refuses a foreign stream or event by name). Trivially destructible.
constinit std::atomic<std::uint64_t> g_next_value{1};

std::uint64_t next_value() noexcept { return g_next_value.fetch_add(1, std::memory_order_relaxed); }

void raise(std::atomic<std::uint64_t>& completed, std::uint64_t value) noexcept {
  std::uint64_t seen = completed.load(std::memory_order_relaxed);
  while (seen < value && !completed.compare_exchange_weak(seen, value)) {
  }
}

}  // namespace

Stream::Stream(const DeviceApi& api, VkDevice dev, std::uint64_t stream_id, bool is_blocking,
               VkQueue q, std::uint32_t index)
    : vk(api), device(dev), id(stream_id), blocking(is_blocking), queue(q), queue_index(index) {
  VkSemaphoreTypeCreateInfo type{};
  type.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  type.initialValue = 0;
  VkSemaphoreCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
  info.pNext = &type;
  check(vk.create_semaphore(device, &info, nullptr, &semaphore),
        "stream_create: vkCreateSemaphore");
}

Stream::~Stream() {
  if (semaphore != VK_NULL_HANDLE) vk.destroy_semaphore(device, semaphore, nullptr);
}

bool passed(const Point& p) {
  if (p.value <= p.stream->completed.load(std::memory_order_acquire)) return true;
  std::uint64_t now = 0;
  check(p.stream->vk.get_semaphore_counter_value(p.stream->device, p.stream->semaphore, &now),
        "vkGetSemaphoreCounterValue");
  raise(p.stream->completed, now);
  return now >= p.value;
}

void VulkanDevice::wait(const std::vector<Point>& points, const char* op) {
  for (const Point& p : points) {
    if (p.value == 0 || passed(p)) continue;
    VkSemaphoreWaitInfo info{};
    info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
    info.semaphoreCount = 1;
    info.pSemaphores = &p.stream->semaphore;
    info.pValues = &p.value;
    check(vk_.wait_semaphores(device_, &info, UINT64_MAX), std::string(op) + ": vkWaitSemaphores");
    raise(p.stream->completed, p.value);
  }
}

std::shared_ptr<Stream> VulkanDevice::stream_of(std::uint64_t id, const char* op) {
  const auto found = streams_.find(id);
  if (found == streams_.end())
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT, std::string(op) + ": stream " +
                                                   std::to_string(id) +
                                                   " is not a stream of this backend");
  return found->second;
}

std::vector<Point> VulkanDevice::ordered_points(const std::shared_ptr<Stream>& s) {
  std::vector<Point> out;
  const auto add = [&](Point p) {
    if (p.value != 0 && !passed(p)) out.push_back(std::move(p));
  };
  add(s->last(s));
  if (s->id == 0) {
    for (const auto& [id, u] : streams_)
      if (id != 0 && u->blocking) add(u->last(u));
  } else if (s->blocking) {
    const std::shared_ptr<Stream>& d = streams_.at(0);
    add(d->last(d));
  }
  for (const Point& p : s->waits) add(p);
  return out;
}

bool VulkanDevice::busy_unordered(const Stream& s) {
  for (const auto& [id, u] : streams_)
    if (!ordered(s.id, s.blocking, id, u->blocking) && !passed(u->last(u))) return true;
  return false;
}

std::vector<Point> VulkanDevice::every_stream() {
  std::vector<Point> out;
  for (const auto& [id, u] : streams_)
    if (u->submitted != 0) out.push_back(u->last(u));
  return out;
}

VkCommandBuffer VulkanDevice::idle_command_buffer(const char* op) {
  if (submissions_.size() >= kMaxInFlight) wait({submissions_.front().done}, op);
  while (!submissions_.empty() && passed(submissions_.front().done)) {
    Submission& done = submissions_.front();
    idle_.push_back(done.cmd);
    // This one has completed, so its queue is done with the ones before it (lingering_).
    std::vector<std::shared_ptr<Stream>>& held = lingering_.at(done.done.stream->queue_index);
    held = std::move(done.waited);
    held.push_back(std::move(done.done.stream));
    submissions_.pop_front();
  }
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  if (!idle_.empty()) {
    cmd = idle_.back();
    idle_.pop_back();
    if (const VkResult r = vk_.reset_command_buffer(cmd, 0); r != VK_SUCCESS) {
      idle_.push_back(cmd);
      throw_error(r, std::string(op) + ": vkResetCommandBuffer");
    }
    return cmd;
  }
  VkCommandBufferAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  alloc.commandPool = pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  check(vk_.allocate_command_buffers(device_, &alloc, &cmd),
        std::string(op) + ": vkAllocateCommandBuffers");
  return cmd;
}

std::uint64_t VulkanDevice::stage(std::unique_lock<std::mutex>& lock,
                                  const std::shared_ptr<Stream>& s, std::uint64_t bytes,
                                  bool held, const char* op) {
  for (;;) {
    if (const auto at = ring_.take(bytes, Point{s, s->submitted + 1}, held,
                                   [](const Point& p) { return passed(p); }))
      return *at;
    bool front_held = false;
    const Point front = *ring_.oldest_fence(&front_held);
    lock.unlock();
    try {
      if (front_held && passed(front))
        std::this_thread::yield();  // a d2h copy is reading its region out
      else
        wait({front}, op);
    } catch (...) {
      lock.lock();
      throw;
    }
    lock.lock();
  }
}

std::uint64_t VulkanDevice::vendor_stream_create() {
  return vendor_stream_create_flags(GPUPLUG_STREAM_BLOCKING);
}
std::uint64_t VulkanDevice::vendor_stream_create_flags(std::uint32_t flags) {
  const std::uint64_t id = next_value();
  const bool blocking = flags != GPUPLUG_STREAM_NON_BLOCKING;
  {
    std::lock_guard lock(queue_mutex_);
    const std::uint32_t spare = static_cast<std::uint32_t>(queues_.size()) - 1;
    const std::uint32_t index = spare == 0 ? 0 : 1 + next_queue_++ % spare;
    streams_.emplace(id,
                     std::make_shared<Stream>(vk_, device_, id, blocking, queues_[index], index));
  }
  if (!blocking) {
    std::lock_guard lock(stream_mutex_);
    non_blocking_.insert(id);
  }
  return id;
}
// Waits for the stream's work first, as the ABI asks: free and unload_module wait for the
// streams that exist, so work left on a forgotten stream could still read a freed range or a
// destroyed pipeline. Destroyed either way; a failed wait (device lost) is reported after.
void VulkanDevice::vendor_stream_destroy(std::uint64_t stream) {
  if (captures_.any()) [[unlikely]]
    captures_.forget_stream(stream);
  Point last;
  {
    std::lock_guard lock(queue_mutex_);
    if (const auto found = streams_.find(stream); found != streams_.end())
      last = found->second->last(found->second);
  }
  std::exception_ptr failed;
  try {
    wait({last}, "stream_destroy");
  } catch (...) {
    failed = std::current_exception();
  }
  {
    std::lock_guard lock(queue_mutex_);
    const auto found = streams_.find(stream);
    if (found != streams_.end()) {
      // No submission will take its waits, and two streams waiting on each other's events would
      // otherwise hold each other.
      found->second->waits.clear();
      streams_.erase(found);
    }
  }
  {
    std::lock_guard lock(stream_mutex_);
    non_blocking_.erase(stream);
  }
  if (failed) std::rethrow_exception(failed);
}
void VulkanDevice::vendor_stream_synchronize(std::uint64_t stream) {
  if (captures_.any()) [[unlikely]]
    captures_.check_synchronize(stream, "stream_synchronize");
  Point last;
  {
    std::lock_guard lock(queue_mutex_);
    const std::shared_ptr<Stream> s = stream_of(stream, "stream_synchronize");
    last = s->last(s);
  }
  wait({last}, "stream_synchronize");
}
void VulkanDevice::vendor_synchronize() {
  if (captures_.any()) [[unlikely]]
    captures_.check_device_synchronize("synchronize");
  std::vector<Point> all;
  {
    std::lock_guard lock(queue_mutex_);
    all = every_stream();
  }
  wait(all, "synchronize");
}

std::uint64_t VulkanDevice::vendor_event_create() {
  Event e;
  if (timestamp_mask_ != 0) {
    VkQueryPoolCreateInfo query{};
    query.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    query.queryType = VK_QUERY_TYPE_TIMESTAMP;
    query.queryCount = 1;
    check(vk_.create_query_pool(device_, &query, nullptr, &e.pool),
          "event_create: vkCreateQueryPool");
  }
  const std::uint64_t id = next_value();
  std::lock_guard lock(queue_mutex_);
  events_.emplace(id, std::move(e));
  return id;
}
void VulkanDevice::vendor_event_destroy(std::uint64_t event) {
  Event e;
  {
    std::lock_guard lock(queue_mutex_);
    const auto found = events_.find(event);
    if (found == events_.end()) return;
    e = std::move(found->second);
    events_.erase(found);
  }
  // Its query pool is written by the record's submission: destroyed once that has completed.
  if (e.pool != VK_NULL_HANDLE) {
    try {
      wait({e.at}, "event_destroy");
    } catch (...) {  // device lost: nothing runs any more
    }
    vk_.destroy_query_pool(device_, e.pool, nullptr);
  }
}

void VulkanDevice::vendor_event_record(std::uint64_t event, std::uint64_t stream) {
  if (captures_.any() && captures_.record_event(event, stream)) [[unlikely]]
    return;
  std::unique_lock lock(queue_mutex_);
  Event& e = events_.at(event);
  const std::shared_ptr<Stream> s = stream_of(stream, "event_record");
  if (e.pool != VK_NULL_HANDLE) {
    const VkQueryPool pool = e.pool;
    e.at = submit("event_record", s, [&](VkCommandBuffer cmd) {
      vk_.cmd_reset_query_pool(cmd, pool, 0, 1);
      vk_.cmd_write_timestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, 0);
    });
    return;
  }
  // No timestamps: the host's clock once the work before the event has completed.
  const Point at = s->last(s);
  lock.unlock();
  wait({at}, "event_record");
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
  lock.lock();
  const auto found = events_.find(event);
  if (found == events_.end()) return;  // destroyed meanwhile
  found->second.at = at.value != 0 ? at : Point{s, 0};
  found->second.host_ns = static_cast<std::uint64_t>(ns);
}
void VulkanDevice::vendor_stream_wait_event(std::uint64_t stream, std::uint64_t event) {
  if (captures_.any() && captures_.wait_event(stream, event, blocks_with_default(stream)))
      [[unlikely]]
    return;
  std::lock_guard lock(queue_mutex_);
  const Event& e = events_.at(event);
  if (e.at.value == 0) return;  // never recorded (or recorded with nothing before it)
  const std::shared_ptr<Stream> s = stream_of(stream, "stream_wait_event");
  // A stream's own work is in order already; keeping its own point would also make the stream
  // hold itself.
  if (e.at.stream != s) s->waits.push_back(e.at);
}
void VulkanDevice::vendor_event_synchronize(std::uint64_t event) {
  Point at;
  {
    std::lock_guard lock(queue_mutex_);
    at = events_.at(event).at;
  }
  wait({at}, "event_synchronize");
}
bool VulkanDevice::vendor_event_query(std::uint64_t event) {
  std::lock_guard lock(queue_mutex_);
  const Event& e = events_.at(event);
  return e.at.value == 0 || passed(e.at);
}

std::uint64_t VulkanDevice::event_ns(const Event& e) {
  if (e.pool == VK_NULL_HANDLE) return e.host_ns;
  std::uint64_t ticks = 0;
  check(vk_.get_query_pool_results(device_, e.pool, 0, 1, sizeof ticks, &ticks, sizeof ticks,
                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "event_elapsed_ms: vkGetQueryPoolResults");
  return static_cast<std::uint64_t>(static_cast<double>(ticks & timestamp_mask_) *
                                    timestamp_period_ns_);
}

float VulkanDevice::vendor_event_elapsed_ms(std::uint64_t start, std::uint64_t end) {
  std::lock_guard lock(queue_mutex_);
  const Event& a = events_.at(start);
  const Event& b = events_.at(end);
  for (const auto& [id, e] : {std::pair{start, &a}, std::pair{end, &b}}) {
    if (e->at.stream == nullptr)
      sdk::fail(GPUPLUG_STATUS_UNAVAILABLE,
                "event " + std::to_string(id) + " has not been recorded");
    if (!passed(e->at))
      sdk::fail(GPUPLUG_STATUS_UNAVAILABLE, "event " + std::to_string(id) + " has not completed");
  }
  const std::uint64_t ta = event_ns(a);
  const std::uint64_t tb = event_ns(b);
  // An end recorded before its start (as the ABI allows) gives a negative time.
  const double ns = tb >= ta ? static_cast<double>(tb - ta) : -static_cast<double>(ta - tb);
  return static_cast<float>(ns / 1e6);
}

}  // namespace gpuplug::vulkan
