// SPDX-License-Identifier: Apache-2.0
// Memory you can see: a backend's memory snapshot (JSON schema 1), scoped counters, and the
// out-of-memory observer (docs/memory.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <gpuplug/config.hpp>  // first: the C++20 check, the export region
#include <gpuplug/types.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

GPUPLUG_API_BEGIN
namespace gpuplug {

class GpuBackend;

/// The layout version of a snapshot's JSON ("schema"; share/gpuplug/memory.schema.json). Fields
/// are only ever added within a version, and readers ignore fields they do not know.
inline constexpr int memory_snapshot_schema = 1;

/// The most bytes of snapshot text the core takes from a plugin (it is never trusted for length).
inline constexpr std::size_t max_plugin_snapshot_bytes = std::size_t{256} << 20;

/// Device or managed memory, as the ledger records it.
/// external: memory someone else allocated, wrapped by GpuBackend::import_memory (never freed by
/// gpuplug).
/// pinned: page-locked host memory mapped into the device (GpuBackend::alloc_host_pinned),
/// recorded at its device address; in live_count and live_pinned_bytes, not in live_bytes.
/// arena: long-lived device memory (GpuBackend::alloc_arena); in live_count and arena_bytes, not
/// in live_bytes.
enum class AllocKind : std::int32_t { device = 0, managed = 1, external = 2, pinned = 3, arena = 4 };

/// One live allocation.
struct LiveAllocation {
  DevicePtr ptr;
  std::uint64_t bytes = 0;
  AllocKind kind = AllocKind::device;
  std::string site;            // the call site ("" when none was given)
  std::uint64_t sequence = 0;  // the ledger's event number: allocations and frees count it
  std::optional<std::uint64_t> time_ns;  // since the backend was made; only with memory_history
};

/// One call site's totals. The peak is the highest its live bytes have been since the backend was
/// made or reset_peak (a site with nothing live and no history event is forgotten, peak and all).
struct SiteMemory {
  std::string site;
  std::uint64_t live_bytes = 0;
  std::uint64_t live_count = 0;
  std::uint64_t peak_bytes = 0;
};

/// One event of the history ring (`memory_history=N`).
struct MemoryEvent {
  std::uint64_t sequence = 0;
  std::uint64_t time_ns = 0;  // since the backend was made
  bool is_free = false;
  DevicePtr ptr;
  std::uint64_t bytes = 0;
  AllocKind kind = AllocKind::device;
  std::string site;
};

/// What one OpCache scratch tag holds: its live buffer, and the buffers it outgrew, which stay
/// allocated until OpCache::release. Its ledger site is "<cache>: <tag>": "op scratch: act" for
/// the backend's own cache, "op scratch (model A): act" for the model cache OpCache(gpu,
/// "model A").
struct ScratchMemory {
  std::string cache;  // the cache's label: "op scratch", "op scratch (model A)"
  std::string tag;
  std::uint64_t live_bytes = 0;
  std::uint64_t retired_bytes = 0;
  std::uint64_t retired_count = 0;
};

/// A backend's memory at one moment (GpuBackend::memory_snapshot).
struct MemorySnapshot {
  int schema = memory_snapshot_schema;
  std::string backend;  // "host:0"
  /// False when the plugin predates ABI 1.2: then only `totals` and `device_memory_limit` are
  /// unknown-free, and `partial_reason` says why the rest is empty.
  bool complete = true;
  std::string partial_reason;
  LedgerStats totals;
  std::optional<std::uint64_t> device_memory_limit;
  std::optional<MemoryInfo> device;  // the device's free and total memory; nullopt if unknown
  std::vector<SiteMemory> sites;     // by live bytes, largest first
  std::vector<LiveAllocation> allocations;  // by sequence
  std::uint64_t history_capacity = 0;       // 0: memory_history is off
  std::uint64_t history_dropped = 0;        // events the ring overwrote
  std::vector<MemoryEvent> history;         // oldest first
  std::vector<ScratchMemory> op_scratch;    // the backend's OpCache and its model caches
};

/// Live bytes apart by kind. Only `device` counts against device_memory_limit.
struct MemoryKinds {
  std::uint64_t device = 0;
  std::uint64_t managed = 0;
  std::uint64_t external = 0;  // imported (GpuBackend::import_memory): gpuplug never frees it
};

/// The snapshot's live bytes by kind: managed from its totals, external from its allocations,
/// device the rest (so the three add up to totals.live_bytes). A partial snapshot has no
/// allocations: its external memory, if any, is counted as device.
MemoryKinds live_by_kind(const MemorySnapshot& snapshot) noexcept;

/// The snapshot as JSON (schema `memory_snapshot_schema`); strings are escaped to valid UTF-8.
std::string to_json(const MemorySnapshot& snapshot);

/// Text that is not a memory snapshot this gpuplug reads; what() names the source and the reason
/// ("a.json: line 3: expected ':'", "b.json: schema 2, this gpuplug reads 1").
class BadSnapshot : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Reads what to_json wrote (or a plugin's ledger part of it). `source` names the input in
/// errors. Throws BadSnapshot.
MemorySnapshot parse_memory_snapshot(std::string_view text, const std::string& source);

/// What a MemoryScope saw, every thread's allocations on its backend included (nested scopes
/// too): the highest live bytes rose above where they were when it began, and where they ended.
struct MemoryScopeResult {
  std::string name;
  std::uint64_t peak_bytes = 0;
  std::int64_t net_bytes = 0;
};

/// A scoped counter, as RMM's statistics adaptor's push_counters: `MemoryScope s(gpu, "layer 1")`
/// ... `s.end()`. Scopes nest and may overlap across threads; each sees the whole backend.
/// Thread-safety: one scope is used by one thread; many scopes may be open at once. Throws
/// Error(unsupported) at construction on a backend whose plugin predates ABI 1.2.
class MemoryScope {
 public:
  MemoryScope(GpuBackend& gpu, std::string name);
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;
  /// Ends the scope if `end` was not called (its result is then dropped). Never throws.
  ~MemoryScope();
  /// Ends the scope (once; later calls return the same result). Throws Error from the backend.
  const MemoryScopeResult& end();
  const std::string& name() const noexcept { return result_.name; }

 private:
  GpuBackend& gpu_;
  std::uint64_t id_;
  bool open_ = true;
  MemoryScopeResult result_;
};

/// What the out-of-memory observer is told: the request that failed and the report the Error will
/// carry (its message).
struct OutOfMemory {
  std::string_view backend;  // "host:0"
  std::uint64_t requested_bytes = 0;
  std::string_view site;
  std::string_view report;  // what, the limit or free memory, live bytes, top sites, scratch
  std::string_view operation = "alloc";  // the call that failed: "alloc" or "alloc_managed"
};

/// What the alloc that failed does next: throw the report, or try once more (after the observer
/// freed something, e.g. released caches it owns).
enum class OutOfMemoryAction { fail, retry };

/// Called on the allocating thread when `alloc` or `alloc_managed` fails for lack of memory, at
/// most once per call.
/// An out-of-memory in an allocation the observer itself makes (same thread) does not call it
/// again. If it throws, the alloc throws the Error(out_of_memory) report, with "; the
/// out-of-memory observer failed: <what>" added: the caller sees the out-of-memory it can handle.
using OutOfMemoryObserver = std::function<OutOfMemoryAction(const OutOfMemory&)>;

}  // namespace gpuplug
GPUPLUG_API_END
