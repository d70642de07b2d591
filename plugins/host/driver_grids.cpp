// SPDX-License-Identifier: Apache-2.0
// The host executor's grids: a launch's blocks run across the worker pool and the launching
// thread, a throwing block recorded as the stream's pending failure.
#include "driver.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <typeinfo>
#include <utility>


namespace gpuplug::host {

/// One launch in flight; lives on the launching thread's stack. Helpers are pool jobs that
/// claim blocks from `next`; `outstanding` counts helpers posted and not yet finished (or
/// cancelled), and the launcher waits for it to reach zero before the Grid goes away.
struct Executor::Grid {
  gpuplug_host_kernel_fn kernel;
  const std::string* name;  // "module::function", escaped
  void** params;
  gpuplug_dim3_t grid;
  gpuplug_dim3_t block;
  std::uint32_t shared_bytes;
  std::uint64_t total;
  std::atomic<std::uint64_t> next{0};
  std::mutex mutex;
  std::condition_variable done;
  std::size_t outstanding = 0;  // guarded by mutex
  // Where a throwing block records its failure (the launch's stream), under fault->mutex. A
  // pointer rather than a message member: the launch path stays free of string work.
  Fault* fault;
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

// What a kernel's exception may contribute to a message. The text comes from module code, so it
// is untrusted: cut to a bound (a kernel could throw megabytes) and escaped (it could hold
// terminal escapes, newlines that forge log lines, or invalid UTF-8).
constexpr std::size_t kMaxWhatBytes = 512;
constexpr std::size_t kMaxTypeBytes = 160;

/// The type of the exception being handled, demangled where possible ("std::runtime_error").
std::string current_exception_type() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (type == nullptr) return "an unknown type";
  int status = 0;
  char* demangled = abi::__cxa_demangle(type->name(), nullptr, nullptr, &status);
  std::string out = bounded_text(status == 0 && demangled != nullptr ? demangled : type->name(),
                                 kMaxTypeBytes);
  std::free(demangled);  // NOLINT(cppcoreguidelines-no-malloc): __cxa_demangle's contract
  return out;
}

/// "kernel m::f threw std::runtime_error in block (1, 0, 0): what" for the exception being
/// handled; call only inside a catch block. Never throws: without memory for the text it says
/// so in a fixed message (the status still reports the failure).
std::string kernel_exception_message(std::string_view name, gpuplug_dim3_t at) noexcept {
  try {
    std::string where = " in block (" + std::to_string(at.x) + ", " + std::to_string(at.y) +
                        ", " + std::to_string(at.z) + "): ";
    std::string head = "kernel " + std::string(name) + " threw ";
    try {
      throw;
    } catch (const std::exception& e) {
      const char* what = e.what();
      return head + current_exception_type() + where +
             (what != nullptr ? bounded_text(what, kMaxWhatBytes) : std::string("(null what())"));
    } catch (...) {
      return head + "an exception that is not a std::exception (type " +
             current_exception_type() + ")" + where + "unknown exception";
    }
  } catch (...) {
    return {};
  }
}

}  // namespace

// Inlined into both callers: out of line it costs a call on every launch.
[[gnu::always_inline]] inline void Executor::run_blocks(Grid& g, void* shared) noexcept {
  gpuplug_host_block_t b{g.grid, g.block, {0, 0, 0}, g.shared_bytes, shared};
  const std::uint64_t gx = g.grid.x, gxy = static_cast<std::uint64_t>(g.grid.x) * g.grid.y;
  for (;;) {
    const std::uint64_t i = g.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= g.total) return;
    b.block_idx.x = static_cast<std::uint32_t>(i % gx);
    b.block_idx.y = static_cast<std::uint32_t>((i / gx) % g.grid.y);
    b.block_idx.z = static_cast<std::uint32_t>(i / gxy);
    try {
      g.kernel(&b, g.params);
    } catch (...) {
      std::string message = kernel_exception_message(*g.name, b.block_idx);
      // No memory for the description: a text short enough for std::string's inline buffer,
      // so that this assignment cannot allocate (and throw) in a noexcept function.
      if (message.empty()) message = "kernel threw";
      g.next.store(g.total, std::memory_order_relaxed);  // no new blocks; `total` fits in 64 bits
      std::lock_guard lock(g.fault->mutex);
      record(*g.fault, std::move(message));
      return;
    }
  }
}

void Executor::help_grid(void* arg) noexcept {
  Grid& g = *static_cast<Grid*>(arg);
  try {
    SharedMemory shared(g.shared_bytes);
    run_blocks(g, shared.ptr);
  } catch (...) {
    // No memory for this helper's shared buffer: it sits out; the launcher runs the blocks.
  }
  // Notify under the lock: once the launcher sees zero it destroys the Grid.
  std::lock_guard lock(g.mutex);
  if (--g.outstanding == 0) g.done.notify_all();
}

void Executor::run_grid(gpuplug_host_kernel_fn kernel, const std::string& name,
                        gpuplug_dim3_t grid, gpuplug_dim3_t block, std::uint32_t shared_bytes,
                        void** params, Fault& fault) {
  const std::uint64_t total = static_cast<std::uint64_t>(grid.x) * grid.y * grid.z;
  SharedMemory shared(shared_bytes);  // the launcher's own; throws bad_alloc before anything ran
  Grid g{kernel, &name, params, grid, block, shared_bytes, total};
  g.fault = &fault;
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
  run_blocks(g, shared.ptr);
  if (helpers != 0) {
    // Every block is claimed: helpers still queued have nothing to do, so take them back
    // instead of waiting for a worker to pick them up.
    const std::size_t cancelled = pool_.cancel(&g);
    std::unique_lock lock(g.mutex);
    g.outstanding -= cancelled;
    g.done.wait(lock, [&] { return g.outstanding == 0; });
  }
}

}  // namespace gpuplug::host
