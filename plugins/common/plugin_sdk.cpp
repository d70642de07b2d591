// SPDX-License-Identifier: Apache-2.0
// The plugin SDK: option parsing, the Device base, and C table slots that catch everything.
#include "plugin_sdk.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>

#include "ledger.hpp"
#include "module_registry.hpp"

namespace gpuplug::sdk {

// ---- errors ----------------------------------------------------------------------------------

Failure::Failure(gpuplug_status_t status, std::string message)
    : std::runtime_error(std::move(message)), status_(status) {}

void fail(gpuplug_status_t status, std::string message) {
  throw Failure(status, std::move(message));
}

// ---- options ---------------------------------------------------------------------------------

std::uint64_t parse_byte_size(std::string_view key, std::string_view text) {
  const auto bad = [&](std::string_view why) {
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         "option " + std::string(key) + "='" + std::string(text) + "' " + std::string(why));
  };
  constexpr std::string_view expected =
      "is not a byte size (decimal digits with an optional K, M, G or T suffix, e.g. 64M)";
  std::size_t i = 0;
  std::uint64_t value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10)
      bad("does not fit in 64 bits");
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) bad(expected);
  std::string suffix;
  for (char c : text.substr(i))
    suffix += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  unsigned shift = 0;
  if (!suffix.empty()) {
    switch (suffix[0]) {
      case 'k':
        shift = 10;
        break;
      case 'm':
        shift = 20;
        break;
      case 'g':
        shift = 30;
        break;
      case 't':
        shift = 40;
        break;
      case 'b':
        shift = 0;
        break;
      default:
        bad(expected);
    }
    const std::string_view unit = std::string_view(suffix).substr(suffix[0] == 'b' ? 0 : 1);
    if (!(unit.empty() || unit == "b" || (suffix[0] != 'b' && unit == "ib"))) bad(expected);
  }
  if (shift != 0 && value > (std::numeric_limits<std::uint64_t>::max() >> shift))
    bad("does not fit in 64 bits");
  return value << shift;
}

DeviceConfig parse_config(std::uint32_t ordinal, const gpuplug_option_t* options,
                          std::uint32_t count, const gpuplug_host_services_t* services,
                          std::span<const std::string_view> extra_keys) {
  static constexpr std::string_view common_keys[] = {"device_memory_limit", "modules_dir"};
  DeviceConfig config;
  config.ordinal = ordinal;
  config.services = services;
  if (count != 0 && options == nullptr)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         "options is null but option_count is " + std::to_string(count));
  for (std::uint32_t i = 0; i < count; ++i) {
    if (options[i].key == nullptr || options[i].value == nullptr)
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
           "option " + std::to_string(i) + " has a null key or value");
    const std::string key = options[i].key;
    const std::string value = options[i].value;
    const bool known =
        std::find(std::begin(common_keys), std::end(common_keys), key) != std::end(common_keys) ||
        std::find(extra_keys.begin(), extra_keys.end(), key) != extra_keys.end();
    if (!known) {
      std::vector<std::string_view> all(std::begin(common_keys), std::end(common_keys));
      all.insert(all.end(), extra_keys.begin(), extra_keys.end());
      std::sort(all.begin(), all.end());
      std::string list;
      for (std::string_view k : all) list += (list.empty() ? "" : ", ") + std::string(k);
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
           "unknown option '" + key + "' (known options: " + list + ")");
    }
    if (!config.options.emplace(key, value).second)
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "option " + key + " given more than once");
    if (key == "device_memory_limit") {
      config.device_memory_limit = parse_byte_size(key, value);
    } else if (key == "modules_dir") {
      if (value.empty()) fail(GPUPLUG_STATUS_INVALID_ARGUMENT, "option modules_dir is empty");
      config.modules_dir = std::filesystem::path(value);
    }
  }
  return config;
}

// ---- Device ----------------------------------------------------------------------------------

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

Device::Device(const DeviceConfig& config)
    : config_(config),
      ledger_(std::make_unique<AllocationLedger>(
          owner_name(config), config.device_memory_limit,
          [this](gpuplug_log_level_t level, std::string_view message) { log(level, message); })),
      modules_(std::make_unique<ModuleRegistry>(*this, config.modules_dir)),
      errors_(std::make_unique<ErrorSlots>()) {}

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

