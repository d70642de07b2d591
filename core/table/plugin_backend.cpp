// SPDX-License-Identifier: Apache-2.0
// PluginBackend: the C++ GpuBackend API over a plugin's C table; statuses become Errors.
#include "table/plugin_backend.hpp"

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <cstring>
#include <gpuplug/log.hpp>
#include <gpuplug/registry.hpp>
#include <gpuplug/support/c_string.hpp>
#include <gpuplug/support/failures.hpp>
#include <vector>

#include "layers/layer_stack.hpp"
#include "layers/validate.hpp"
#include "memory/host_memory.hpp"

namespace gpuplug::detail {

namespace {

/// A ledger query (ledger_stats, sweep_unreleased): the counters, or Error naming `operation`.
template <auto Slot>
LedgerStats read_ledger(const PluginBackend& b, std::string_view operation) {
  gpuplug_ledger_stats_t raw{};
  raw.struct_size = sizeof raw;
  b.check((b.table().*Slot)(b.instance(), &raw), operation);
  return to_ledger_stats(raw);
}

}  // namespace

// ---- construction and destruction ---------------------------------------------------------------

PluginBackend::PluginBackend(std::shared_ptr<const boost::dll::shared_library> library,
                             const gpuplug_plugin_v1& table, std::uint32_t ordinal,
                             const Options& options, const LayerCatalog& layers)
    : library_(std::move(library)),
      table_(copy_table(table)),
      optional_(resolve_optional_slots(table_, table_.abi_version)),
      plugin_name_(table_.name),
      ordinal_(ordinal),
      name_(plugin_name_ + ":" + std::to_string(ordinal)),
      services_{sizeof(gpuplug_host_services_t), this, &PluginBackend::log_callback} {
  // The layers are checked before anything is created, so that a bad `layers` creates nothing.
  const LayerList enabled = enabled_layers(layers, options, name_);
  const SplitOptions split = split_options(layers, enabled, options, name_);
  memory_limited_ = split.plugin.contains("device_memory_limit");
  std::vector<gpuplug_option_t> opts;
  opts.reserve(split.plugin.size());
  for (const auto& [key, value] : split.plugin) opts.push_back({key.c_str(), value.c_str()});
  char error[1024] = {};
  const gpuplug_status_t st =
      table_.create(ordinal, opts.data(), static_cast<std::uint32_t>(opts.size()), &services_,
                    &instance_, error, sizeof error);
  if (st != GPUPLUG_STATUS_SUCCESS || instance_ == nullptr) {
    std::string why = support::fixed_string(error, sizeof error);
    if (why.empty()) why = "the plugin gave no reason";
    throw Error(st != GPUPLUG_STATUS_SUCCESS ? static_cast<Status>(st) : Status::internal, name_,
                "create", why);
  }
  plugin_copy_peer_ = table_.copy_peer_async;  // the plugin's table, before any layer
  if (!enabled.empty()) {
    layer_services_ = {sizeof(gpuplug_layer_services_t), this, &PluginBackend::log_callback,
                       &PluginBackend::set_error_callback};
    try {
      layers_ = std::make_unique<LayerStack>(enabled, split.layer_options, table_, instance_,
                                             layer_services_, plugin_name_, ordinal_, name_);
    } catch (...) {
      table_.destroy(instance_);
      throw;
    }
    plugin_destroy_ = table_.destroy;
    plugin_instance_ = instance_;
    const std::uint32_t plugin_abi_version = table_.abi_version;
    table_ = layers_->top_table();
    instance_ = layers_->top_instance();
    optional_ = resolve_optional_slots(table_, plugin_abi_version);
    validates_ = std::any_of(enabled.begin(), enabled.end(),
                             [](const auto& layer) {
                               return layer->name == "validate" && layer->origin == "built-in";
                             });
    validate_instance_ = layers_->builtin_instance(validate_layer());
    log(LogLevel::debug, name_, "created with layers " + layers_->names());
    return;
  }
  log(LogLevel::debug, name_, "created");
}

PluginBackend::~PluginBackend() {
  // Scratch goes back through the ledger before the instance is swept, so the sweep's warning
  // only ever reports real leaks.
  try {
    op_cache().release(*this);
  } catch (...) {
    log(LogLevel::warning, name_,
        "releasing the op cache: " + support::describe_current_exception());
  }
  // Kept pinned staging goes back through the instance that gave it, while it exists.
  for (const auto& [p, bytes] : kept_pinned_) free_pinned(p);
  kept_pinned_.clear();
  if (layers_) {
    layers_.reset();  // the layers, top first
    plugin_destroy_(plugin_instance_);
  } else {
    table_.destroy(instance_);
  }
  // The plugin's sweep forgot the imported ranges still live: their owners hear of it now.
  release_all_imports("destroy");
  // library_ is released after this body: the plugin's code stays mapped until here.
}

void PluginBackend::log_callback(void* user, gpuplug_log_level_t level, const char* message) {
  const auto* self = static_cast<const PluginBackend*>(user);
  if (self == nullptr || message == nullptr) return;
  log(to_log_level(level), self->name_, message);
}

std::string PluginBackend::layer_names() const { return layers_ ? layers_->names() : std::string(); }

// ---- errors -------------------------------------------------------------------------------------

namespace {

/// The message a layer set for the failure it returns next on this thread (set_error), with the
/// backend it belongs to. Like a plugin's last_error it lives per thread; it is read and cleared
/// by the first failure this thread reports on that backend.
struct LayerError {
  const PluginBackend* backend = nullptr;
  std::string message;
};
thread_local LayerError layer_error;

/// The marker that ends a plugin text cut at max_plugin_text_bytes.
std::string truncated_marker(std::size_t claimed) {
  return " [truncated: the plugin reported " + std::to_string(claimed) + " bytes]";
}

}  // namespace

std::string PluginBackend::last_error() const {
  if (layer_error.backend == this) [[unlikely]] {
    layer_error.backend = nullptr;
    return std::move(layer_error.message);
  }
  // The plugin says how long its message is; that length is capped here, never trusted.
  char small[512];
  std::size_t n = table_.last_error(instance_, small, sizeof small);
  if (n < sizeof small) return std::string(small, ::strnlen(small, n));
  const std::size_t claimed = n;
  std::string big(std::min(n, max_plugin_text_bytes) + 1, '\0');
  n = table_.last_error(instance_, big.data(), big.size());
  big.resize(::strnlen(big.c_str(), std::min(n, big.size() - 1)));
  if (claimed > max_plugin_text_bytes || n >= big.size())
    big += truncated_marker(std::max(n, claimed));
  return big;
}

void PluginBackend::set_error_callback(void* user, const char* message) {
  const auto* self = static_cast<const PluginBackend*>(user);
  if (self == nullptr) return;
  try {
    layer_error.message = support::fixed_string(message, max_plugin_text_bytes);
    layer_error.backend = self;
  } catch (const std::bad_alloc&) {
    layer_error.backend = nullptr;  // the plugin's last_error is then reported
  }
}

void PluginBackend::throw_status(gpuplug_status_t status, std::string_view operation) const {
  std::string why;
  try {
    why = last_error();
  } catch (const std::bad_alloc&) {
    // No memory for the plugin's message: the status still reaches the caller as an Error.
    why = "(no memory to read the plugin's message)";
  }
  // The plugin's message often starts with the operation too; Error shows it once.
  if (why.empty()) why = "failed (" + to_string(static_cast<Status>(status)) + ")";
  throw Error(static_cast<Status>(status), name_, std::string(operation), std::move(why));
}

// ---- memory -------------------------------------------------------------------------------------

DevicePtr PluginBackend::alloc(std::size_t bytes, const char* site) {
  std::uint64_t out = 0;
  const gpuplug_status_t status = table_.alloc(instance_, bytes, site, &out);
  if (status == GPUPLUG_STATUS_OUT_OF_MEMORY) [[unlikely]]
    return alloc_out_of_memory(bytes, site, AllocOp::alloc);
  check(status, "alloc");
  return DevicePtr{out};
}

DevicePtr PluginBackend::alloc_managed(std::size_t bytes, const char* site) {
  std::uint64_t out = 0;
  const gpuplug_status_t status = optional_.alloc_managed(*this, bytes, site, &out);
  if (status == GPUPLUG_STATUS_OUT_OF_MEMORY) [[unlikely]]
    return alloc_out_of_memory(bytes, site, AllocOp::alloc_managed);
  check(status, "alloc_managed");
  return DevicePtr{out};
}

void PluginBackend::free(DevicePtr p) {
  if (!p) return;
  check(table_.free(instance_, p.value), "free");
  // An imported range: the plugin forgot it; now its owner hears of it (once).
  if (imports_.maybe_any()) [[unlikely]] {
    if (const std::function<void()> on_release = imports_.take(p.value)) on_release();
  }
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

void PluginBackend::copy_h2d_async_retained(DevicePtr dst, const void* src, std::size_t bytes,
                                            Stream stream) {
  check(optional_.copy_h2d_async_retained(*this, dst.value, src, bytes, stream.value),
        "copy_h2d_async_retained");
}

void PluginBackend::copy_d2h_async(void* dst, DevicePtr src, std::size_t bytes, Stream stream) {
  check(optional_.copy_d2h_async(*this, dst, src.value, bytes, stream.value), "copy_d2h_async");
}

void PluginBackend::copy_d2d_async(DevicePtr dst, DevicePtr src, std::size_t bytes, Stream stream) {
  check(optional_.copy_d2d_async(*this, dst.value, src.value, bytes, stream.value),
        "copy_d2d_async");
}

void PluginBackend::copy_peer_async(DevicePtr dst, const PluginBackend& src, DevicePtr src_ptr,
                                    std::size_t bytes, Stream stream) {
  // The source's own instance, never a layer's: the slot's layers pass it through unchanged.
  const gpuplug_instance_t src_instance = src.layers_ ? src.plugin_instance_ : src.instance_;
  check(optional_.copy_peer_async(*this, dst.value, src_instance, src_ptr.value, bytes,
                                  stream.value),
        "copy_peer_async");
}

void* PluginBackend::take_pinned(std::size_t bytes) {
  {
    std::lock_guard lock(pinned_mutex_);
    for (auto it = kept_pinned_.begin(); it != kept_pinned_.end(); ++it) {
      if (it->second != bytes) continue;
      void* p = it->first;
      kept_pinned_.erase(it);
      return p;
    }
  }
  void* p = nullptr;
  check(optional_.host_alloc_pinned(*this, bytes, &p), "host_alloc_pinned");
  return p;
}

void PluginBackend::give_back_pinned(void* p, std::size_t bytes) noexcept {
  try {
    std::lock_guard lock(pinned_mutex_);
    if (kept_pinned_.size() < kKeptPinned) {
      kept_pinned_.emplace_back(p, bytes);
      return;
    }
  } catch (...) {  // no memory to keep it: free it
  }
  free_pinned(p);
}

void PluginBackend::free_pinned(void* p) noexcept {
  if (optional_.host_free_pinned(*this, p) == GPUPLUG_STATUS_SUCCESS) return;
  try {
    log(LogLevel::warning, name_, "host_free_pinned: " + last_error());
  } catch (...) {  // nothing more to say without memory
  }
}

void PluginBackend::memset(DevicePtr dst, std::uint8_t value, std::size_t bytes, Stream stream) {
  check(table_.memset_d8(instance_, dst.value, value, bytes, stream.value), "memset");
}

// ---- streams ------------------------------------------------------------------------------------

Stream PluginBackend::create_stream() { return create_stream(StreamFlags::non_blocking); }

Stream PluginBackend::create_stream(StreamFlags flags) {
  if (flags != StreamFlags::blocking && flags != StreamFlags::non_blocking)
    throw Error(Status::invalid_argument, name_, "create_stream",
                "unknown stream flags " + std::to_string(static_cast<std::uint32_t>(flags)) +
                    " (StreamFlags::blocking or StreamFlags::non_blocking)");
  std::uint64_t out = 0;
  check(optional_.stream_create_with_flags(*this, static_cast<std::uint32_t>(flags), &out),
        "create_stream");
  return Stream{out};
}

void PluginBackend::destroy_stream(Stream stream) {
  if (stream.value == 0) {
    throw Error(Status::invalid_argument, name_, "destroy_stream",
                "the default stream cannot be destroyed");
  }
  check(table_.stream_destroy(instance_, stream.value), "destroy_stream");
}

void PluginBackend::synchronize(Stream stream) {
  check(table_.stream_synchronize(instance_, stream.value), "synchronize");
}

void PluginBackend::synchronize() { check(table_.synchronize(instance_), "synchronize"); }

// ---- events (ABI 1.1; the defaults of a plugin without them throw Error(unsupported)) ----------
// The plugin names a foreign, destroyed or never-created event in its message; the null event
// is refused here, so that no plugin has to special-case 0.

void PluginBackend::check_event(Event event, const char* operation, const char* role) const {
  if (event.value == 0) [[unlikely]]
    throw Error(Status::invalid_argument, name_, operation,
                std::string("the ") + role + " is the null event (0)");
}

Event PluginBackend::create_event() {
  std::uint64_t out = 0;
  check(optional_.event_create(*this, &out), "create_event");
  if (out == 0) {
    throw Error(Status::internal, name_, "create_event", "the plugin returned the null event (0)");
  }
  return Event{out};
}

void PluginBackend::destroy_event(Event event) {
  check_event(event, "destroy_event");
  check(optional_.event_destroy(*this, event.value), "destroy_event");
}

void PluginBackend::record(Event event, Stream stream) {
  check_event(event, "record");
  check(optional_.event_record(*this, event.value, stream.value), "record");
}

void PluginBackend::wait(Stream stream, Event event) {
  check_event(event, "wait");
  check(optional_.stream_wait_event(*this, stream.value, event.value), "wait");
}

void PluginBackend::synchronize(Event event) {
  check_event(event, "synchronize");
  check(optional_.event_synchronize(*this, event.value), "synchronize");
}

bool PluginBackend::query(Event event) {
  check_event(event, "query");
  std::int32_t ready = 0;
  check(optional_.event_query(*this, event.value, &ready), "query");
  return ready != 0;
}

float PluginBackend::elapsed_ms(Event start, Event end) {
  check_event(start, "elapsed_ms", "start event");
  check_event(end, "elapsed_ms", "end event");
  float ms = 0;
  check(optional_.event_elapsed_ms(*this, start.value, end.value, &ms), "elapsed_ms");
  return ms;
}

// ---- queries and the ledger ---------------------------------------------------------------------

MemoryInfo PluginBackend::memory_info() {
  MemoryInfo info;
  check(table_.memory_info(instance_, &info.free_bytes, &info.total_bytes), "memory_info");
  if (!memory_limited_ && integrated()) {
    if (const std::optional<std::uint64_t> host = host_memory_available())
      info.free_bytes = std::max(info.free_bytes, *host);
  }
  return info;
}

std::uint64_t PluginBackend::device_free_memory() {
  MemoryInfo info;
  check(table_.memory_info(instance_, &info.free_bytes, &info.total_bytes), "device_free_memory");
  return info.free_bytes;
}

bool PluginBackend::integrated() {
  // Asked once; two threads that both ask store the same answer. No std::call_once: device_info
  // may throw (a fault injected, a driver error), and libstdc++'s call_once does not recover
  // from an exception everywhere (GCC PR 66146): the next call would wait forever.
  int known = integrated_.load(std::memory_order_acquire);
  if (known < 0) {
    known = device_info().device_class == DeviceClass::integrated_gpu ? 1 : 0;
    integrated_.store(known, std::memory_order_release);
  }
  return known == 1;
}

DeviceInfo PluginBackend::device_info() {
  gpuplug_device_info_t raw{};
  raw.struct_size = sizeof raw;
  check(table_.device_info(instance_, &raw), "device_info");
  return to_device_info(raw);
}

LedgerStats PluginBackend::ledger_stats() {
  return read_ledger<&gpuplug_plugin_v1::ledger_stats>(*this, "ledger_stats");
}

std::string PluginBackend::alloc_report(std::size_t top_n) {
  const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(top_n, UINT32_MAX));
  try {
    std::string text(4096, '\0');
    // The report can grow between the two calls; a few tries settle it. The length the plugin
    // claims is capped at max_plugin_text_bytes, never trusted for an allocation.
    for (int attempt = 0; attempt < 4; ++attempt) {
      const std::size_t length = optional_.ledger_report(*this, n, text.data(), text.size());
      if (length < text.size()) {
        text.resize(::strnlen(text.c_str(), length));
        return text;
      }
      if (text.size() > max_plugin_text_bytes) {
        text.resize(::strnlen(text.c_str(), text.size() - 1));
        return text + truncated_marker(length);
      }
      text.assign(std::min(length + 1 + length / 4, max_plugin_text_bytes + 1), '\0');
    }
    text.resize(::strnlen(text.c_str(), text.size() - 1));
    return text;
  } catch (const std::bad_alloc&) {
    throw Error(Status::out_of_memory, name_, "alloc_report", "out of memory");
  }
}

LedgerStats PluginBackend::sweep_unreleased() {
  const LedgerStats swept =
      read_ledger<&gpuplug_plugin_v1::sweep_unreleased>(*this, "sweep_unreleased");
  release_all_imports("sweep_unreleased");
  return swept;
}

}  // namespace gpuplug::detail
