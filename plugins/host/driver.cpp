// SPDX-License-Identifier: Apache-2.0
// The host backend's driver: worker pool, stream queues with ownership hand-off, parallel grids.
#include "driver.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "failure.hpp"

namespace gpuplug::host {

unsigned machine_threads() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// ---- WorkerPool --------------------------------------------------------------------------------

WorkerPool::WorkerPool(unsigned threads) {
  threads = std::max(1u, threads);
  threads_.reserve(threads);
  try {
    for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  } catch (...) {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
    throw;
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::post(Job job, std::size_t copies) {
  if (copies == 0) return;
  {
    std::lock_guard lock(mutex_);
    if (count_ + copies > ring_.size()) {  // grow: copy the jobs out in order, head at 0
      std::size_t capacity = std::max<std::size_t>(ring_.size(), 64);
      while (capacity < count_ + copies) capacity *= 2;
      std::vector<Job> bigger(capacity);
      for (std::size_t i = 0; i < count_; ++i) bigger[i] = ring_[(head_ + i) & (ring_.size() - 1)];
      ring_.swap(bigger);
      head_ = 0;
    }
    const std::size_t mask = ring_.size() - 1;
    for (std::size_t i = 0; i < copies; ++i) ring_[(head_ + count_ + i) & mask] = job;
    count_ += copies;
  }
  if (copies == 1)
    wake_.notify_one();
  else
    wake_.notify_all();
}

std::size_t WorkerPool::cancel(const void* arg) noexcept {
  std::lock_guard lock(mutex_);
  // Compact in place, keeping the order of the jobs that stay.
  const std::size_t mask = ring_.size() - 1;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < count_; ++i) {
    const Job j = ring_[(head_ + i) & mask];
    if (j.arg != arg) ring_[(head_ + kept++) & mask] = j;
  }
  const std::size_t removed = count_ - kept;
  count_ = kept;
  return removed;
}

bool WorkerPool::pop(Job& job) noexcept {
  if (count_ == 0) return false;
  job = ring_[head_];
  head_ = (head_ + 1) & (ring_.size() - 1);
  --count_;
  return true;
}

void WorkerPool::work() noexcept {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || count_ != 0; });
      if (!pop(job)) return;  // stopping, and nothing left to run
    }
    job.run(job.arg);
  }
}

// ---- grids -------------------------------------------------------------------------------------

/// One launch in flight; lives on the launching thread's stack. Helpers are pool jobs that
/// claim blocks from `next`; `outstanding` counts helpers posted and not yet finished (or
/// cancelled), and the launcher waits for it to reach zero before the Grid goes away.
struct Executor::Grid {
  gpuplug_host_kernel_fn kernel;
  void** params;
  gpuplug_dim3_t grid;
  gpuplug_dim3_t block;
  std::uint32_t shared_bytes;
  std::uint64_t total;
  std::atomic<std::uint64_t> next{0};
  std::mutex mutex;
  std::condition_variable done;
  std::size_t outstanding = 0;  // guarded by mutex
};

namespace {

/// Per-participant block shared memory: aligned like device shared memory, reused by the
/// participant's successive blocks (its content is undefined at block start, as on a GPU).
struct SharedMemory {
  explicit SharedMemory(std::uint32_t bytes)
      : ptr(bytes == 0 ? nullptr : ::operator new (bytes, std::align_val_t{256})) {}
  ~SharedMemory() {
    if (ptr != nullptr) ::operator delete (ptr, std::align_val_t{256});
  }
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  void* ptr;
};

void run_blocks(gpuplug_host_kernel_fn kernel, void** params, gpuplug_dim3_t grid,
                gpuplug_dim3_t block, std::uint32_t shared_bytes, void* shared, std::uint64_t total,
                std::atomic<std::uint64_t>& next) noexcept {
  gpuplug_host_block_t b{grid, block, {0, 0, 0}, shared_bytes, shared};
  const std::uint64_t gx = grid.x, gxy = static_cast<std::uint64_t>(grid.x) * grid.y;
  for (;;) {
    const std::uint64_t i = next.fetch_add(1, std::memory_order_relaxed);
    if (i >= total) return;
    b.block_idx.x = static_cast<std::uint32_t>(i % gx);
    b.block_idx.y = static_cast<std::uint32_t>((i / gx) % grid.y);
    b.block_idx.z = static_cast<std::uint32_t>(i / gxy);
    kernel(&b, params);
  }
}

}  // namespace

