// SPDX-License-Identifier: Apache-2.0
// sdk::Device: the state every vendor device shares, its shutdown, and the one range check.
#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "events.hpp"
#include "graphs.hpp"
#include "gpuplug/support/failures.hpp"
#include "gpuplug/support/regular_file.hpp"
#include "gpuplug/support/text.hpp"
#include "ledger.hpp"
#include "mapped_set.hpp"
#include "module_registry.hpp"
#include "plugin_sdk.hpp"

namespace gpuplug::sdk {

/// Per-thread last-error messages of one device. A mutex-guarded map rather than thread_local
/// storage: plugins keep no static objects with destructors, and the messages belong to the
/// instance, not to the thread. One entry per thread that ever failed on this device.
struct Device::ErrorSlots {
  std::mutex mutex;
  std::unordered_map<std::thread::id, std::string> by_thread;
};

namespace {

std::string owner_name(const DeviceConfig& config) {
  return (config.plugin_name.empty() ? std::string("device") : config.plugin_name) + ":" +
         std::to_string(config.ordinal);
}

}  // namespace

/// The pinned host memory a device handed out and has not taken back.
struct Device::PinnedSet {
  mutable std::mutex mutex;
  std::map<const std::byte*, std::uint64_t> live;  // base -> bytes
};

Device::Device(const DeviceConfig& config)
    : config_(config),
      ledger_(std::make_unique<AllocationLedger>(
          owner_name(config), config.device_memory_limit,
          [this](gpuplug_log_level_t level, std::string_view message) { log(level, message); },
          config.memory_history)),
      modules_(std::make_unique<ModuleRegistry>(*this, config.module_search_path)),
      events_(std::make_unique<EventSet>()),
      graphs_(std::make_unique<GraphSet>()),
      errors_(std::make_unique<ErrorSlots>()),
      pinned_(std::make_unique<PinnedSet>()),
      mapped_(std::make_unique<MappedSet>()) {}

Device::~Device() = default;

void Device::log(gpuplug_log_level_t level, std::string_view message) const noexcept {
  const gpuplug_host_services_t* s = config_.services;
  if (s == nullptr || s->struct_size < offsetof(gpuplug_host_services_t, log) + sizeof(s->log) ||
      s->log == nullptr)
    return;
  try {
    const std::string text(message);
    s->log(s->user, level, text.c_str());
  } catch (...) {
    // Out of memory while logging: the message is dropped.
  }
}

std::uint64_t Device::vendor_alloc_managed(std::uint64_t /*bytes*/) {
  fail(GPUPLUG_STATUS_UNSUPPORTED, "managed memory is not supported by " + owner_name(config_));
}

// The defaults of the optional async copies are the ABI's defaults for their null slots: the
// stream's work first, then the synchronous copy, so stream order holds without a queue.
void Device::vendor_copy_h2d_async(std::uint64_t dst, const void* src, std::uint64_t bytes,
                                   std::uint64_t stream) {
  vendor_stream_synchronize(stream);
  vendor_copy_h2d(dst, src, bytes);
}
void Device::vendor_copy_h2d_async_retained(std::uint64_t dst, const void* src,
                                            std::uint64_t bytes, std::uint64_t stream) {
  vendor_copy_h2d_async(dst, src, bytes, stream);
}
void Device::vendor_copy_d2h_async(void* dst, std::uint64_t src, std::uint64_t bytes,
                                   std::uint64_t stream) {
  vendor_stream_synchronize(stream);
  vendor_copy_d2h(dst, src, bytes);
}
void Device::vendor_copy_d2d_async(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes,
                                   std::uint64_t stream) {
  vendor_stream_synchronize(stream);
  vendor_copy_d2d(dst, src, bytes);
}

namespace {
[[noreturn]] void events_unsupported(const DeviceConfig& config, const char* op) {
  fail(GPUPLUG_STATUS_UNSUPPORTED,
       std::string(op) + ": events are not supported by " + owner_name(config));
}
}  // namespace

std::uint64_t Device::vendor_event_create() { events_unsupported(config_, "event_create"); }
void Device::vendor_event_destroy(std::uint64_t) { events_unsupported(config_, "event_destroy"); }
void Device::vendor_event_record(std::uint64_t, std::uint64_t) {
  events_unsupported(config_, "event_record");
}
void Device::vendor_stream_wait_event(std::uint64_t, std::uint64_t) {
  events_unsupported(config_, "stream_wait_event");
}
void Device::vendor_event_synchronize(std::uint64_t) {
  events_unsupported(config_, "event_synchronize");
}
bool Device::vendor_event_query(std::uint64_t) { events_unsupported(config_, "event_query"); }
float Device::vendor_event_elapsed_ms(std::uint64_t, std::uint64_t) {
  events_unsupported(config_, "event_elapsed_ms");
}

void Device::vendor_copy_peer_async(std::uint64_t, Device&, std::uint64_t, std::uint64_t,
                                    std::uint64_t) {
  fail(GPUPLUG_STATUS_UNSUPPORTED,
       "copy_peer_async: peer copies are not supported by " + owner_name(config_));
}
void* Device::vendor_host_alloc_pinned(std::uint64_t) {
  fail(GPUPLUG_STATUS_UNSUPPORTED,
       "host_alloc_pinned: pinned host memory is not supported by " + owner_name(config_));
}
void Device::vendor_host_free_pinned(void*) noexcept {}

void* Device::alloc_pinned(std::uint64_t bytes) {
  void* p = vendor_host_alloc_pinned(bytes);
  if (p == nullptr) fail(GPUPLUG_STATUS_DEVICE_ERROR, "the vendor's pinned allocation returned null");
  try {
    std::lock_guard lock(pinned_->mutex);
    pinned_->live.emplace(static_cast<const std::byte*>(p), bytes);
  } catch (...) {
    vendor_host_free_pinned(p);
    throw;
  }
  return p;
}

void Device::free_pinned(void* p) {
  {
    std::lock_guard lock(pinned_->mutex);
    if (pinned_->live.erase(static_cast<const std::byte*>(p)) == 0)
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
           "host_free_pinned: " + support::hex(reinterpret_cast<std::uintptr_t>(p)) +
               " is not pinned memory of " + owner_name(config_));
  }
  vendor_host_free_pinned(p);
}