void Device::shutdown() noexcept {
  if (shut_down_) return;
  shut_down_ = true;
  try {
    synchronize();
  } catch (const std::exception& e) {
    log(GPUPLUG_LOG_WARNING, std::string("shutdown: synchronize failed: ") + e.what());
  } catch (...) {
    log(GPUPLUG_LOG_WARNING, "shutdown: synchronize failed");
  }
  modules_->unload_all();
  ledger_->sweep([this](std::uint64_t ptr, gpuplug_alloc_kind_t kind) { vendor_free(ptr, kind); });
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

// ---- the C table -----------------------------------------------------------------------------

namespace detail {
namespace {

/// Copies `text` into a caller buffer, truncating and always NUL-terminating; returns its length.
std::size_t copy_out(std::string_view text, char* buf, std::size_t size) noexcept {
  if (buf != nullptr && size != 0) {
    const std::size_t n = std::min(text.size(), size - 1);
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return text.size();
}

template <std::size_t N>
void terminate_string(char (&field)[N]) noexcept {
  field[N - 1] = '\0';
}

std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

Device& as_device(gpuplug_instance_t inst) noexcept { return *reinterpret_cast<Device*>(inst); }

// Both never throw: with no memory for the message, the status still tells the caller.
void record(Device& d, const char* message) noexcept {
  try {
    d.set_last_error(message);
  } catch (...) {
  }
}

void record(Device& d, const char* op, const char* what, const char* detail) noexcept {
  try {
    d.set_last_error(std::string(op) + what + detail);
  } catch (...) {
  }
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
  } catch (const Failure& e) {
    record(d, e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    record(d, op, ": out of host memory", "");
    return GPUPLUG_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    record(d, op, ": internal error: ", e.what());
    return GPUPLUG_STATUS_INTERNAL;
  } catch (...) {
    record(d, op, ": internal error: ", "unknown exception");
    return GPUPLUG_STATUS_INTERNAL;
  }
}

/// Rejects a null pointer and a range that wraps; when `ptr` lies inside a live allocation of
/// this device, the range must end inside it. Pointers the ledger does not know (vendor
/// globals, memory from elsewhere) are left to the vendor.
void check_range(Device& d, const char* op, const char* role, std::uint64_t ptr,
                 std::uint64_t bytes) {
  if (ptr == 0) fail(GPUPLUG_STATUS_INVALID_ARGUMENT, std::string(op) + ": " + role + " is null");
  if (bytes > std::numeric_limits<std::uint64_t>::max() - ptr)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT, std::string(op) + ": " + role + " " + hex(ptr) + " + " +
                                              std::to_string(bytes) + " bytes wraps around");
  if (auto e = d.ledger().find(ptr)) {
    const std::uint64_t offset = ptr - e->ptr;
    if (bytes > e->bytes || offset > e->bytes - bytes)
      fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
           std::string(op) + ": " + role + " " + hex(ptr) + " + " + std::to_string(bytes) +
               " bytes overruns its allocation of " + std::to_string(e->bytes) + " bytes at " +
               hex(e->ptr) + " (offset " + std::to_string(offset) + ")");
  }
}

void check_host(const char* op, const char* role, const void* p) {
  if (p == nullptr)
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT, std::string(op) + ": host " + role + " is null");
}

template <class T>
void check_out_struct(const char* op, const T* out) {
  if (out == nullptr) fail(GPUPLUG_STATUS_INVALID_ARGUMENT, std::string(op) + ": out is null");
  if (out->struct_size < sizeof(T))
    fail(GPUPLUG_STATUS_INVALID_ARGUMENT,
         std::string(op) + ": struct_size " + std::to_string(out->struct_size) +
             " is smaller than the v1 struct (" + std::to_string(sizeof(T)) + ")");
}

std::uint64_t allocate(Device& d, std::uint64_t bytes, const char* site,
                       gpuplug_alloc_kind_t kind) {
  // A zero-byte request still gets a distinct, freeable pointer: the vendor is asked for one
  // byte, the ledger records zero (so any access through it is a range error).
  const std::uint64_t vendor_bytes = std::max<std::uint64_t>(bytes, 1);
  return d.ledger().allocate(
      bytes, kind, site,
      [&] {
        const std::uint64_t p = kind == GPUPLUG_ALLOC_DEVICE ? d.vendor_alloc(vendor_bytes)
                                                             : d.vendor_alloc_managed(vendor_bytes);
        if (p == 0) fail(GPUPLUG_STATUS_DEVICE_ERROR, "the vendor allocation returned null");
        return p;
      },
      [&](std::uint64_t p) noexcept {
        try {
          d.vendor_free(p, kind);
        } catch (...) {
        }
      });
}

void fill_stats(gpuplug_ledger_stats_t& out, const LedgerCounters& c) noexcept {
  out.reserved = 0;
  out.live_bytes = c.live_bytes;
  out.live_count = c.live_count;
  out.peak_bytes = c.peak_bytes;
  out.live_managed_bytes = c.live_managed_bytes;
  out.total_allocs = c.total_allocs;
  out.total_frees = c.total_frees;
}

// ---- slots -----------------------------------------------------------------------------------

void slot_destroy(gpuplug_instance_t inst) noexcept {
  if (inst == nullptr) return;
  Device* d = &as_device(inst);
  d->shutdown();
  delete d;
}

std::size_t slot_last_error(gpuplug_instance_t inst, char* buf, std::size_t size) noexcept {
  if (inst == nullptr) return copy_out("", buf, size);
  Device& d = as_device(inst);
  try {
    // Read without consuming, so a caller whose buffer was too small can ask again.
    std::string message = d.take_last_error();
    const std::size_t length = copy_out(message, buf, size);
    d.set_last_error(std::move(message));
    return length;
  } catch (...) {
    return copy_out("", buf, size);
  }
}

gpuplug_status_t slot_alloc(gpuplug_instance_t inst, std::uint64_t bytes, const char* site,
                            std::uint64_t* out) noexcept {
  return guarded(inst, "alloc", [&](Device& d) {
    GPUPLUG_EXPECTS(out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "alloc: out is null");
    *out = allocate(d, bytes, site, GPUPLUG_ALLOC_DEVICE);
  });
}

gpuplug_status_t slot_alloc_managed(gpuplug_instance_t inst, std::uint64_t bytes, const char* site,
                                    std::uint64_t* out) noexcept {
  return guarded(inst, "alloc_managed", [&](Device& d) {
    GPUPLUG_EXPECTS(out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "alloc_managed: out is null");
    *out = allocate(d, bytes, site, GPUPLUG_ALLOC_MANAGED);
  });
}

gpuplug_status_t slot_free(gpuplug_instance_t inst, std::uint64_t ptr) noexcept {
  return guarded(inst, "free", [&](Device& d) {
    if (ptr == 0) return;
    // Before the vendor free: the ordering rule. release_kind copies no site (the hot path).
    const gpuplug_alloc_kind_t kind = d.ledger().release_kind(ptr);
    d.vendor_free(ptr, kind);
  });
}

gpuplug_status_t slot_memory_info(gpuplug_instance_t inst, std::uint64_t* free_bytes,
                                  std::uint64_t* total_bytes) noexcept {
  return guarded(inst, "memory_info", [&](Device& d) {
    std::uint64_t free = 0, total = 0;
    d.memory_info(free, total);
    // Under device_memory_limit the instance sees the limit as its memory.
    if (const auto& limit = d.ledger().device_memory_limit()) {
      const std::uint64_t live = d.ledger().live_device_bytes();
      total = std::min(total, *limit);
      free = std::min(free, *limit > live ? *limit - live : 0);
    }
    if (free_bytes != nullptr) *free_bytes = free;
    if (total_bytes != nullptr) *total_bytes = total;
  });
}

gpuplug_status_t slot_device_info(gpuplug_instance_t inst, gpuplug_device_info_t* out) noexcept {
  return guarded(inst, "device_info", [&](Device& d) {
    check_out_struct("device_info", out);
    gpuplug_device_info_t info{};
    info.struct_size = sizeof info;
    info.ordinal = d.config().ordinal;
    d.device_info(info);
    terminate_string(info.name);
    terminate_string(info.uuid);
    terminate_string(info.arch);
    *out = info;
  });
}

gpuplug_status_t slot_copy_h2d(gpuplug_instance_t inst, std::uint64_t dst, const void* src,
                               std::uint64_t bytes) noexcept {
  return guarded(inst, "copy_h2d", [&](Device& d) {
    if (bytes == 0) return;
    check_range(d, "copy_h2d", "destination", dst, bytes);
    check_host("copy_h2d", "source", src);
    d.copy_h2d(dst, src, bytes);
  });
}

gpuplug_status_t slot_copy_d2h(gpuplug_instance_t inst, void* dst, std::uint64_t src,
                               std::uint64_t bytes) noexcept {
  return guarded(inst, "copy_d2h", [&](Device& d) {
    if (bytes == 0) return;
    check_host("copy_d2h", "destination", dst);
    check_range(d, "copy_d2h", "source", src, bytes);
    d.copy_d2h(dst, src, bytes);
  });
}

gpuplug_status_t slot_copy_d2d(gpuplug_instance_t inst, std::uint64_t dst, std::uint64_t src,
                               std::uint64_t bytes) noexcept {
  return guarded(inst, "copy_d2d", [&](Device& d) {
    if (bytes == 0) return;
    check_range(d, "copy_d2d", "destination", dst, bytes);
    check_range(d, "copy_d2d", "source", src, bytes);
    d.copy_d2d(dst, src, bytes);
  });
}

gpuplug_status_t slot_copy_h2d_async(gpuplug_instance_t inst, std::uint64_t dst, const void* src,
                                     std::uint64_t bytes, std::uint64_t stream) noexcept {
  return guarded(inst, "copy_h2d_async", [&](Device& d) {
    if (bytes == 0) return;
    check_range(d, "copy_h2d_async", "destination", dst, bytes);
    check_host("copy_h2d_async", "source", src);
    d.copy_h2d_async(dst, src, bytes, stream);
  });
}

gpuplug_status_t slot_copy_d2h_async(gpuplug_instance_t inst, void* dst, std::uint64_t src,
                                     std::uint64_t bytes, std::uint64_t stream) noexcept {
  return guarded(inst, "copy_d2h_async", [&](Device& d) {
    if (bytes == 0) return;
    check_host("copy_d2h_async", "destination", dst);
    check_range(d, "copy_d2h_async", "source", src, bytes);
    d.copy_d2h_async(dst, src, bytes, stream);
  });
}

gpuplug_status_t slot_copy_d2d_async(gpuplug_instance_t inst, std::uint64_t dst, std::uint64_t src,
                                     std::uint64_t bytes, std::uint64_t stream) noexcept {
  return guarded(inst, "copy_d2d_async", [&](Device& d) {
    if (bytes == 0) return;
    check_range(d, "copy_d2d_async", "destination", dst, bytes);
    check_range(d, "copy_d2d_async", "source", src, bytes);
    d.copy_d2d_async(dst, src, bytes, stream);
  });
}

gpuplug_status_t slot_memset_d8(gpuplug_instance_t inst, std::uint64_t dst, std::uint8_t value,
                                std::uint64_t bytes, std::uint64_t stream) noexcept {
  return guarded(inst, "memset_d8", [&](Device& d) {
    if (bytes == 0) return;
    check_range(d, "memset_d8", "destination", dst, bytes);
    d.memset_d8(dst, value, bytes, stream);
  });
}

gpuplug_status_t slot_stream_create(gpuplug_instance_t inst, std::uint64_t* out) noexcept {
  return guarded(inst, "stream_create", [&](Device& d) {
    GPUPLUG_EXPECTS(out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "stream_create: out is null");
    *out = d.stream_create();
  });
}

gpuplug_status_t slot_stream_destroy(gpuplug_instance_t inst, std::uint64_t stream) noexcept {
  return guarded(inst, "stream_destroy", [&](Device& d) {
    GPUPLUG_EXPECTS(stream != 0, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "stream_destroy: the default stream (0) cannot be destroyed");
    d.stream_destroy(stream);
  });
}

gpuplug_status_t slot_stream_synchronize(gpuplug_instance_t inst, std::uint64_t stream) noexcept {
  return guarded(inst, "stream_synchronize", [&](Device& d) { d.stream_synchronize(stream); });
}

gpuplug_status_t slot_synchronize(gpuplug_instance_t inst) noexcept {
  return guarded(inst, "synchronize", [&](Device& d) { d.synchronize(); });
}

gpuplug_status_t slot_load_module(gpuplug_instance_t inst, const char* name, const void* image,
                                  std::uint64_t size) noexcept {
  return guarded(inst, "load_module", [&](Device& d) {
    GPUPLUG_EXPECTS(name != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT, "load_module: name is null");
    if (image == nullptr || size == 0)
      fail(GPUPLUG_STATUS_INVALID_IMAGE, "module " + std::string(name) + ": the image is empty");
    d.modules().load(name, std::span<const std::byte>(static_cast<const std::byte*>(image), size));
  });
}

gpuplug_status_t slot_unload_module(gpuplug_instance_t inst, const char* name) noexcept {
  return guarded(inst, "unload_module", [&](Device& d) {
    GPUPLUG_EXPECTS(name != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "unload_module: name is null");
    d.modules().unload(name);
  });
}

gpuplug_status_t slot_has_module(gpuplug_instance_t inst, const char* name,
                                 std::int32_t* out) noexcept {
  return guarded(inst, "has_module", [&](Device& d) {
    GPUPLUG_EXPECTS(name != nullptr && out != nullptr, GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "has_module: name or out is null");
    *out = d.modules().has(name) ? 1 : 0;
  });
}

gpuplug_status_t slot_get_function(gpuplug_instance_t inst, const char* module, const char* func,
                                   std::uint64_t* out) noexcept {
  return guarded(inst, "get_function", [&](Device& d) {
    GPUPLUG_EXPECTS(module != nullptr && func != nullptr && out != nullptr,
                    GPUPLUG_STATUS_INVALID_ARGUMENT, "get_function: module, func or out is null");
    *out = d.modules().get_function(module, func);
  });
}

gpuplug_status_t slot_get_global(gpuplug_instance_t inst, const char* module, const char* symbol,
                                 std::uint64_t* address, std::uint64_t* size) noexcept {
  return guarded(inst, "get_global", [&](Device& d) {
    GPUPLUG_EXPECTS(module != nullptr && symbol != nullptr && address != nullptr && size != nullptr,
                    GPUPLUG_STATUS_INVALID_ARGUMENT,
                    "get_global: module, symbol, address or size is null");
    const auto [a, n] = d.modules().get_global(module, symbol);
    *address = a;
    *size = n;
  });
}

// The hot path: one null check and the indirect call; no allocation, no lock.
gpuplug_status_t slot_launch(gpuplug_instance_t inst, std::uint64_t function, gpuplug_dim3_t grid,
                             gpuplug_dim3_t block, std::uint32_t shared_bytes, std::uint64_t stream,
                             void** params) noexcept {
  return guarded(inst, "launch", [&](Device& d) {
    GPUPLUG_EXPECTS(function != 0, GPUPLUG_STATUS_INVALID_ARGUMENT, "launch: the function is null");
    d.launch(function, grid, block, shared_bytes, stream, params);
  });
}

gpuplug_status_t slot_ledger_stats(gpuplug_instance_t inst, gpuplug_ledger_stats_t* out) noexcept {
  return guarded(inst, "ledger_stats", [&](Device& d) {
    check_out_struct("ledger_stats", out);
    fill_stats(*out, d.ledger().counters());
  });
}

std::size_t slot_ledger_report(gpuplug_instance_t inst, std::uint32_t top_n, char* buf,
                               std::size_t size) noexcept {
  if (inst == nullptr) return copy_out("", buf, size);
  try {
    return copy_out(as_device(inst).ledger().report(top_n), buf, size);
  } catch (...) {
    return copy_out("", buf, size);
  }
}

gpuplug_status_t slot_sweep_unreleased(gpuplug_instance_t inst,
                                       gpuplug_ledger_stats_t* swept) noexcept {
  return guarded(inst, "sweep_unreleased", [&](Device& d) {
    if (swept != nullptr) check_out_struct("sweep_unreleased", swept);
    try {
      d.synchronize();  // nothing may still be using what is about to be freed
    } catch (const std::exception& e) {
      d.log(GPUPLUG_LOG_WARNING, std::string("sweep_unreleased: synchronize failed: ") + e.what());
    }
    const SweepResult r = d.ledger().sweep(
        [&d](std::uint64_t ptr, gpuplug_alloc_kind_t kind) { d.vendor_free(ptr, kind); });
    if (swept != nullptr) {
      // live_* describe what was swept; total_frees counts the vendor frees that succeeded.
      LedgerCounters c;
      c.live_bytes = r.bytes;
      c.live_count = r.count;
      c.live_managed_bytes = r.managed_bytes;
      c.total_frees = r.count - r.failed;
      fill_stats(*swept, c);
    }
  });
}

std::filesystem::path default_modules_dir(const char* plugin_name) {
  // The SDK is linked into the plugin, so this function's own address names the plugin's file.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&default_modules_dir), &info) == 0 ||
      info.dli_fname == nullptr || info.dli_fname[0] == '\0')
    return {};
  std::error_code ec;
  std::filesystem::path so = std::filesystem::absolute(info.dli_fname, ec);
  if (ec) so = info.dli_fname;
  return (so.parent_path() / ".." / "kernels" / plugin_name).lexically_normal();
}

