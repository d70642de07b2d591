// SPDX-License-Identifier: Apache-2.0
// gpuplug._gpuplug: the extension module, its exception class gpuplug.Error and the helpers the
// other parts share (call sites, dtype names).
#include "common.hpp"

#include <set>
#include <utility>

namespace gpuplug::python {

namespace {

// The exception class. Held as a plain reference that is never released: a static py::object
// would be destroyed after the interpreter is gone.
PyObject* error_type = nullptr;

struct DtypeName {
  const char* name;
  DLDataType type;
};
constexpr DtypeName dtypes[] = {
    {"int8", {kDLInt, 8, 1}},          {"int16", {kDLInt, 16, 1}},
    {"int32", {kDLInt, 32, 1}},        {"int64", {kDLInt, 64, 1}},
    {"uint8", {kDLUInt, 8, 1}},        {"uint16", {kDLUInt, 16, 1}},
    {"uint32", {kDLUInt, 32, 1}},      {"uint64", {kDLUInt, 64, 1}},
    {"float16", {kDLFloat, 16, 1}},    {"float32", {kDLFloat, 32, 1}},
    {"float64", {kDLFloat, 64, 1}},    {"bfloat16", {kDLBfloat, 16, 1}},
    {"complex64", {kDLComplex, 64, 1}}, {"complex128", {kDLComplex, 128, 1}},
    {"bool", {kDLBool, 8, 1}},
};

}  // namespace

void refuse(const std::string& backend, const char* operation, const std::string& why) {
  throw Error(Status::invalid_argument, backend, operation, why);
}

const char* caller_site(const py::object& site) {
  std::string text;
  if (!site.is_none()) {
    text = py::str(site);
  } else {
    // The Python frame that called into the extension (a C++ function has no frame of its own).
    try {
      const py::object frame = py::module_::import("sys").attr("_getframe")(0);
      const std::string file = py::str(frame.attr("f_code").attr("co_filename"));
      const auto slash = file.find_last_of('/');
      text = (slash == std::string::npos ? file : file.substr(slash + 1)) + ":" +
             std::string(py::str(frame.attr("f_lineno")));
    } catch (const py::error_already_set&) {
      text = "python";
    }
  }
  // The ledger may keep the pointer for the life of the allocation: one copy of each text, for
  // the life of the process.
  static std::mutex mutex;
  static auto* sites = new std::set<std::string>();
  const std::lock_guard lock(mutex);
  return sites->insert(std::move(text)).first->c_str();
}

DLDataType parse_dtype(const py::handle& dtype, const char* operation) {
  std::string name;
  if (py::hasattr(dtype, "name") && !py::isinstance<py::str>(dtype)) {
    name = py::str(dtype.attr("name"));  // numpy.dtype("float32").name
  } else {
    name = py::str(dtype);
  }
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);  // str(torch.float32)
  if (name == "bool_") name = "bool";
  for (const auto& d : dtypes)
    if (name == d.name) return d.type;
  std::string known;
  for (const auto& d : dtypes) known += std::string(known.empty() ? "" : ", ") + d.name;
  refuse("", operation, "unknown dtype '" + name + "' (one of " + known + ")");
}

std::string dtype_name(DLDataType dtype) {
  for (const auto& d : dtypes)
    if (d.type.code == dtype.code && d.type.bits == dtype.bits && d.type.lanes == dtype.lanes)
      return d.name;
  return to_string(dtype);
}

std::size_t dtype_bytes(DLDataType dtype) {
  return (static_cast<std::size_t>(dtype.bits) * dtype.lanes + 7) / 8;
}

PyObject* error_class() noexcept { return error_type; }

py::object error_value(PyObject* type, const Error& e) {
  py::object value = py::handle(type)(e.what());
  value.attr("status") = to_string(e.status());
  value.attr("backend") = e.backend();
  value.attr("operation") = e.operation();
  value.attr("message") = e.message();
  return value;
}

Status status_named(const std::string& name) noexcept {
  for (std::int32_t code = 0; code <= GPUPLUG_STATUS_CAPTURE_INVALIDATED; ++code) {
    if (to_string(static_cast<Status>(code)) == name) return static_cast<Status>(code);
  }
  return Status::internal;
}

void bind_errors(py::module_& m) {
  error_type = PyErr_NewExceptionWithDoc(
      "gpuplug.Error",
      "A gpuplug operation failed. str() is the C++ what(): '<backend>: <operation>: <message>'.\n"
      "status: 'invalid_argument', 'out_of_memory', 'not_found', ...; backend: 'host:0' or '';\n"
      "operation: 'copy_h2d' or ''; message: without the backend and operation.",
      PyExc_RuntimeError, nullptr);
  if (error_type == nullptr) throw py::error_already_set();
  py::handle type(error_type);
  for (const char* attr : {"status", "backend", "operation", "message"}) type.attr(attr) = "";
  m.add_object("Error", py::reinterpret_borrow<py::object>(type));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetObject(error_type, error_value(error_type, e).ptr());
    }
  });
}

}  // namespace gpuplug::python

PYBIND11_MODULE(_gpuplug, m) {
  using namespace gpuplug::python;
  m.doc() = "gpuplug's C++ API for Python (docs/python.md); import gpuplug, not this module.";
  m.attr("__version__") = GPUPLUG_VERSION_STRING;
  m.attr("abi_version") = std::to_string(GPUPLUG_ABI_VERSION_MAJOR) + "." + std::to_string(GPUPLUG_ABI_VERSION_MINOR);
  bind_errors(m);
  bind_buffer(m);
  bind_backend(m);
  bind_registry(m);
  bind_dlpack(m);
}