bool Device::is_pinned(const void* p, std::uint64_t bytes) const noexcept {
  const auto* begin = static_cast<const std::byte*>(p);
  {
    std::lock_guard lock(pinned_->mutex);
    auto it = pinned_->live.upper_bound(begin);
    if (it != pinned_->live.begin()) {
      --it;
      const auto offset = static_cast<std::uint64_t>(begin - it->first);
      if (offset <= it->second && bytes <= it->second - offset) return true;
    }
  }
  // Mapped host memory (ABI 1.3) is page-locked too.
  const auto host = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(mapped_->mutex);
  const auto held = MappedSet::holding(mapped_->by_host, host);
  return held && host - held->first <= held->second.bytes &&
         bytes <= held->second.bytes - (host - held->first);
}

VendorModule Device::vendor_load_module_file(std::string_view name,
                                             std::span<const std::byte> image,
                                             const support::RegularFile& /*file*/) {
  return vendor_load_module(name, image);
}

Access Device::vendor_owns_range(std::uint64_t /*ptr*/, std::uint64_t /*bytes*/) {
  return Access::none;
}

namespace {
[[noreturn]] void interop_unsupported(const DeviceConfig& config, const char* op) {
  fail(GPUPLUG_STATUS_UNSUPPORTED,
       std::string(op) + ": native handles and import are not supported by " +
           owner_name(config));
}
}  // namespace

NativeStreamHandles Device::vendor_native_handles(std::uint64_t) {
  interop_unsupported(config_, "native_handles");
}
void Device::vendor_check_import(std::uint64_t, std::uint64_t) {
  interop_unsupported(config_, "import_memory");
}
std::uint64_t Device::vendor_import_stream(void*) { interop_unsupported(config_, "import_stream"); }
void Device::vendor_forget_stream(std::uint64_t stream) { vendor_stream_synchronize(stream); }

