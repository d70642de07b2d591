// SPDX-License-Identifier: Apache-2.0
// gpuplug.MemoryScope: the C++ MemoryScope (docs/memory.md, "Peaks and scopes") as a context
// manager, `with gpu.memory_scope("layer 1") as scope: ...`, then scope.peak_bytes.
#include "common.hpp"

#include <optional>

namespace gpuplug::python {

namespace {

/// A scope and the backend it counts on (kept alive while the scope is). Python's GIL is held
/// in every member, so one scope is used by one thread at a time, as the C++ class requires.
struct ScopeObject {
  std::shared_ptr<GpuBackend> backend;
  std::unique_ptr<MemoryScope> scope;  // null once ended
  std::optional<MemoryScopeResult> result;
  std::string name;

  ScopeObject(std::shared_ptr<GpuBackend> gpu, std::string scope_name)
      : backend(std::move(gpu)), scope(std::make_unique<MemoryScope>(*backend, scope_name)),
        name(std::move(scope_name)) {}
  ~ScopeObject() { scope.reset(); }  // before the backend: the destructor ends it, never throws

  void end() {
    if (!scope) return;  // ended: the same result
    result = scope->end();
    scope.reset();
  }
  const MemoryScopeResult& ended(const char* what) const {
    if (!result) {
      refuse(std::string(backend->name()), what,
             "the memory scope '" + name + "' is still open: end() it or leave its with block");
    }
    return *result;
  }
};

std::shared_ptr<ScopeObject> open_scope(Backend& b, const std::string& name) {
  return std::make_shared<ScopeObject>(b.get("memory_scope"), name);
}

}  // namespace

void bind_memory_scope(py::module_& m, py::class_<Backend>& backend) {
  py::class_<ScopeObject, std::shared_ptr<ScopeObject>>(m, "MemoryScope",
      "A scoped memory counter (docs/memory.md): from its start to end() (or the end of its with\n"
      "block), how far the backend's live bytes rose above where they began (peak_bytes) and\n"
      "their net change (net_bytes), every thread's allocations included.")
      .def(py::init(&open_scope), py::arg("gpu"), py::arg("name"))
      .def_property_readonly("name", [](const ScopeObject& s) { return s.name; })
      .def_property_readonly("open", [](const ScopeObject& s) { return s.scope != nullptr; })
      .def_property_readonly("peak_bytes", [](const ScopeObject& s) { return s.ended("peak_bytes").peak_bytes; })
      .def_property_readonly("net_bytes", [](const ScopeObject& s) { return s.ended("net_bytes").net_bytes; })
      .def("end", [](py::object self) {
        self.cast<ScopeObject&>().end();
        return self;
      }, "Ends the scope (once; later calls keep the first result) and returns it.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](ScopeObject& s, py::object type, py::object, py::object) {
        try {
          s.end();
        } catch (...) {
          if (type.is_none()) throw;  // else the block's own exception is the one to see
        }
        return false;
      })
      .def("__repr__", [](const ScopeObject& s) {
        if (!s.result) return "<gpuplug.MemoryScope '" + s.name + "' open>";
        return "<gpuplug.MemoryScope '" + s.name + "' peak_bytes=" + std::to_string(s.result->peak_bytes) +
               " net_bytes=" + std::to_string(s.result->net_bytes) + ">";
      });
  backend.def("memory_scope", &open_scope, py::arg("name"),
              "Starts a MemoryScope named name on this backend (a context manager).");
}

}  // namespace gpuplug::python