std::string probe_summary(const gpuplug_probe_result_t& r) {
  return std::string(r.message[0] != '\0' ? r.message : "no reason given");
}

}  // namespace

gpuplug_status_t probe_with(const PluginHooks& hooks, gpuplug_probe_result_t* out) noexcept {
  if (out == nullptr || out->struct_size < sizeof(gpuplug_probe_result_t))
    return GPUPLUG_STATUS_INVALID_ARGUMENT;
  const std::uint32_t size = out->struct_size;
  std::memset(out, 0, sizeof(gpuplug_probe_result_t));
  out->struct_size = size;
  try {
    hooks.probe(*out);
  } catch (const std::exception& e) {
    out->reason = GPUPLUG_PROBE_ERROR;
    out->device_count = 0;
    copy_out(std::string("probe failed: ") + e.what(), out->message, sizeof out->message);
  } catch (...) {
    out->reason = GPUPLUG_PROBE_ERROR;
    out->device_count = 0;
    copy_out("probe failed: unknown exception", out->message, sizeof out->message);
  }
  terminate_string(out->message);
  if (out->reason == GPUPLUG_PROBE_AVAILABLE && out->device_count == 0) {
    out->reason = GPUPLUG_PROBE_NO_DEVICE;
    if (out->message[0] == '\0') copy_out("no device", out->message, sizeof out->message);
  }
  if (out->reason != GPUPLUG_PROBE_AVAILABLE) out->device_count = 0;
  return GPUPLUG_STATUS_SUCCESS;
}

