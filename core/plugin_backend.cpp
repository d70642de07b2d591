// SPDX-License-Identifier: Apache-2.0
// PluginBackend: the C++ GpuBackend API over a plugin's C table; statuses become Errors.
#include "plugin_backend.hpp"

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <cstring>
#include <gpuplug/log.hpp>
#include <type_traits>
#include <vector>

namespace gpuplug::detail {

namespace {

std::string fixed_string(const char* text, std::size_t capacity) {
  return std::string(text, ::strnlen(text, capacity));
}

// ---- optional slots: forwarding thunks and the defaults abi.h states --------------------------

template <auto Slot, class... A>
gpuplug_status_t forward(const PluginBackend& b, A... args) {
  return (b.table().*Slot)(b.instance(), args...);
}

std::size_t forward_report(const PluginBackend& b, std::uint32_t top_n, char* buf,
                           std::size_t size) {
  return b.table().ledger_report(b.instance(), top_n, buf, size);
}

[[noreturn]] void unsupported(const PluginBackend& b, std::string_view operation) {
  std::string message(operation);
  message.append(": not supported by the ").append(b.plugin_name()).append(" plugin");
  throw Error(Status::unsupported, std::string(b.name()), std::move(message));
}

gpuplug_status_t default_alloc_managed(const PluginBackend& b, std::uint64_t, const char*,
                                       std::uint64_t*) {
  unsupported(b, "alloc_managed");
}

gpuplug_status_t default_unload_module(const PluginBackend& b, const char*) {
  unsupported(b, "unload_module");
}

// Async copies without an async slot: wait for the stream, then copy synchronously. The result
// is the same ordering, with the host blocked instead of queued.
gpuplug_status_t default_copy_h2d_async(const PluginBackend& b, std::uint64_t dst, const void* src,
                                        std::uint64_t bytes, std::uint64_t stream) {
  b.check(b.table().stream_synchronize(b.instance(), stream),
          "copy_h2d_async (stream_synchronize)");
  return b.table().copy_h2d(b.instance(), dst, src, bytes);
}

gpuplug_status_t default_copy_d2h_async(const PluginBackend& b, void* dst, std::uint64_t src,
                                        std::uint64_t bytes, std::uint64_t stream) {
  b.check(b.table().stream_synchronize(b.instance(), stream),
          "copy_d2h_async (stream_synchronize)");
  return b.table().copy_d2h(b.instance(), dst, src, bytes);
}

gpuplug_status_t default_copy_d2d_async(const PluginBackend& b, std::uint64_t dst,
                                        std::uint64_t src, std::uint64_t bytes,
                                        std::uint64_t stream) {
  b.check(b.table().stream_synchronize(b.instance(), stream),
          "copy_d2d_async (stream_synchronize)");
  return b.table().copy_d2d(b.instance(), dst, src, bytes);
}

// Without a per-site report, summarise the ledger counters; same contract as the slot.
std::size_t default_ledger_report(const PluginBackend& b, std::uint32_t, char* buf,
                                  std::size_t size) {
  gpuplug_ledger_stats_t stats{};
  stats.struct_size = sizeof stats;
  std::string text;
  if (b.table().ledger_stats(b.instance(), &stats) == GPUPLUG_STATUS_SUCCESS) {
    text = std::to_string(stats.live_count) + " live allocations, " +
           std::to_string(stats.live_bytes) + " bytes (no per-site report from this plugin)";
  } else {
    text = "no allocation report from this plugin";
  }
  if (size > 0) {
    const std::size_t n = std::min(text.size(), size - 1);
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return text.size();
}

template <class Fn>
void pick(Fn& slot, bool present, std::type_identity_t<Fn> forwarding,
          std::type_identity_t<Fn> fallback) {
  slot = present ? forwarding : fallback;
}

// The one place where optional slots are null-checked.
OptionalSlots resolve_optional_slots(const gpuplug_plugin_v1& t) noexcept {
  using T = gpuplug_plugin_v1;
  OptionalSlots s{};
  pick(s.alloc_managed, t.alloc_managed != nullptr, &forward<&T::alloc_managed>,
       &default_alloc_managed);
  pick(s.copy_h2d_async, t.copy_h2d_async != nullptr, &forward<&T::copy_h2d_async>,
       &default_copy_h2d_async);
  pick(s.copy_d2h_async, t.copy_d2h_async != nullptr, &forward<&T::copy_d2h_async>,
       &default_copy_d2h_async);
  pick(s.copy_d2d_async, t.copy_d2d_async != nullptr, &forward<&T::copy_d2d_async>,
       &default_copy_d2d_async);
  pick(s.unload_module, t.unload_module != nullptr, &forward<&T::unload_module>,
       &default_unload_module);
  pick(s.ledger_report, t.ledger_report != nullptr, &forward_report, &default_ledger_report);
  return s;
}

LogLevel to_log_level(gpuplug_log_level_t level) noexcept {
  if (level <= GPUPLUG_LOG_TRACE) return LogLevel::trace;
  if (level >= GPUPLUG_LOG_ERROR) return LogLevel::error;
  return static_cast<LogLevel>(level);
}

LedgerStats to_ledger_stats(const gpuplug_ledger_stats_t& s) noexcept {
  return LedgerStats{s.live_bytes,         s.live_count,   s.peak_bytes,
                     s.live_managed_bytes, s.total_allocs, s.total_frees};
}

}  // namespace

gpuplug_plugin_v1 copy_table(const gpuplug_plugin_v1& published) noexcept {
  gpuplug_plugin_v1 t{};
  const std::size_t n = std::min<std::size_t>(published.struct_size, sizeof t);
  std::memcpy(&t, &published, n);
  return t;
}

DeviceInfo to_device_info(const gpuplug_device_info_t& d) {
  DeviceInfo info;
  info.ordinal = d.ordinal;
  info.name = fixed_string(d.name, sizeof d.name);
  info.uuid = fixed_string(d.uuid, sizeof d.uuid);
  info.arch = fixed_string(d.arch, sizeof d.arch);
  info.total_memory = d.total_memory;
  info.free_memory = d.free_memory;
  info.compute_units = d.compute_units;
  info.managed_memory = d.managed_memory != 0;
  return info;
}

// ---- construction and destruction --------------------------------------------------------------

PluginBackend::PluginBackend(std::shared_ptr<const boost::dll::shared_library> library,
                             const gpuplug_plugin_v1& table, std::uint32_t ordinal,
                             const Options& options)
    : library_(std::move(library)),
      table_(copy_table(table)),
      optional_(resolve_optional_slots(table_)),
      plugin_name_(table_.name),
      ordinal_(ordinal),
      name_(plugin_name_ + ":" + std::to_string(ordinal)),
      services_{sizeof(gpuplug_host_services_t), this, &PluginBackend::log_callback} {
  std::vector<gpuplug_option_t> opts;
  opts.reserve(options.size());
  for (const auto& [key, value] : options) opts.push_back({key.c_str(), value.c_str()});
  char error[1024] = {};
  const gpuplug_status_t st =
      table_.create(ordinal, opts.data(), static_cast<std::uint32_t>(opts.size()), &services_,
                    &instance_, error, sizeof error);
  if (st != GPUPLUG_STATUS_SUCCESS || instance_ == nullptr) {
    std::string why = fixed_string(error, sizeof error);
    if (why.empty()) why = "the plugin gave no reason";
    throw Error(st != GPUPLUG_STATUS_SUCCESS ? static_cast<Status>(st) : Status::internal, name_,
                "create: " + why);
  }
  log(LogLevel::debug, name_, "created");
}

PluginBackend::~PluginBackend() {
  // Scratch goes back through the ledger before the instance is swept, so the sweep's warning
  // only ever reports real leaks.
  try {
    op_cache().release(*this);
  } catch (const std::exception& e) {
    log(LogLevel::warning, name_, std::string("releasing the op cache: ") + e.what());
  } catch (...) {
    log(LogLevel::warning, name_, "releasing the op cache failed with an unknown exception");
  }
  table_.destroy(instance_);
  // library_ is released after this body: the plugin's code stays mapped until here.
}

void PluginBackend::log_callback(void* user, gpuplug_log_level_t level, const char* message) {
  const auto* self = static_cast<const PluginBackend*>(user);
  if (self == nullptr || message == nullptr) return;
  log(to_log_level(level), self->name_, message);
}

// ---- errors
// ---------------------------------------------------------------------------------------

std::string PluginBackend::last_error() const {
  char small[512];
  std::size_t n = table_.last_error(instance_, small, sizeof small);
  if (n < sizeof small) return std::string(small, ::strnlen(small, n));
  std::string big(n + 1, '\0');
  n = table_.last_error(instance_, big.data(), big.size());
  big.resize(::strnlen(big.c_str(), std::min(n, big.size() - 1)));
  return big;
}

void PluginBackend::throw_status(gpuplug_status_t status, std::string_view operation) const {
  std::string message(operation);
  std::string why = last_error();
  message.append(": ");
  if (why.empty()) {
    message.append("failed (").append(to_string(static_cast<Status>(status))).append(")");
  } else {
    message.append(why);
  }
  throw Error(static_cast<Status>(status), name_, std::move(message));
}

// ---- memory -------------------------------------------------------------------------------------

DevicePtr PluginBackend::alloc(std::size_t bytes, const char* site) {
  std::uint64_t out = 0;
  check(table_.alloc(instance_, bytes, site, &out), "alloc");
  return DevicePtr{out};
}

DevicePtr PluginBackend::alloc_managed(std::size_t bytes, const char* site) {
  std::uint64_t out = 0;
  check(optional_.alloc_managed(*this, bytes, site, &out), "alloc_managed");
  return DevicePtr{out};
}

void PluginBackend::free(DevicePtr p) {
  if (!p) return;
  check(table_.free(instance_, p.value), "free");
}

void PluginBackend::copy_h2d(DevicePtr dst, const void* src, std::size_t bytes) {
  check(table_.copy_h2d(instance_, dst.value, src, bytes), "copy_h2d");
}

void PluginBackend::copy_d2h(void* dst, DevicePtr src, std::size_t bytes) {
  check(table_.copy_d2h(instance_, dst, src.value, bytes), "copy_d2h");
}

void PluginBackend::copy_d2d(DevicePtr dst, DevicePtr src, std::size_t bytes) {
  check(table_.copy_d2d(instance_, dst.value, src.value, bytes), "copy_d2d");
}

void PluginBackend::copy_h2d_async(DevicePtr dst, const void* src, std::size_t bytes,
                                   Stream stream) {
  check(optional_.copy_h2d_async(*this, dst.value, src, bytes, stream.value), "copy_h2d_async");
}

void PluginBackend::copy_d2h_async(void* dst, DevicePtr src, std::size_t bytes, Stream stream) {
  check(optional_.copy_d2h_async(*this, dst, src.value, bytes, stream.value), "copy_d2h_async");
}

void PluginBackend::copy_d2d_async(DevicePtr dst, DevicePtr src, std::size_t bytes, Stream stream) {
  check(optional_.copy_d2d_async(*this, dst.value, src.value, bytes, stream.value),
        "copy_d2d_async");
}

void PluginBackend::memset(DevicePtr dst, std::uint8_t value, std::size_t bytes, Stream stream) {
  check(table_.memset_d8(instance_, dst.value, value, bytes, stream.value), "memset");
}

// ---- streams
// --------------------------------------------------------------------------------------

Stream PluginBackend::create_stream() {
  std::uint64_t out = 0;
  check(table_.stream_create(instance_, &out), "stream_create");
  return Stream{out};
}

void PluginBackend::destroy_stream(Stream stream) {
  if (stream.value == 0) {
    throw Error(Status::invalid_argument, name_,
                "stream_destroy: the default stream cannot be destroyed");
  }
  check(table_.stream_destroy(instance_, stream.value), "stream_destroy");
}

void PluginBackend::synchronize(Stream stream) {
  check(table_.stream_synchronize(instance_, stream.value), "stream_synchronize");
}

void PluginBackend::synchronize() { check(table_.synchronize(instance_), "synchronize"); }

// ---- modules
// --------------------------------------------------------------------------------------

void PluginBackend::load_module(std::string_view name, std::span<const std::byte> image) {
  const std::string n(name);
  check(table_.load_module(instance_, n.c_str(), image.data(), image.size()), "load_module");
}

void PluginBackend::unload_module(std::string_view name) {
  const std::string n(name);
  check(optional_.unload_module(*this, n.c_str()), "unload_module");
}

bool PluginBackend::has_module(std::string_view name) {
  const std::string n(name);
  std::int32_t out = 0;
  check(table_.has_module(instance_, n.c_str(), &out), "has_module");
  return out != 0;
}

KernelHandle PluginBackend::kernel(std::string_view module, std::string_view func) {
  const std::string m(module);
  const std::string f(func);
  std::uint64_t out = 0;
  check(table_.get_function(instance_, m.c_str(), f.c_str(), &out), "get_function");
  if (out == 0) {
    throw Error(Status::internal, name_,
                "get_function: the plugin returned a null handle for " + m + "::" + f);
  }
  return KernelHandle{out};
}

std::optional<DeviceSymbol> PluginBackend::device_symbol(std::string_view module,
                                                         std::string_view symbol) {
  const std::string m(module);
  const std::string s(symbol);
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  const gpuplug_status_t st = table_.get_global(instance_, m.c_str(), s.c_str(), &address, &size);
  if (st == GPUPLUG_STATUS_NOT_FOUND) {
    // NOT_FOUND covers both a missing symbol (nullopt, by contract) and a missing module (an
    // error): tell them apart on this cold path only.
    std::string why = last_error();
    if (!has_module(module)) {
      throw Error(Status::not_found, name_,
                  "get_global: " + (why.empty() ? "module " + m + " not found" : why));
    }
    return std::nullopt;
  }
  check(st, "get_global");
  return DeviceSymbol{DevicePtr{address}, static_cast<std::size_t>(size)};
}

// ---- work ---------------------------------------------------------------------------------------

void PluginBackend::launch(KernelHandle f, Dim3 grid, Dim3 block, std::uint32_t shared_bytes,
                           Stream stream, void** params) {
  // The hot path: one indirect call, nothing allocated, no lock.
  check(
      table_.launch(instance_, f.value, gpuplug_dim3_t{grid.x, grid.y, grid.z},
                    gpuplug_dim3_t{block.x, block.y, block.z}, shared_bytes, stream.value, params),
      "launch");
}

// ---- queries and the ledger ---------------------------------------------------------------------

MemoryInfo PluginBackend::memory_info() {
  MemoryInfo info;
  check(table_.memory_info(instance_, &info.free_bytes, &info.total_bytes), "memory_info");
  return info;
}

DeviceInfo PluginBackend::device_info() {
  gpuplug_device_info_t raw{};
  raw.struct_size = sizeof raw;
  check(table_.device_info(instance_, &raw), "device_info");
  return to_device_info(raw);
}

LedgerStats PluginBackend::ledger_stats() {
  gpuplug_ledger_stats_t raw{};
  raw.struct_size = sizeof raw;
  check(table_.ledger_stats(instance_, &raw), "ledger_stats");
  return to_ledger_stats(raw);
}

std::string PluginBackend::alloc_report(std::size_t top_n) {
  const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(top_n, UINT32_MAX));
  std::string text(4096, '\0');
  // The report can grow between the two calls; a few tries settle it.
  for (int attempt = 0; attempt < 4; ++attempt) {
    const std::size_t length = optional_.ledger_report(*this, n, text.data(), text.size());
    if (length < text.size()) {
      text.resize(::strnlen(text.c_str(), length));
      return text;
    }
    text.assign(length + 1 + length / 4, '\0');
  }
  text.resize(::strnlen(text.c_str(), text.size() - 1));
  return text;
}

LedgerStats PluginBackend::sweep_unreleased() {
  gpuplug_ledger_stats_t raw{};
  raw.struct_size = sizeof raw;
  check(table_.sweep_unreleased(instance_, &raw), "sweep_unreleased");
  return to_ledger_stats(raw);
}

}  // namespace gpuplug::detail
