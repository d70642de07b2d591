// SPDX-License-Identifier: Apache-2.0
// SpinMutex: the lock of critical sections a few dozen instructions long (the ledger's).
#pragma once

#include <atomic>
#include <thread>

namespace gpuplug::sdk::detail {

/// A test-and-test-and-set lock for critical sections that never block, allocate rarely and
/// run a few dozen instructions: uncontended it is cheaper than std::mutex or std::shared_mutex
/// (docs/PERFORMANCE.md, "Notes from the plugin SDK code"). A waiter backs off, then yields its
/// core, so a holder that was preempted runs again soon even with more threads than cores.
///
/// Meets Lockable: use it with std::lock_guard / std::unique_lock. Not recursive.
class SpinMutex {
 public:
  void lock() noexcept {
    while (locked_.exchange(true, std::memory_order_acquire)) wait_until_free();
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  // Out of line and cold: the uncontended path stays small in its callers.
  [[gnu::noinline, gnu::cold]] void wait_until_free() noexcept {
    // Exponential backoff, then yield: contended, the lock changes hands at a bounded rate.
    unsigned pauses = 1;
    for (unsigned round = 0; locked_.load(std::memory_order_relaxed); ++round) {
      if (round < 16) {
        for (unsigned i = 0; i < pauses; ++i) relax();
        pauses = pauses < 64 ? pauses * 2 : pauses;
      } else {
        std::this_thread::yield();
      }
    }
  }
  static void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  std::atomic<bool> locked_{false};
};

}  // namespace gpuplug::sdk::detail