gpuplug_status_t describe_with(const PluginHooks& hooks, std::uint32_t ordinal,
                               gpuplug_device_info_t* out) noexcept {
  if (out == nullptr || out->struct_size < sizeof(gpuplug_device_info_t))
    return GPUPLUG_STATUS_INVALID_ARGUMENT;
  try {
    gpuplug_probe_result_t probe{};
    probe.struct_size = sizeof probe;
    probe_with(hooks, &probe);
    if (ordinal >= probe.device_count) return GPUPLUG_STATUS_UNAVAILABLE;
    gpuplug_device_info_t info{};
    info.struct_size = sizeof info;
    info.ordinal = ordinal;
    hooks.describe_device(ordinal, info);
    terminate_string(info.name);
    terminate_string(info.uuid);
    terminate_string(info.arch);
    *out = info;
    return GPUPLUG_STATUS_SUCCESS;
  } catch (const Failure& e) {
    return e.status();
  } catch (const std::bad_alloc&) {
    return GPUPLUG_STATUS_OUT_OF_MEMORY;
  } catch (...) {
    return GPUPLUG_STATUS_INTERNAL;
  }
}

gpuplug_status_t create_with(const PluginHooks& hooks, std::uint32_t ordinal,
                             const gpuplug_option_t* options, std::uint32_t option_count,
                             const gpuplug_host_services_t* services, gpuplug_instance_t* out,
                             char* error, std::size_t error_size) noexcept {
  copy_out("", error, error_size);
  if (out == nullptr) {
    copy_out("create: out is null", error, error_size);
    return GPUPLUG_STATUS_INVALID_ARGUMENT;
  }
  *out = nullptr;
  try {
    DeviceConfig config =
        parse_config(ordinal, options, option_count, services, hooks.extra_options);
    config.plugin_name = hooks.name;
    if (!config.modules_dir) {
      std::filesystem::path dir = default_modules_dir(hooks.name);
      if (!dir.empty()) config.modules_dir = std::move(dir);
    }
    gpuplug_probe_result_t probe{};
    probe.struct_size = sizeof probe;
    probe_with(hooks, &probe);
    if (probe.reason != GPUPLUG_PROBE_AVAILABLE)
      fail(GPUPLUG_STATUS_UNAVAILABLE,
           std::string(hooks.name) + " is unavailable: " + probe_summary(probe));
    if (ordinal >= probe.device_count)
      fail(GPUPLUG_STATUS_UNAVAILABLE, "no device " + std::to_string(ordinal) + ": " + hooks.name +
                                           " has " + std::to_string(probe.device_count) +
                                           (probe.device_count == 1 ? " device" : " devices"));
    std::unique_ptr<Device> device = hooks.create(config);
    if (!device)
      fail(GPUPLUG_STATUS_INTERNAL, std::string(hooks.name) + ": create returned no device");
    device->log(
        GPUPLUG_LOG_DEBUG,
        "created; modules_dir=" + (config.modules_dir ? config.modules_dir->string() : "(none)") +
            ", device_memory_limit=" +
            (config.device_memory_limit ? describe_bytes(*config.device_memory_limit) : "(none)"));
    *out = reinterpret_cast<gpuplug_instance_t>(device.release());
    return GPUPLUG_STATUS_SUCCESS;
  } catch (const Failure& e) {
    copy_out(e.what(), error, error_size);
    return e.status();
  } catch (const std::bad_alloc&) {
    copy_out("create: out of host memory", error, error_size);
    return GPUPLUG_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    copy_out(std::string("create: internal error: ") + e.what(), error, error_size);
    return GPUPLUG_STATUS_INTERNAL;
  } catch (...) {
    copy_out("create: internal error: unknown exception", error, error_size);
    return GPUPLUG_STATUS_INTERNAL;
  }
}

