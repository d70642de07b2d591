// SPDX-License-Identifier: Apache-2.0
// gpuplug.GpuBackend (streams, events, modules, queries, the context manager), Stream and Event.
#include "common.hpp"

#include <pybind11/stl.h>

#include <span>

namespace gpuplug::python {

Backend::Backend(std::shared_ptr<GpuBackend> backend)
    : backend_(std::move(backend)), name_(backend_ ? std::string(backend_->name()) : "") {}

std::shared_ptr<GpuBackend> Backend::get(const char* operation) const {
  if (!backend_) refuse(name_, operation, "this GpuBackend was released (its `with` block ended)");
  return backend_;
}

void Backend::release() noexcept { backend_.reset(); }

void StreamObject::destroy() {
  const std::lock_guard lock(mutex);
  if (destroyed) refuse(std::string(backend->name()), "destroy_stream", "the stream was destroyed already");
  backend->destroy_stream(stream);
  destroyed = true;
}

StreamObject::~StreamObject() {
  try {
    if (!destroyed) backend->destroy_stream(stream);
  } catch (...) {  // a destructor cannot fail; the backend logs the error
  }
}

void EventObject::destroy() {
  const std::lock_guard lock(mutex);
  if (destroyed) refuse(std::string(backend->name()), "destroy_event", "the event was destroyed already");
  backend->destroy_event(event);
  destroyed = true;
}

EventObject::~EventObject() {
  try {
    if (!destroyed) backend->destroy_event(event);
  } catch (...) {
  }
}

Stream stream_of(const py::object& stream, const GpuBackend& backend, const char* operation) {
  if (stream.is_none()) return Stream{};
  const auto& s = stream.cast<StreamObject&>();
  if (s.backend.get() != &backend)
    refuse(std::string(backend.name()), operation,
           "the stream belongs to " + std::string(s.backend->name()));
  if (s.destroyed) refuse(std::string(backend.name()), operation, "the stream was destroyed");
  return s.stream;
}

namespace {

Event event_of(const EventObject& e, const GpuBackend& backend, const char* operation) {
  if (e.backend.get() != &backend)
    refuse(std::string(backend.name()), operation, "the event belongs to " + std::string(e.backend->name()));
  if (e.destroyed) refuse(std::string(backend.name()), operation, "the event was destroyed");
  return e.event;
}

py::dict stats_dict(const LedgerStats& s) {
  py::dict out;
  out["live_bytes"] = s.live_bytes;
  out["live_count"] = s.live_count;
  out["peak_bytes"] = s.peak_bytes;
  out["live_managed_bytes"] = s.live_managed_bytes;
  out["total_allocs"] = s.total_allocs;
  out["total_frees"] = s.total_frees;
  out["live_pinned_bytes"] = s.live_pinned_bytes;
  out["arena_bytes"] = s.arena_bytes;
  return out;
}

}  // namespace

void bind_backend(py::module_& m) {
  py::class_<StreamObject, std::shared_ptr<StreamObject>>(m, "Stream",
      "A stream of one backend; a context manager that destroys it at the end of the block.")
      .def_property_readonly("handle", [](const StreamObject& s) { return s.stream.value; })
      .def_property_readonly("destroyed", [](const StreamObject& s) { return s.destroyed; })
      .def("destroy", [](StreamObject& s) { py::gil_scoped_release u; s.destroy(); },
           "Waits for the stream's work, then destroys it.")
      .def("synchronize", [](StreamObject& s) {
        if (s.destroyed) refuse(std::string(s.backend->name()), "synchronize", "the stream was destroyed");
        py::gil_scoped_release u;
        s.backend->synchronize(s.stream);
      })
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](StreamObject& s, py::args) {
        py::gil_scoped_release u;
        if (!s.destroyed) s.destroy();
      });

  py::class_<EventObject, std::shared_ptr<EventObject>>(m, "Event", "An event of one backend.")
      .def("destroy", [](EventObject& e) { e.destroy(); })
      .def("synchronize", [](EventObject& e) {
        const Event ev = event_of(e, *e.backend, "synchronize");
        py::gil_scoped_release u;
        e.backend->synchronize(ev);
      })
      .def("query", [](EventObject& e) { return e.backend->query(event_of(e, *e.backend, "query")); });

  py::class_<KernelObject, std::shared_ptr<KernelObject>>(m, "Kernel", "A resolved kernel function.")
      .def_property_readonly("name", [](const KernelObject& k) { return k.module + "::" + k.function; })
      .def_property_readonly("signature", [](const KernelObject& k) -> py::object {
        const KernelSignature* s = k.backend->kernel_signature(k.handle);
        if (s == nullptr) return py::none();
        return py::cast(s->sizes);
      }, "The bytes of each argument as the module publishes them (<func>_args); None if it does not.")
      .def("__repr__", [](const KernelObject& k) { return "<gpuplug.Kernel " + k.module + "::" + k.function + ">"; });

  py::class_<Backend> cls(m, "GpuBackend",
      "One device of one vendor. A context manager: the end of the block synchronizes it and\n"
      "drops this object's reference (Buffers and exports keep the backend alive themselves).");
  cls.def_property_readonly("name", [](const Backend& b) { return b.name(); })
      .def_property_readonly("plugin_name", [](const Backend& b) { return std::string(b.get("plugin_name")->plugin_name()); })
      .def_property_readonly("ordinal", [](const Backend& b) { return b.get("ordinal")->ordinal(); })
      .def_property_readonly("released", &Backend::released)
      .def("__repr__", [](const Backend& b) { return "<gpuplug.GpuBackend " + b.name() + (b.released() ? " (released)>" : ">"); })
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Backend& b, py::object type, py::object, py::object) {
        if (!b.released()) {
          try {
            py::gil_scoped_release u;
            b.get("synchronize")->synchronize();
          } catch (...) {
            b.release();
            if (type.is_none()) throw;  // else the block's own exception is the one to see
            return false;
          }
          b.release();
        }
        return false;
      })
      .def("release", &Backend::release, "Drops this object's reference to the backend.")
      .def("synchronize", [](Backend& b, py::object stream) {
        const auto& gpu = b.get("synchronize");
        if (stream.is_none()) {
          py::gil_scoped_release u;
          gpu->synchronize();
        } else {
          const Stream s = stream_of(stream, *gpu, "synchronize");
          py::gil_scoped_release u;
          gpu->synchronize(s);
        }
      }, py::arg("stream") = py::none(), "Waits for every stream (or the one given).")
      .def("create_stream", [](Backend& b, bool blocking) {
        const auto& gpu = b.get("create_stream");
        auto s = std::make_shared<StreamObject>();
        s->backend = gpu;
        s->stream = gpu->create_stream(blocking ? StreamFlags::blocking : StreamFlags::non_blocking);
        return s;
      }, py::arg("blocking") = false)
      .def("create_event", [](Backend& b) {
        const auto& gpu = b.get("create_event");
        auto e = std::make_shared<EventObject>();
        e->backend = gpu;
        e->event = gpu->create_event();
        return e;
      })
      .def("record", [](Backend& b, EventObject& e, py::object stream) {
        const auto& gpu = b.get("record");
        gpu->record(event_of(e, *gpu, "record"), stream_of(stream, *gpu, "record"));
      }, py::arg("event"), py::arg("stream") = py::none())
      .def("wait", [](Backend& b, py::object stream, EventObject& e) {
        const auto& gpu = b.get("wait");
        gpu->wait(stream_of(stream, *gpu, "wait"), event_of(e, *gpu, "wait"));
      }, py::arg("stream"), py::arg("event"))
      .def("elapsed_ms", [](Backend& b, EventObject& start, EventObject& end) {
        const auto& gpu = b.get("elapsed_ms");
        return gpu->elapsed_ms(event_of(start, *gpu, "elapsed_ms"), event_of(end, *gpu, "elapsed_ms"));
      })
      .def("load_module", [](Backend& b, const std::string& name, py::buffer image) {
        const auto& gpu = b.get("load_module");
        const py::buffer_info info = image.request();
        gpu->load_module(name, std::span(static_cast<const std::byte*>(info.ptr),
                                         static_cast<std::size_t>(info.size * info.itemsize)));
      }, py::arg("name"), py::arg("image"), "Registers a kernel module image (bytes) under name.")
      .def("load_module_file", [](Backend& b, const std::string& name, const std::string& file) {
        b.get("load_module_file")->load_module_file(name, file);
      }, py::arg("name"), py::arg("file"))
      .def("unload_module", [](Backend& b, const std::string& name) { b.get("unload_module")->unload_module(name); })
      .def("has_module", [](Backend& b, const std::string& name) { return b.get("has_module")->has_module(name); })
      .def("kernel", [](Backend& b, const std::string& module, const std::string& func) {
        const auto& gpu = b.get("kernel");
        auto k = std::make_shared<KernelObject>();
        k->backend = gpu;
        k->handle = gpu->kernel(module, func);
        k->module = module;
        k->function = func;
        return k;
      }, py::arg("module"), py::arg("func"), "Resolves module::func (loading the module when needed).")
      .def("ledger_stats", [](Backend& b) { return stats_dict(b.get("ledger_stats")->ledger_stats()); })
      .def("memory_snapshot", [](Backend& b) {
        const std::string text = to_json(b.get("memory_snapshot")->memory_snapshot());
        return py::module_::import("json").attr("loads")(text);
      }, "The ledger and memory figures as data (JSON schema 1 of docs/memory.md, parsed).")
      .def("memory_info", [](Backend& b) {
        const MemoryInfo i = b.get("memory_info")->memory_info();
        py::dict out;
        out["free_bytes"] = i.free_bytes;
        out["total_bytes"] = i.total_bytes;
        return out;
      })
      .def("device_info", [](Backend& b) { return device_info_dict(b.get("device_info")->device_info()); })
      .def("alloc_report", [](Backend& b, std::size_t top) { return b.get("alloc_report")->alloc_report(top); },
           py::arg("top_n") = 10)
      .def("native", [](Backend& b, py::object stream) {
        const auto& gpu = b.get("native");
        const NativeHandles h = gpu->native(stream_of(stream, *gpu, "native"));
        py::dict out;
        out["vendor"] = h.vendor;
        out["device"] = h.device;
        out["context"] = reinterpret_cast<std::uintptr_t>(h.context);
        out["stream"] = reinterpret_cast<std::uintptr_t>(h.stream);
        return out;
      }, py::arg("stream") = py::none(), "The vendor runtime's handles (vendor, device, context, stream).");
  bind_memory(cls);
  bind_launch(cls);
  bind_model(m, cls);
  bind_memory_scope(m, cls);
}

}  // namespace gpuplug::python