void Executor::help_grid(void* arg) noexcept {
  Grid& g = *static_cast<Grid*>(arg);
  try {
    SharedMemory shared(g.shared_bytes);
    run_blocks(g.kernel, g.params, g.grid, g.block, g.shared_bytes, shared.ptr, g.total, g.next);
  } catch (...) {
    // No memory for this helper's shared buffer: it sits out; the launcher runs the blocks.
  }
  // Notify under the lock: once the launcher sees zero it destroys the Grid.
  std::lock_guard lock(g.mutex);
  if (--g.outstanding == 0) g.done.notify_all();
}

void Executor::run_grid(gpuplug_host_kernel_fn kernel, gpuplug_dim3_t grid, gpuplug_dim3_t block,
                        std::uint32_t shared_bytes, void** params) {
  const std::uint64_t total = static_cast<std::uint64_t>(grid.x) * grid.y * grid.z;
  SharedMemory shared(shared_bytes);  // the launcher's own; throws bad_alloc before anything ran
  Grid g{kernel, params, grid, block, shared_bytes, total};
  const std::size_t helpers =
      static_cast<std::size_t>(std::min<std::uint64_t>(total - 1, pool_.size()));
  if (helpers != 0) {
    g.outstanding = helpers;
    try {
      pool_.post({&Executor::help_grid, &g}, helpers);
    } catch (...) {
      g.outstanding = 0;  // nothing was queued (insert is all or nothing); run alone
    }
  }
  run_blocks(kernel, params, grid, block, shared_bytes, shared.ptr, total, g.next);
  if (helpers != 0) {
    // Every block is claimed: helpers still queued have nothing to do, so take them back
    // instead of waiting for a worker to pick them up.
    const std::size_t cancelled = pool_.cancel(&g);
    std::unique_lock lock(g.mutex);
    g.outstanding -= cancelled;
    g.done.wait(lock, [&] { return g.outstanding == 0; });
  }
}

// ---- streams -----------------------------------------------------------------------------------

/// A launch waiting for its turn on a stream; lives on the launching thread's stack.
struct Executor::Handoff {
  std::mutex mutex;
  std::condition_variable turn;
  bool ready = false;  // guarded by mutex
};

Executor::Executor(unsigned threads) : pool_(threads) {}

Executor::~Executor() { synchronize(); }

std::uint64_t Executor::create_stream() {
  auto s = std::make_shared<Stream>();
  std::unique_lock lock(streams_mutex_);
  const std::uint64_t id = next_stream_++;
  streams_.emplace(id, std::move(s));
  return id;
}

std::shared_ptr<Executor::Stream> Executor::find(std::uint64_t stream) const {
  std::shared_lock lock(streams_mutex_);
  auto it = streams_.find(stream);
  if (it == streams_.end())
    sdk::fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "unknown stream " + std::to_string(stream) +
                                                   " (never created on this device, or destroyed)");
  return it->second;
}

void Executor::destroy_stream(std::uint64_t stream) {
  std::shared_ptr<Stream> s = find(stream);
  wait_idle(*s);
  std::unique_lock lock(streams_mutex_);
  streams_.erase(stream);
}

void Executor::wait_idle(Stream& s) {
  std::unique_lock lock(s.mutex);
  s.idle.wait(lock, [&] { return !s.active && s.queue.empty(); });
}

void Executor::synchronize_stream(std::uint64_t stream) {
  if (stream == 0) {
    synchronize();
    return;
  }
  wait_idle(*find(stream));
}

