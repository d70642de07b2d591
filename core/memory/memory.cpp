// SPDX-License-Identifier: Apache-2.0
// GpuBackend's memory you can see: snapshots, peaks, scopes, and the out-of-memory report with
// its observer (docs/memory.md).
#include <algorithm>
#include <cstdio>
#include <gpuplug/backend.hpp>
#include <gpuplug/log.hpp>
#include <gpuplug/memory.hpp>
#include <gpuplug/support/failures.hpp>
#include <gpuplug/support/text.hpp>
#include <utility>

namespace gpuplug {

namespace {

using support::short_bytes;

/// The backend whose out-of-memory observer runs on this thread, if any: an allocation the
/// observer makes that runs out of memory too is reported without calling it again (no
/// recursion). Per thread, not per backend: it only says what this thread is doing.
thread_local const GpuBackend* observing = nullptr;

}  // namespace

// ---- snapshots and peaks ------------------------------------------------------------------------

MemorySnapshot GpuBackend::memory_snapshot() {
  MemorySnapshot s = ledger_snapshot();
  s.backend = std::string(name());
  try {
    s.device = memory_info();
  } catch (const Error&) {
    s.device.reset();  // unknown: the snapshot says so (null) rather than failing
  }
  s.op_scratch = op_cache_.scratch_memory();
  return s;
}

MemorySnapshot GpuBackend::ledger_snapshot() {
  MemorySnapshot s;
  s.backend = std::string(name());
  s.complete = false;
  s.partial_reason =
      "the " + std::string(plugin_name()) + " backend has no ledger snapshot: counters only";
  s.totals = ledger_stats();
  return s;
}

void GpuBackend::reset_peak() {
  throw Error(Status::unsupported, std::string(name()), "reset_peak",
              "not supported by the " + std::string(plugin_name()) + " backend");
}

std::uint64_t GpuBackend::begin_memory_scope() {
  throw Error(Status::unsupported, std::string(name()), "begin_memory_scope",
              "not supported by the " + std::string(plugin_name()) + " backend");
}

MemoryScopeResult GpuBackend::end_memory_scope(std::uint64_t) {
  throw Error(Status::unsupported, std::string(name()), "end_memory_scope",
              "not supported by the " + std::string(plugin_name()) + " backend");
}

// ---- scopes -------------------------------------------------------------------------------------

MemoryScope::MemoryScope(GpuBackend& gpu, std::string name)
    : gpu_(gpu), id_(gpu.begin_memory_scope()) {
  result_.name = std::move(name);
}

MemoryScope::~MemoryScope() {
  if (!open_) return;
  try {
    gpu_.end_memory_scope(id_);
  } catch (...) {
    log(LogLevel::warning, gpu_.name(),
        "memory scope " + result_.name + ": " + support::describe_current_exception());
  }
}

const MemoryScopeResult& MemoryScope::end() {
  if (open_) {
    const MemoryScopeResult r = gpu_.end_memory_scope(id_);
    open_ = false;
    result_.peak_bytes = r.peak_bytes;
    result_.net_bytes = r.net_bytes;
  }
  return result_;
}

// ---- out of memory ------------------------------------------------------------------------------

void GpuBackend::set_out_of_memory_observer(OutOfMemoryObserver observer) {
  auto held = observer ? std::make_shared<const OutOfMemoryObserver>(std::move(observer)) : nullptr;
  std::lock_guard lock(observer_mutex_);
  observer_ = std::move(held);
}

namespace {

/// The out-of-memory report: "out of memory allocating <bytes> at <site>: <reason>; <live> live:
/// <the 3 largest sites>; device_memory_limit ...; device <free> free of <total>; op scratch
/// held: ...". Never throws (without memory for the report it returns `reason`).
std::string out_of_memory_report(GpuBackend& gpu, std::size_t bytes, const char* site,
                                 const std::string& reason, std::string_view operation) noexcept {
  try {
    std::string out = "out of memory allocating " + short_bytes(bytes);
    if (operation == "alloc_managed") out += " of managed memory";
    if (site != nullptr && site[0] != '\0') out += std::string(" at ") + site;
    out += ": " + reason;
    // What holds the memory. Each part is best effort: a report that cannot say more still says
    // what it can.
    try {
      const MemorySnapshot s = gpu.memory_snapshot();
      out += "; " + short_bytes(s.totals.live_bytes) + " live";
      // Sites come largest first; one with nothing live (only a peak) is not listed.
      if (!s.sites.empty() && s.sites.front().live_bytes != 0) {
        out += ": ";
        const std::size_t shown = std::min<std::size_t>(3, s.sites.size());
        std::uint64_t rest = s.totals.live_bytes;
        for (std::size_t i = 0; i < shown; ++i) {
          if (s.sites[i].live_bytes == 0) break;
          if (i != 0) out += ", ";
          out += short_bytes(s.sites[i].live_bytes) + " " +
                 (s.sites[i].site.empty() ? std::string("<no site>") : s.sites[i].site);
          rest -= std::min(rest, s.sites[i].live_bytes);
        }
        if (rest != 0 && s.sites.size() > shown) out += ", " + short_bytes(rest) + " elsewhere";
      }
      if (s.device_memory_limit)
        out += "; device_memory_limit " + short_bytes(*s.device_memory_limit);
      if (s.device)
        out += "; device " + short_bytes(s.device->free_bytes) + " free of " +
               short_bytes(s.device->total_bytes);
      std::uint64_t live = 0;
      std::uint64_t retired = 0;
      for (const ScratchMemory& m : s.op_scratch) {
        live += m.live_bytes;
        retired += m.retired_bytes;
      }
      out += "; op scratch held: " + short_bytes(live) + " live, " + short_bytes(retired) +
             " retired (OpCache::release frees both)";
      if (!s.complete) out += " (" + s.partial_reason + ")";
    } catch (...) {
      out += "; (the ledger could not be read: " + support::describe_current_exception() + ")";
    }
    return out;
  } catch (...) {
    return reason;  // no memory for the report itself
  }
}

}  // namespace

DevicePtr GpuBackend::out_of_memory(std::size_t bytes, const char* site, const std::string& reason,
                                    const std::function<std::optional<DevicePtr>()>& retry,
                                    std::string_view operation) {
  std::string report = out_of_memory_report(*this, bytes, site, reason, operation);
  std::shared_ptr<const OutOfMemoryObserver> observer;
  {
    std::lock_guard lock(observer_mutex_);
    observer = observer_;
  }
  if (observer && observing != this) {
    OutOfMemoryAction action = OutOfMemoryAction::fail;
    const GpuBackend* outer = std::exchange(observing, this);
    try {
      action = (*observer)(
          OutOfMemory{name(), bytes, site != nullptr ? site : "", report, operation});
    } catch (...) {
      observing = outer;
      // The caller gets the out-of-memory it can handle, saying the observer failed too.
      throw Error(
          Status::out_of_memory, std::string(name()), std::string(operation),
          report + "; the out-of-memory observer failed: " + support::describe_current_exception());
    }
    observing = outer;
    if (action == OutOfMemoryAction::retry) {
      if (const std::optional<DevicePtr> p = retry()) return *p;
      report = out_of_memory_report(*this, bytes, site, reason, operation) +
               " (the out-of-memory observer asked for a retry, which failed too)";
    }
  }
  throw Error(Status::out_of_memory, std::string(name()), std::string(operation), std::move(report));
}

}  // namespace gpuplug
