// SPDX-License-Identifier: Apache-2.0
// The non-virtual parts of GpuBackend: loading a kernel module from a file, the validate layer's
// guard band scan, and the events and interop handles a backend without them reports as
// unsupported.
#include <gpuplug/backend.hpp>
#include <gpuplug/support/regular_file.hpp>
#include <limits>
#include <optional>
#include <system_error>
#include <vector>

#include "table/plugin_backend.hpp"

namespace gpuplug {

namespace {
// "load_module_file: module axpy: cannot read '/x/axpy.so': <reason>"
[[noreturn]] void file_error(std::string_view backend, Status status, std::string_view module,
                             const std::filesystem::path& file, std::string_view reason) {
  std::string message = "module ";
  message.append(module).append(": cannot read '").append(file.string()).append("': ");
  message.append(reason);
  throw Error(status, std::string(backend), "load_module_file", std::move(message));
}
}  // namespace

void GpuBackend::load_module_file(std::string_view name, const std::filesystem::path& file) {
  // The path reaches the plugin as a C string: a NUL byte would cut it short (and could name
  // another file), and an empty one names none. The message does not quote such a path.
  if (file.empty() || file.native().find('\0') != std::string::npos) {
    std::string message = "load_module_file: module ";
    message.append(name).append(file.empty() ? ": the file path is empty"
                                             : ": the file path contains a NUL byte");
    throw Error(Status::invalid_argument, std::string(this->name()), std::move(message));
  }
  // Absolute (against the current directory, now) and normalized, so that the plugin, which may
  // load the file later or by path, sees the same file this check saw.
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(file, ec);
  if (ec) file_error(this->name(), Status::invalid_argument, name, file, ec.message());
  absolute = absolute.lexically_normal();
  // Classify first so the message says what is wrong with the path, not just "open failed".
  const auto st = std::filesystem::status(absolute, ec);
  if (ec || !std::filesystem::exists(st)) {
    file_error(this->name(), Status::not_found, name, absolute,
               ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "no such file");
  }
  if (std::filesystem::is_directory(st)) {
    file_error(this->name(), Status::invalid_argument, name, absolute, "is a directory");
  }
  load_module_path(name, absolute);
}

void GpuBackend::load_module_path(std::string_view name, const std::filesystem::path& file) {
  std::string why;
  // A regular file only: a FIFO or a device at the path is refused, never opened or waited on.
  const std::optional<std::vector<std::byte>> bytes =
      support::read_regular_file(file, std::numeric_limits<std::uint64_t>::max(), why);
  if (!bytes) file_error(this->name(), Status::invalid_argument, name, file, why);
  load_module(name, *bytes);
}

std::uint64_t GpuBackend::device_free_memory() { return memory_info().free_bytes; }

std::size_t GpuBackend::scan_redzones() {
  // Only a plugin-backed backend has layers; the validate layer's bands are read through them.
  auto* plugin = dynamic_cast<detail::PluginBackend*>(this);
  return plugin != nullptr ? plugin->scan_guard_bands() : 0;
}

void GpuBackend::copy_h2d_async_retained(DevicePtr dst, const void* src, std::size_t bytes,
                                         Stream stream) {
  copy_h2d_async(dst, src, bytes, stream);
}

// ---- events: the defaults of a backend without them (a plugin older than ABI 1.1 reports the
// same through the core's default slots).

namespace {
[[noreturn]] void events_unsupported(const GpuBackend& b, const char* operation) {
  throw Error(Status::unsupported, std::string(b.name()), operation,
              "events are not supported by the " + std::string(b.plugin_name()) + " backend");
}
}  // namespace

Event GpuBackend::create_event() { events_unsupported(*this, "create_event"); }
void GpuBackend::destroy_event(Event) { events_unsupported(*this, "destroy_event"); }
void GpuBackend::record(Event, Stream) { events_unsupported(*this, "record"); }
void GpuBackend::wait(Stream, Event) { events_unsupported(*this, "wait"); }
void GpuBackend::synchronize(Event) { events_unsupported(*this, "synchronize"); }
bool GpuBackend::query(Event) { events_unsupported(*this, "query"); }
float GpuBackend::elapsed_ms(Event, Event) { events_unsupported(*this, "elapsed_ms"); }

// ---- graphs: the defaults of a backend without them (a plugin without the ABI 1.3 graph slots
// reports the same through the core's default slots).

namespace {
[[noreturn]] void graphs_unsupported(const GpuBackend& b, const char* operation) {
  throw Error(Status::unsupported, std::string(b.name()), operation,
              "graphs are not supported by the " + std::string(b.plugin_name()) + " backend");
}
}  // namespace

void GpuBackend::begin_capture(Stream, CaptureMode) { graphs_unsupported(*this, "begin_capture"); }
Graph GpuBackend::end_capture(Stream) { graphs_unsupported(*this, "end_capture"); }
void GpuBackend::launch_graph(Graph, Stream) { graphs_unsupported(*this, "launch_graph"); }
void GpuBackend::destroy_graph(Graph) { graphs_unsupported(*this, "destroy_graph"); }
void GpuBackend::abort_capture_if_active(Stream) noexcept {}
bool GpuBackend::stream_is_capturing(Stream) { return false; }

// ---- interop: the defaults of a backend without native handles.

namespace {
[[noreturn]] void interop_unsupported(const GpuBackend& b, const char* operation) {
  throw Error(Status::unsupported, std::string(b.name()), operation,
              "native handles and import are not supported by the " +
                  std::string(b.plugin_name()) + " backend");
}
}  // namespace

NativeHandles GpuBackend::native(Stream) { interop_unsupported(*this, "native"); }
void* GpuBackend::native_pointer(DevicePtr) { interop_unsupported(*this, "native_pointer"); }
DevicePtr GpuBackend::import_memory(void*, std::size_t, std::function<void()>, std::string_view) {
  interop_unsupported(*this, "import_memory");
}
Stream GpuBackend::import_stream(void*) { interop_unsupported(*this, "import_stream"); }

namespace {
[[noreturn]] void mapped_unsupported(const GpuBackend& b, const char* operation) {
  throw Error(Status::unsupported, std::string(b.name()), operation,
              "mapped host memory is not supported by the " + std::string(b.plugin_name()) +
                  " backend");
}
}  // namespace

void* GpuBackend::alloc_host_pinned(std::size_t, const char*) {
  mapped_unsupported(*this, "alloc_host_pinned");
}
void GpuBackend::free_host_pinned(void*) { mapped_unsupported(*this, "free_host_pinned"); }
DevicePtr GpuBackend::host_ptr_to_device(const void*) {
  mapped_unsupported(*this, "host_ptr_to_device");
}
void* GpuBackend::host_address(DevicePtr) { mapped_unsupported(*this, "host_address"); }

// ---- arenas and stream flags: the defaults of a backend without them.

DevicePtr GpuBackend::alloc_arena(std::size_t, const char*) {
  throw Error(Status::unsupported, std::string(name()), "alloc_arena",
              "arenas are not supported by the " + std::string(plugin_name()) + " backend");
}
void GpuBackend::free_arena(DevicePtr p) {
  if (!p) return;
  throw Error(Status::unsupported, std::string(name()), "free_arena",
              "arenas are not supported by the " + std::string(plugin_name()) + " backend");
}
Stream GpuBackend::create_stream(StreamFlags) { return create_stream(); }

}  // namespace gpuplug
