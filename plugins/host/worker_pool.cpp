// SPDX-License-Identifier: Apache-2.0
// The host executor's worker pool: a ring buffer of jobs, drained by a fixed set of threads.
#include "worker_pool.hpp"

#include <sched.h>

#include <algorithm>

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

}  // namespace gpuplug::host
