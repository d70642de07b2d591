// SPDX-License-Identifier: Apache-2.0
// PluginBackend's memory you can see: the ABI 1.2 ledger slots (snapshot, peaks, scopes) or their
// defaults, arenas (ABI 1.3), and the allocations' out-of-memory path.
#include <cstring>

#include "layers/validate.hpp"
#include "table/plugin_backend.hpp"

namespace gpuplug::detail {

MemorySnapshot PluginBackend::ledger_snapshot() {
  if (optional_.ledger_snapshot == nullptr) {
    MemorySnapshot s = GpuBackend::ledger_snapshot();
    s.partial_reason = "the " + plugin_name_ + " plugin speaks ABI " +
                       abi_version_text(table_.abi_version) +
                       " (ledger_snapshot is ABI 1.2): counters only";
    return s;
  }
  // The snapshot can grow between the two calls; a few tries settle it. The length the plugin
  // claims is capped at max_plugin_snapshot_bytes, never trusted for an allocation.
  std::string text(64 * 1024, '\0');
  for (int attempt = 0; attempt < 4; ++attempt) {
    const std::size_t length = optional_.ledger_snapshot(*this, text.data(), text.size());
    if (length == 0)
      throw Error(Status::internal, name_, "memory_snapshot",
                  "the plugin's ledger_snapshot failed (it returned no text)");
    if (length < text.size()) {
      text.resize(::strnlen(text.c_str(), length));
      try {
        MemorySnapshot s = parse_memory_snapshot(text, "the plugin's ledger_snapshot");
        s.backend = name_;
        return s;
      } catch (const BadSnapshot& e) {
        throw Error(Status::internal, name_, "memory_snapshot", e.what());
      }
    }
    if (length >= max_plugin_snapshot_bytes)
      throw Error(Status::internal, name_, "memory_snapshot",
                  "the plugin's ledger_snapshot is " + std::to_string(length) +
                      " bytes, more than the " + std::to_string(max_plugin_snapshot_bytes) +
                      " this host reads (lower memory_history?)");
    text.assign(length + 1 + length / 4, '\0');
  }
  throw Error(Status::internal, name_, "memory_snapshot",
              "the plugin's ledger_snapshot kept growing while it was read");
}

std::size_t PluginBackend::scan_guard_bands() {
  if (validate_instance_ == nullptr) return 0;
  std::size_t broken = 0;
  check(validate_scan_redzones(validate_instance_, &broken), "scan_redzones");
  return broken;
}

void PluginBackend::reset_peak() { check(optional_.ledger_reset_peak(*this), "reset_peak"); }

std::uint64_t PluginBackend::begin_memory_scope() {
  std::uint64_t scope = 0;
  check(optional_.ledger_scope_begin(*this, &scope), "begin_memory_scope");
  if (scope == 0)
    throw Error(Status::internal, name_, "begin_memory_scope", "the plugin returned scope 0");
  return scope;
}

MemoryScopeResult PluginBackend::end_memory_scope(std::uint64_t scope) {
  MemoryScopeResult r;
  check(optional_.ledger_scope_end(*this, scope, &r.peak_bytes, &r.net_bytes), "end_memory_scope");
  return r;
}

DevicePtr PluginBackend::alloc_arena(std::size_t bytes, const char* site) {
  std::uint64_t out = 0;
  const gpuplug_status_t status = optional_.alloc_arena(*this, bytes, site, &out);
  if (status == GPUPLUG_STATUS_OUT_OF_MEMORY) [[unlikely]]
    return alloc_out_of_memory(bytes, site, AllocOp::alloc_arena);
  check(status, "alloc_arena");
  return DevicePtr{out};
}

void PluginBackend::free_arena(DevicePtr p) {
  if (!p) return;
  check(optional_.free_arena(*this, p.value), "free_arena");
}

gpuplug_status_t PluginBackend::call_alloc(AllocOp op, std::size_t bytes, const char* site,
                                           std::uint64_t* out) {
  switch (op) {
    case AllocOp::alloc_managed:
      return optional_.alloc_managed(*this, bytes, site, out);
    case AllocOp::alloc_arena:
      return optional_.alloc_arena(*this, bytes, site, out);
    case AllocOp::alloc:
      break;
  }
  return table_.alloc(instance_, bytes, site, out);
}

DevicePtr PluginBackend::alloc_out_of_memory(std::size_t bytes, const char* site, AllocOp op) {
  std::string reason;
  try {
    reason = last_error();
  } catch (const std::bad_alloc&) {
    reason = "(no memory to read the plugin's message)";
  }
  if (reason.empty()) reason = "the device has no memory left";
  const char* operation = op == AllocOp::alloc_managed ? "alloc_managed"
                          : op == AllocOp::alloc_arena ? "alloc_arena"
                                                       : "alloc";
  return out_of_memory(
      bytes, site, reason,
      [&]() -> std::optional<DevicePtr> {
        std::uint64_t out = 0;
        const gpuplug_status_t status = call_alloc(op, bytes, site, &out);
        if (status == GPUPLUG_STATUS_OUT_OF_MEMORY) return std::nullopt;
        check(status, operation);
        return DevicePtr{out};
      },
      operation);
}

}  // namespace gpuplug::detail