void Device::shutdown() noexcept {
  if (shut_down_) return;
  shut_down_ = true;
  graphs_->abort_captures(*this);  // a capturing stream would refuse the synchronize
  synchronize_or_warn("shutdown");
  modules_->unload_all();
  sweep_allocations();
  streams_.destroy_all(*this);
  events_->destroy_all(*this);
  graphs_->destroy_all(*this);
  // Pinned memory not given back (the core frees its own before it destroys a backend).
  std::lock_guard lock(pinned_->mutex);
  if (!pinned_->live.empty()) {
    try {
      log(GPUPLUG_LOG_WARNING, "shutdown: freeing " + std::to_string(pinned_->live.size()) +
                                   " pinned host buffers not freed");
    } catch (...) {
    }
  }
  for (const auto& [p, bytes] : pinned_->live) vendor_host_free_pinned(const_cast<std::byte*>(p));
  pinned_->live.clear();
}

void Device::synchronize_or_warn(const char* op) noexcept {
  try {
    vendor_synchronize();
  } catch (...) {
    try {
      log(GPUPLUG_LOG_WARNING,
          std::string(op) + ": synchronize failed: " + support::describe_current_exception());
    } catch (...) {  // no memory for the message: the sweep goes on regardless
    }
  }
}

namespace {
// What a vendor hook is told an allocation is: an arena is device memory to the vendor (only the
// ledger keeps it apart).
constexpr gpuplug_alloc_kind_t vendor_kind(gpuplug_alloc_kind_t kind) noexcept {
  return kind == alloc_kind_arena ? GPUPLUG_ALLOC_DEVICE : kind;
}
}  // namespace

SweepResult Device::sweep_allocations() noexcept {
  // Imported ranges leave the ledger with the rest; their memory is their owner's to free.
  // Mapped host memory goes back through its own free.
  return ledger_->sweep([this](std::uint64_t ptr, gpuplug_alloc_kind_t kind) {
    if (kind == alloc_kind_pinned)
      free_swept_mapped(ptr);
    else if (kind != alloc_external)
      vendor_free(ptr, vendor_kind(kind));
  });
}

std::uint64_t Device::allocate(std::uint64_t bytes, const char* site, gpuplug_alloc_kind_t kind) {
  const std::uint64_t vendor_bytes = std::max<std::uint64_t>(bytes, 1);
  return ledger_->allocate(
      bytes, kind, site,
      [&] {
        const std::uint64_t p = vendor_kind(kind) == GPUPLUG_ALLOC_DEVICE
                                    ? vendor_alloc(vendor_bytes)
                                    : vendor_alloc_managed(vendor_bytes);
        if (p == 0) fail(GPUPLUG_STATUS_DEVICE_ERROR, "the vendor allocation returned null");
        return p;
      },
      [&](std::uint64_t p) noexcept {
        try {
          vendor_free(p, vendor_kind(kind));
        } catch (...) {
        }
      });
}

void Device::release(std::uint64_t ptr) {
  // release_kind copies no site: the free path stays allocation-free.
  const gpuplug_alloc_kind_t kind = ledger_->release_kind(ptr);
  if (kind != alloc_external) vendor_free(ptr, kind);
}

void Device::release_arena(std::uint64_t ptr) {
  ledger_->release_arena(ptr);
  vendor_free(ptr, GPUPLUG_ALLOC_DEVICE);
}

std::uint64_t Device::vendor_stream_create_flags(std::uint32_t) { return vendor_stream_create(); }

