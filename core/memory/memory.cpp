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
#include <string>
#include <utility>
#include <vector>

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
  s.op_scratch = op_cache_.all_scratch_memory();  // the model caches' scratch too
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

MemoryKinds live_by_kind(const MemorySnapshot& s) noexcept {
  MemoryKinds k;
  for (const LiveAllocation& a : s.allocations)
    if (a.kind == AllocKind::external) k.external += a.bytes;
  k.managed = s.totals.live_managed_bytes;
  // Clamped: a snapshot read from a file edited by hand must not wrap around.
  const std::uint64_t not_device = k.managed + k.external;
  k.device = s.totals.live_bytes - std::min(s.totals.live_bytes, not_device);
  return k;
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

/// "2.0 MiB device, 1.0 MiB managed", and external memory when there is some.
std::string kinds_text(const MemoryKinds& k) {
  std::string out = short_bytes(k.device) + " device, " + short_bytes(k.managed) + " managed";
  if (k.external != 0) out += ", " + short_bytes(k.external) + " external";
  return out;
}

/// "arenas 1.5 GiB (not in live): 1.0 GiB weights, 512.0 MiB embeddings": the arenas apart from
/// the live bytes, the three largest named.
std::string arenas_text(const MemorySnapshot& s) {
  std::vector<const LiveAllocation*> arenas;
  for (const LiveAllocation& a : s.allocations)
    if (a.kind == AllocKind::arena) arenas.push_back(&a);
  std::stable_sort(arenas.begin(), arenas.end(),
                   [](const LiveAllocation* a, const LiveAllocation* b) { return a->bytes > b->bytes; });
  std::string out = "arenas " + short_bytes(s.totals.arena_bytes) + " (not in live)";
  const std::size_t shown = std::min<std::size_t>(3, arenas.size());
  for (std::size_t i = 0; i < shown; ++i)
    out += (i == 0 ? ": " : ", ") + short_bytes(arenas[i]->bytes) + " " +
           (arenas[i]->site.empty() ? std::string("<no site>") : arenas[i]->site);
  if (arenas.size() > shown) out += " and " + std::to_string(arenas.size() - shown) + " more";
  return out;
}

/// "400.0 KiB load_weights", "1.0 MiB spill (managed)", "1.5 MiB spill (1.0 MiB managed)": what
/// of a site's live bytes is not device memory is said.
std::string site_text(const MemorySnapshot& s, const SiteMemory& site) {
  std::uint64_t managed = 0;
  std::uint64_t external = 0;
  for (const LiveAllocation& a : s.allocations) {
    if (a.site != site.site) continue;
    if (a.kind == AllocKind::managed) managed += a.bytes;
    if (a.kind == AllocKind::external) external += a.bytes;
  }
  std::string out = short_bytes(site.live_bytes) + " " +
                    (site.site.empty() ? std::string("<no site>") : site.site);
  const auto part = [&](std::uint64_t bytes, const char* kind) -> std::string {
    if (bytes == 0) return {};
    return bytes == site.live_bytes ? std::string(kind) : short_bytes(bytes) + " " + kind;
  };
  std::string parts = part(managed, "managed");
  if (const std::string e = part(external, "external"); !e.empty())
    parts += (parts.empty() ? "" : ", ") + e;
  if (!parts.empty()) out += " (" + parts + ")";
  return out;
}

/// "op scratch held: <live> live, <retired> retired (OpCache::release frees both)", then, when
/// more than the backend's own cache holds some, what each cache holds.
std::string scratch_text(const std::vector<ScratchMemory>& scratch) {
  std::uint64_t live = 0;
  std::uint64_t retired = 0;
  std::vector<std::pair<std::string, std::uint64_t>> by_cache;  // in the order first seen
  for (const ScratchMemory& m : scratch) {
    live += m.live_bytes;
    retired += m.retired_bytes;
    auto it = std::find_if(by_cache.begin(), by_cache.end(),
                           [&](const auto& c) { return c.first == m.cache; });
    if (it == by_cache.end()) it = by_cache.insert(by_cache.end(), {m.cache, 0});
    it->second += m.live_bytes + m.retired_bytes;
  }
  std::string out = "op scratch held: " + short_bytes(live) + " live, " + short_bytes(retired) +
                    " retired (OpCache::release frees both)";
  if (by_cache.size() > 1 || (by_cache.size() == 1 && by_cache.front().first != "op scratch")) {
    std::stable_sort(by_cache.begin(), by_cache.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    out += ": ";
    for (std::size_t i = 0; i < by_cache.size(); ++i)
      out += (i == 0 ? "" : ", ") + short_bytes(by_cache[i].second) + " " + by_cache[i].first;
  }
  return out;
}

/// The out-of-memory report: "out of memory allocating <bytes> at <site>: <reason>; <live> live
/// (<device> device, <managed> managed): <the 3 largest sites>; device_memory_limit ... of
/// device memory; device <free> free of <total>; op scratch held: ..." (every OpCache of the
/// backend, the model caches' included). Never throws (without memory for the report it returns
/// `reason`).
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
      // Apart by kind: device_memory_limit counts device memory only, so a total with managed
      // memory in it would seem to pass the limit.
      out +=
          "; " + short_bytes(s.totals.live_bytes) + " live (" + kinds_text(live_by_kind(s)) + ")";
      // Sites come largest first; one with nothing live (only a peak) is not listed.
      if (!s.sites.empty() && s.sites.front().live_bytes != 0) {
        out += ": ";
        const std::size_t shown = std::min<std::size_t>(3, s.sites.size());
        std::uint64_t rest = s.totals.live_bytes;
        for (std::size_t i = 0; i < shown; ++i) {
          if (s.sites[i].live_bytes == 0) break;
          if (i != 0) out += ", ";
          out += site_text(s, s.sites[i]);
          rest -= std::min(rest, s.sites[i].live_bytes);
        }
        if (rest != 0 && s.sites.size() > shown) out += ", " + short_bytes(rest) + " elsewhere";
      }
      if (s.totals.arena_bytes != 0) out += "; " + arenas_text(s);
      if (s.device_memory_limit)
        out += "; device_memory_limit " + short_bytes(*s.device_memory_limit) + " of device memory";
      if (s.device)
        out += "; device " + short_bytes(s.device->free_bytes) + " free of " +
               short_bytes(s.device->total_bytes);
      out += "; " + scratch_text(s.op_scratch);
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