void Executor::synchronize() {
  // Waits under the shared lock (no copy of the list, so the default-stream path allocates
  // nothing): drains never take streams_mutex_, and enqueueing takes it shared, so only
  // stream_create / stream_destroy wait for this.
  std::shared_lock lock(streams_mutex_);
  for (const auto& [id, s] : streams_) wait_idle(*s);
}

void Executor::run(const Item& item) noexcept {
  switch (item.kind) {
    case Item::Kind::copy:
      std::memmove(item.dst, item.src, item.bytes);
      break;
    case Item::Kind::fill:
      std::memset(item.dst, item.value, item.bytes);
      break;
    case Item::Kind::handoff:
      break;  // handled by drain
  }
}

void Executor::drain(void* arg) noexcept {
  Stream& s = *static_cast<Stream*>(arg);
  for (;;) {
    Item item;
    {
      std::lock_guard lock(s.mutex);
      if (s.queue.empty()) {
        s.active = false;
        s.idle.notify_all();  // under the lock: a waiter may destroy the stream once it sees idle
        return;
      }
      item = s.queue.front();
      s.queue.pop_front();
      if (item.kind == Item::Kind::handoff) {
        // The stream stays active: ownership passes to the waiting launcher, who drains
        // whatever queued behind it when it is done (release).
        std::lock_guard turn_lock(item.handoff->mutex);
        item.handoff->ready = true;
        item.handoff->turn.notify_one();
        return;
      }
    }
    run(item);
  }
}

void Executor::enqueue(std::uint64_t stream, const Item& item) {
  std::shared_ptr<Stream> s = find(stream);
  bool start = false;
  {
    std::lock_guard lock(s->mutex);
    s->queue.push_back(item);
    if (!s->active) s->active = start = true;
  }
  if (start) {
    try {
      pool_.post({&Executor::drain, s.get()});
    } catch (...) {
      drain(s.get());  // cannot queue the drain job: run the stream here instead
    }
  }
}

void Executor::acquire(Stream& s) {
  Handoff handoff;
  {
    std::lock_guard lock(s.mutex);
    if (!s.active) {  // idle (and so empty): take it directly, no trip through the pool
      s.active = true;
      return;
    }
    s.queue.push_back(Item{Item::Kind::handoff, nullptr, nullptr, 0, 0, &handoff});
  }
  std::unique_lock lock(handoff.mutex);
  handoff.turn.wait(lock, [&] { return handoff.ready; });
}

void Executor::release(Stream& s) noexcept {
  {
    std::lock_guard lock(s.mutex);
    if (s.queue.empty()) {
      s.active = false;
      s.idle.notify_all();
      return;
    }
  }
  try {
    pool_.post({&Executor::drain, &s});
  } catch (...) {
    drain(&s);
  }
}

void Executor::copy(std::uint64_t stream, void* dst, const void* src, std::size_t bytes) {
  if (stream == 0) {
    synchronize();
    std::memmove(dst, src, bytes);
    return;
  }
  enqueue(stream, Item{Item::Kind::copy, dst, src, bytes, 0, nullptr});
}

void Executor::fill(std::uint64_t stream, void* dst, std::uint8_t value, std::size_t bytes) {
  if (stream == 0) {
    synchronize();
    std::memset(dst, value, bytes);
    return;
  }
  enqueue(stream, Item{Item::Kind::fill, dst, nullptr, bytes, value, nullptr});
}

void Executor::launch(std::uint64_t stream, gpuplug_host_kernel_fn kernel, gpuplug_dim3_t grid,
                      gpuplug_dim3_t block, std::uint32_t shared_bytes, void** params) {
  if (stream == 0) {
    synchronize();
    run_grid(kernel, grid, block, shared_bytes, params);
    return;
  }
  std::shared_ptr<Stream> s = find(stream);
  acquire(*s);
  try {
    run_grid(kernel, grid, block, shared_bytes, params);
  } catch (...) {
    release(*s);
    throw;
  }
  release(*s);
}

}  // namespace gpuplug::host