std::uint64_t Device::import_range(std::uint64_t address, std::uint64_t bytes, const char* site) {
  const auto where = [&] {
    return "import_memory: " + support::hex(address) + " + " + std::to_string(bytes) + " bytes";
  };
  if (address == 0) fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "import_memory: the pointer is null");
  if (bytes > std::numeric_limits<std::uint64_t>::max() - address)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT, where() + " wraps around");
  // Either end inside a live entry, or a live entry starting inside the range, is an overlap:
  // the same bytes on the ledger twice would be counted twice and freed through the wrong kind.
  const std::uint64_t last = bytes == 0 ? address : address + bytes - 1;
  for (const std::uint64_t probe : {address, last}) {
    if (const auto e = ledger_->find(probe))
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
           where() + " overlaps " + (e->kind == alloc_external ? "the imported range" : "the allocation") +
               " of " + std::to_string(e->bytes) + " bytes at " + support::hex(e->ptr) +
               " already on the ledger of " + ledger_->owner());
  }
  vendor_check_import(address, bytes);
  ledger_->commit(ledger_->reserve(bytes, alloc_external), address, site);
  return address;
}

void* Device::native_address(std::uint64_t ptr) {
  if (ptr == 0) fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "native_pointer: the pointer is null");
  if (!ledger_->find(ptr) && modules_->global_access(ptr, 1) == Access::none &&
      vendor_owns_range(ptr, 1) == Access::none)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         "native_pointer: " + support::hex(ptr) + " is not memory of " + ledger_->owner() +
             " (no live allocation, imported range or module global holds it; freed already?)");
  // Every plugin's device pointer is the runtime's address (CUdeviceptr, hipDeviceptr_t, a host
  // address): the value itself.
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr));
}

void Device::memory_info(std::uint64_t& free_bytes, std::uint64_t& total_bytes) {
  vendor_memory_info(free_bytes, total_bytes);
  // Under device_memory_limit the instance sees the limit as its memory.
  if (const auto& limit = ledger_->device_memory_limit()) {
    const std::uint64_t live = ledger_->live_device_bytes();
    total_bytes = std::min(total_bytes, *limit);
    free_bytes = std::min(free_bytes, *limit > live ? *limit - live : 0);
  }
}

SweepResult Device::sweep_unreleased() {
  synchronize_or_warn("sweep_unreleased");  // nothing may still use what is about to be freed
  return sweep_allocations();
}

void Device::set_last_error(std::string message) {
  std::lock_guard lock(errors_->mutex);
  errors_->by_thread[std::this_thread::get_id()] = std::move(message);
}

std::string Device::take_last_error() {
  std::lock_guard lock(errors_->mutex);
  auto it = errors_->by_thread.find(std::this_thread::get_id());
  if (it == errors_->by_thread.end()) return {};
  std::string message = std::move(it->second);
  errors_->by_thread.erase(it);
  return message;
}

void Device::check_range(const char* op, const char* role, std::uint64_t ptr, std::uint64_t bytes,
                         bool write) {
  const auto where = [&] {
    return std::string(op) + ": " + role + " " + support::hex(ptr) + " + " + std::to_string(bytes) +
           " bytes";
  };
  if (ptr == 0) fail(GPUPLUG_STATUS_INVALID_ARGUMENT, std::string(op) + ": " + role + " is null");
  if (bytes > std::numeric_limits<std::uint64_t>::max() - ptr)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT, where() + " wraps around");
  // The common case first: a live allocation of this device (the ledger's interval index).
  if (const auto e = ledger_->find(ptr)) {
    const std::uint64_t offset = ptr - e->ptr;
    if (bytes > e->bytes || offset > e->bytes - bytes)
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
           where() + " overruns its allocation of " + std::to_string(e->bytes) + " bytes at " +
               support::hex(e->ptr) + " (offset " + std::to_string(offset) + ")");
    return;
  }
  Access access = modules_->global_access(ptr, bytes);
  if (access == Access::none) access = vendor_owns_range(ptr, bytes);
  if (access == Access::none)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         std::string(op) + ": " + support::hex(ptr) + " + " + std::to_string(bytes) +
             " bytes is not memory of this device (the " + role +
             ": no live allocation, module global or memory the driver knows covers it; freed "
             "already, or past the end?)");
  if (write && access != Access::read_write)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         std::string(op) + ": " + role + " " + support::hex(ptr) + " is read-only module memory");
}

}  // namespace gpuplug::sdk