void fill_instance_slots(gpuplug_plugin_v1& t) noexcept {
  t.destroy = &slot_destroy;
  t.last_error = &slot_last_error;
  t.alloc = &slot_alloc;
  t.alloc_managed = &slot_alloc_managed;
  t.free = &slot_free;
  t.memory_info = &slot_memory_info;
  t.device_info = &slot_device_info;
  t.copy_h2d = &slot_copy_h2d;
  t.copy_d2h = &slot_copy_d2h;
  t.copy_d2d = &slot_copy_d2d;
  t.copy_h2d_async = &slot_copy_h2d_async;
  t.copy_d2h_async = &slot_copy_d2h_async;
  t.copy_d2d_async = &slot_copy_d2d_async;
  t.memset_d8 = &slot_memset_d8;
  t.stream_create = &slot_stream_create;
  t.stream_destroy = &slot_stream_destroy;
  t.stream_synchronize = &slot_stream_synchronize;
  t.synchronize = &slot_synchronize;
  t.load_module = &slot_load_module;
  t.unload_module = &slot_unload_module;
  t.has_module = &slot_has_module;
  t.get_function = &slot_get_function;
  t.get_global = &slot_get_global;
  t.launch = &slot_launch;
  t.ledger_stats = &slot_ledger_stats;
  t.ledger_report = &slot_ledger_report;
  t.sweep_unreleased = &slot_sweep_unreleased;
}

const gpuplug_plugin_v1* negotiate(const gpuplug_plugin_v1* table,
                                   std::uint32_t /*host_abi_version*/) noexcept {
  // v1.0 is the only version this SDK speaks. A host with a later minor reads our smaller
  // struct_size; a host with another major refuses the table and names both versions.
  return table;
}

}  // namespace detail
}  // namespace gpuplug::sdk
