// SPDX-License-Identifier: Apache-2.0
// The SDK's C edge, shared by its slot files (not installed): what the edge reaches in a Device,
// the exception-to-status rule every slot applies, and the argument checks they share.
#pragma once

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "events.hpp"
#include "graphs.hpp"
#include "gpuplug/support/c_string.hpp"
#include "gpuplug/support/failures.hpp"
#include "ledger.hpp"
#include "module_registry.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::sdk::detail {

using support::copy_out;

/// What the edge reaches in a Device that vendors do not: the ledger, the registry, the stream
/// set for changes, the sweep and the error slots.
struct DeviceAccess {
  static AllocationLedger& ledger(Device& d) noexcept { return *d.ledger_; }
  static ModuleRegistry& modules(Device& d) noexcept { return *d.modules_; }
  static StreamSet& streams(Device& d) noexcept { return d.streams_; }
  static EventSet& events(Device& d) noexcept { return *d.events_; }
  static GraphSet& graphs(Device& d) noexcept { return *d.graphs_; }
  static SweepResult sweep_unreleased(Device& d) { return d.sweep_unreleased(); }
  static void set_last_error(Device& d, std::string message) {
    d.set_last_error(std::move(message));
  }
  static std::string take_last_error(Device& d) { return d.take_last_error(); }
};

template <std::size_t N>
inline void terminate_string(char (&field)[N]) noexcept {
  field[N - 1] = '\0';
}

inline Device& as_device(gpuplug_instance_t inst) noexcept { return *reinterpret_cast<Device*>(inst); }

/// The status and message of the exception being handled; call only inside a catch block.
/// Failure keeps its own; bad_alloc is OUT_OF_MEMORY; anything else is INTERNAL. Never throws:
/// with no memory for the message, the status still tells the caller.
struct Caught {
  gpuplug_status_t status = GPUPLUG_STATUS_INTERNAL;
  std::string message;
};

[[gnu::cold]] inline Caught caught(const char* op) noexcept {
  Caught out;
  try {
    try {
      throw;
    } catch (const Failure& e) {
      out.status = e.status();
      out.message = e.what();
    } catch (const std::bad_alloc&) {
      out.status = GPUPLUG_STATUS_OUT_OF_MEMORY;
      out.message = std::string(op) + ": out of host memory";
    } catch (...) {
      out.message = std::string(op) + ": internal error: " + support::describe_current_exception();
    }
  } catch (...) {
  }
  return out;
}

/// The edge: runs `body` and turns every exception into a status plus this thread's message.
/// The success path allocates nothing and takes no lock.
template <class Body>
gpuplug_status_t guarded(gpuplug_instance_t inst, const char* op, Body&& body) noexcept {
  if (inst == nullptr) return GPUPLUG_STATUS_INVALID_ARGUMENT;
  Device& d = as_device(inst);
  try {
    body(d);
    return GPUPLUG_STATUS_SUCCESS;
  } catch (...) {
    Caught c = caught(op);
    try {
      DeviceAccess::set_last_error(d, std::move(c.message));
    } catch (...) {
    }
    return c.status;
  }
}

inline void check_host(const char* op, const char* role, const void* p) {
  if (p == nullptr)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT, std::string(op) + ": host " + role + " is null");
}

/// `min_size`: the struct's size in ABI 1.0 (later minors only append fields).
template <class T>
void check_out_struct(const char* op, const T* out, std::size_t min_size = sizeof(T)) {
  if (out == nullptr) fail(GPUPLUG_STATUS_INVALID_ARGUMENT, std::string(op) + ": out is null");
  if (out->struct_size < min_size)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         std::string(op) + ": struct_size " + std::to_string(out->struct_size) +
             " is smaller than the v1 struct (" + std::to_string(min_size) + ")");
}

// The struct of ABI 1.0 (later minors append fields): the least ledger_stats accepts.
#ifdef GPUPLUG_LEDGER_STATS_V1_0_SIZE
inline constexpr std::size_t ledger_stats_min_size = GPUPLUG_LEDGER_STATS_V1_0_SIZE;
#else
inline constexpr std::size_t ledger_stats_min_size = sizeof(gpuplug_ledger_stats_t);
#endif

// Writes the fields the caller's struct_size covers (ABI 1.3 appended live_pinned_bytes and arena_bytes) and
// says how much in struct_size; check_out_struct has refused less than the 1.0 struct.
inline void fill_stats(gpuplug_ledger_stats_t& out, const LedgerCounters& c) noexcept {
  out.reserved = 0;
  out.live_bytes = c.live_bytes;
  out.live_count = c.live_count;
  out.peak_bytes = c.peak_bytes;
  out.live_managed_bytes = c.live_managed_bytes;
  out.total_allocs = c.total_allocs;
  out.total_frees = c.total_frees;
#if GPUPLUG_ABI_VERSION_MINOR >= 3
  if (out.struct_size >= GPUPLUG_LEDGER_STATS_V1_3_SIZE) {
    out.live_pinned_bytes = c.live_pinned_bytes;
    out.arena_bytes = c.arena_bytes;
    out.struct_size = GPUPLUG_LEDGER_STATS_V1_3_SIZE;
  }
#else
  (void)c.live_pinned_bytes;
  (void)c.arena_bytes;
#endif
}

