// SPDX-License-Identifier: Apache-2.0
// The host executor's worker pool: a fixed set of threads running posted jobs in FIFO order.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace gpuplug::host {

/// A fixed set of worker threads running posted jobs in FIFO order. Jobs are plain
/// {function, argument} pairs so that posting allocates nothing beyond the queue's storage.
/// Thread-safety: every member may be called concurrently, except the destructor.
class WorkerPool {
 public:
  struct Job {
    void (*run)(void* arg);
    void* arg;
  };

  /// Starts `threads` workers (at least one).
  explicit WorkerPool(unsigned threads);
  /// Runs whatever is still queued, then joins the workers.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  unsigned size() const noexcept { return static_cast<unsigned>(threads_.size()); }
  /// Queues `copies` copies of `job`.
  void post(Job job, std::size_t copies = 1);
  /// Removes queued (not yet started) jobs whose argument is `arg`; returns how many.
  std::size_t cancel(const void* arg) noexcept;

 private:
  void work() noexcept;

  // A ring buffer rather than a deque: after warm-up, posting and taking jobs allocate nothing
  // (a deque allocates and frees a block every few dozen jobs).
  bool pop(Job& job) noexcept;  // caller holds mutex_

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Job> ring_;  // guarded by mutex_; capacity is a power of two
  std::size_t head_ = 0;   // guarded by mutex_; index of the oldest job
  std::size_t count_ = 0;  // guarded by mutex_
  bool stopping_ = false;  // guarded by mutex_
  std::vector<std::thread> threads_;
};

/// Worker threads for this machine: the CPUs this process may run on (at least 1).
unsigned machine_threads() noexcept;

}  // namespace gpuplug::host