/// Writes as much of `info` as the caller's struct holds, and says how much in its struct_size.
inline void write_device_info(gpuplug_device_info_t& out, gpuplug_device_info_t info) noexcept {
  const std::size_t size = std::min<std::size_t>(out.struct_size, sizeof info);
  info.struct_size = static_cast<std::uint32_t>(size);
  std::memcpy(&out, &info, size);
}

/// Fills `out` through `describe` from a zeroed struct, then terminates its strings.
template <class Describe>
void describe_into(gpuplug_device_info_t& out, std::uint32_t ordinal, Describe&& describe) {
  gpuplug_device_info_t info{};
  info.ordinal = ordinal;
  describe(info);
  terminate_string(info.name);
  terminate_string(info.uuid);
  terminate_string(info.arch);
  write_device_info(out, info);
}

/// The operands of one copy or memset, each checked by `transfer` when present.
struct Transfer {
  const char* op;
  std::uint64_t bytes;
  const std::uint64_t* stream = nullptr;      // the async copies' and memset's stream
  const std::uint64_t* device_dst = nullptr;  // a device destination (written)
  const void* const* host_dst = nullptr;      // a host destination
  const void* const* host_src = nullptr;      // a host source
  const std::uint64_t* device_src = nullptr;  // a device source (read)
};

/// The checks every copy and memset shares, then `call`: nothing for zero bytes; the stream
/// (0 or live); each device range (the ledger, the registry's globals, then the vendor); each
/// host pointer non-null.
template <class Call>
gpuplug_status_t transfer(gpuplug_instance_t inst, const Transfer& t, Call&& call) noexcept {
  return guarded(inst, t.op, [&](Device& d) {
    if (t.bytes == 0) return;
    if (t.stream != nullptr) d.streams().check(t.op, *t.stream);
    if (t.device_dst != nullptr) d.check_range(t.op, "destination", *t.device_dst, t.bytes, true);
    if (t.host_dst != nullptr) check_host(t.op, "destination", *t.host_dst);
    if (t.host_src != nullptr) check_host(t.op, "source", *t.host_src);
    if (t.device_src != nullptr) d.check_range(t.op, "source", *t.device_src, t.bytes, false);
    call(d);
  });
}

// The pitched 2D copy slots (pitched.cpp; a table of ABI 1.3 or later points to them).
gpuplug_status_t slot_copy_h2d_2d_async(gpuplug_instance_t inst, std::uint64_t dst,
                                        std::uint64_t dst_pitch, const void* src,
                                        std::uint64_t src_pitch, std::uint64_t width,
                                        std::uint64_t height, std::uint64_t stream) noexcept;
gpuplug_status_t slot_copy_d2h_2d_async(gpuplug_instance_t inst, void* dst,
                                        std::uint64_t dst_pitch, std::uint64_t src,
                                        std::uint64_t src_pitch, std::uint64_t width,
                                        std::uint64_t height, std::uint64_t stream) noexcept;
gpuplug_status_t slot_copy_d2d_2d_async(gpuplug_instance_t inst, std::uint64_t dst,
                                        std::uint64_t dst_pitch, std::uint64_t src,
                                        std::uint64_t src_pitch, std::uint64_t width,
                                        std::uint64_t height, std::uint64_t stream) noexcept;

// ABI 1.3 mapped host memory and host addresses (mapped_slots.cpp); only a 1.3 table points to
// them (the slot list fills them by name).
gpuplug_status_t slot_alloc_host_mapped(gpuplug_instance_t inst, std::uint64_t bytes,
                                        const char* site, void** host,
                                        std::uint64_t* device) noexcept;
gpuplug_status_t slot_free_host_mapped(gpuplug_instance_t inst, void* host) noexcept;
gpuplug_status_t slot_host_ptr_to_device(gpuplug_instance_t inst, const void* host,
                                         std::uint64_t* device) noexcept;
gpuplug_status_t slot_host_address(gpuplug_instance_t inst, std::uint64_t ptr,
                                   void** out) noexcept;

// ABI 1.3 arenas (arena_slots.cpp).
gpuplug_status_t slot_alloc_arena(gpuplug_instance_t inst, std::uint64_t bytes, const char* site,
                                  std::uint64_t* out) noexcept;
gpuplug_status_t slot_free_arena(gpuplug_instance_t inst, std::uint64_t ptr) noexcept;

}  // namespace gpuplug::sdk::detail
