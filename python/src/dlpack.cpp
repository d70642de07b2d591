// SPDX-License-Identifier: Apache-2.0
// DLPack both ways, as the Python array API protocol has it: Buffer and ArrayView speak
// __dlpack__ / __dlpack_device__ (a versioned capsule when the consumer's max_version is 1.0 or
// later, else the legacy one NumPy 1.24 and PyTorch 1.13 take), and from_dlpack takes in any
// producer's tensor as an imported Buffer.
#include "common.hpp"

#include <pybind11/stl.h>

namespace gpuplug::python {

namespace {

constexpr const char* versioned_name = "dltensor_versioned";
constexpr const char* legacy_name = "dltensor";

/// A typed view of a Buffer (as_array): what it exports.
struct ArrayView {
  BufferPtr buffer;
  std::uint64_t offset = 0;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in elements; empty: row-major
  DLDataType dtype{};
  bool read_only = false;
};

/// The lowest and highest element offsets (in elements) the layout reaches; {0, -1} when empty.
std::pair<std::int64_t, std::int64_t> extent(const std::vector<std::int64_t>& shape,
                                             const std::vector<std::int64_t>& strides) {
  std::int64_t lo = 0, hi = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return {0, -1};
    const std::int64_t reach = (shape[d] - 1) * strides[d];
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo, hi};
}

std::vector<std::int64_t> row_major(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

py::tuple device_of(GpuBackend& gpu) {
  const NativeHandles h = gpu.native();
  int type = kDLCPU;
  if (h.vendor == "cuda") type = kDLCUDA;
  else if (h.vendor == "hip") type = kDLROCM;
  return py::make_tuple(type, h.vendor == "host" ? 0 : h.device);
}

void capsule_destructor(PyObject* capsule) {
  // A consumed capsule was renamed ("used_dltensor..."): its tensor belongs to the consumer.
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  if (PyCapsule_IsValid(capsule, versioned_name)) {
    auto* t = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, versioned_name));
    if (t != nullptr && t->deleter != nullptr) t->deleter(t);
  } else if (PyCapsule_IsValid(capsule, legacy_name)) {
    auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, legacy_name));
    if (t != nullptr && t->deleter != nullptr) t->deleter(t);
  }
  PyErr_Restore(type, value, trace);
}

py::object export_capsule(const BufferPtr& buf, std::uint64_t offset, const std::vector<std::int64_t>& shape,
                          const std::vector<std::int64_t>& strides, DLDataType dtype, bool read_only,
                          const py::object& max_version, const py::object& dl_device, const py::object& copy) {
  GpuBackend& gpu = *buf->backend;
  buf->live_ptr("to_dlpack");
  if (!copy.is_none() && copy.cast<bool>())
    throw py::buffer_error(std::string(gpu.name()) + ": to_dlpack: gpuplug exports without copying (copy=True)");
  if (!dl_device.is_none() && !dl_device.equal(device_of(gpu)))
    throw py::buffer_error(std::string(gpu.name()) + ": to_dlpack: the memory is on device " +
                           std::string(py::str(device_of(gpu))) + ", not " + std::string(py::str(dl_device)));
  bool versioned = false;
  if (!max_version.is_none()) versioned = py::cast<py::sequence>(max_version)[0].cast<int>() >= 1;
  if (read_only && !versioned)
    throw py::buffer_error(std::string(gpu.name()) + ": to_dlpack: a read-only view needs a DLPack 1.0 consumer "
                           "(the legacy capsule cannot say read-only)");
  DevicePtr ptr;
  {
    // Counted as an export from here (free() refuses then), checked live under the same lock.
    const auto [p, in_use] = buf->use("to_dlpack");
    ptr = p;
    buf->exports.fetch_add(1);
  }
  try {
    // Work queued on any stream of the backend is done before the consumer sees the memory.
    py::gil_scoped_release u;
    gpu.synchronize();
  } catch (...) {
    buf->exports.fetch_sub(1);
    throw;
  }
  DlpackExportOptions o;
  o.byte_offset = offset;
  o.read_only = read_only;
  o.transfer_ownership = false;  // the BufferState frees, once its last owner lets go
  auto keep = std::make_shared<BufferPtr>(buf);
  o.on_delete = [keep] {
    (*keep)->exports.fetch_sub(1);
    keep->reset();
  };
  void* tensor = nullptr;
  try {
    if (versioned) tensor = to_dlpack(buf->backend, ptr, shape, dtype, strides, o);
    else tensor = to_dlpack_unversioned(buf->backend, ptr, shape, dtype, strides, o);
  } catch (...) {
    buf->exports.fetch_sub(1);
    throw;
  }
  PyObject* capsule = PyCapsule_New(tensor, versioned ? versioned_name : legacy_name, capsule_destructor);
  if (capsule == nullptr) {
    if (versioned) static_cast<DLManagedTensorVersioned*>(tensor)->deleter(static_cast<DLManagedTensorVersioned*>(tensor));
    else static_cast<DLManagedTensor*>(tensor)->deleter(static_cast<DLManagedTensor*>(tensor));
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

BufferPtr import_capsule(py::object x, const Backend& backend, bool writable) {
  const auto& gpu = backend.get("from_dlpack");
  py::object capsule = x;
  if (!PyCapsule_CheckExact(x.ptr())) {
    if (!py::hasattr(x, "__dlpack__"))
      refuse(backend.name(), "from_dlpack", std::string(py::str(py::type::handle_of(x).attr("__name__"))) +
                                                " has no __dlpack__ and is not a DLPack capsule");
    try {
      try {
        capsule = x.attr("__dlpack__")(py::arg("max_version") = py::make_tuple(1, 0));
      } catch (py::error_already_set& e) {
        if (!e.matches(PyExc_TypeError)) throw;
        capsule = x.attr("__dlpack__")();  // a producer before the array API's 2023 revision
      }
    } catch (py::error_already_set& e) {
      refuse(backend.name(), "from_dlpack", "the producer's __dlpack__ refused: " + std::string(e.what()));
    }
  }
  DlpackImportOptions o;
  o.writable = writable;
  o.site = "python from_dlpack";
  DlpackTensor t;
  PyObject* c = capsule.ptr();
  if (PyCapsule_IsValid(c, versioned_name)) {
    auto* p = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, versioned_name));
    PyCapsule_SetName(c, "used_dltensor_versioned");  // consumed: from_dlpack owns it from here
    py::gil_scoped_release u;
    t = from_dlpack(*gpu, p, o);
  } else if (PyCapsule_IsValid(c, legacy_name)) {
    auto* p = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, legacy_name));
    PyCapsule_SetName(c, "used_dltensor");
    py::gil_scoped_release u;
    t = from_dlpack(*gpu, p, o);
  } else {
    const char* name = PyCapsule_CheckExact(c) ? PyCapsule_GetName(c) : nullptr;
    PyErr_Clear();
    refuse(backend.name(), "from_dlpack", std::string("not a DLPack capsule (") +
                                              (name ? "named '" + std::string(name) + "'" : "no name") +
                                              "; a capsule can be consumed only once)");
  }
  const auto [lo, hi] = extent(t.shape, t.strides);
  const std::size_t item = dtype_bytes(t.dtype);
  const auto nbytes = static_cast<std::size_t>(hi - lo + 1) * item;
  auto state = std::make_shared<BufferState>(gpu, t.memory, nbytes, true);
  state->layout = ImportLayout{t.data, t.shape, t.strides, t.dtype, t.read_only};
  return state;
}

}  // namespace

void bind_dlpack(py::module_& m) {
  auto buffer = py::reinterpret_borrow<py::class_<BufferState, BufferPtr>>(
      m.attr("Buffer"));
  buffer
      .def("__dlpack__", [](const BufferPtr& b, py::object, py::object max_version, py::object dl_device, py::object copy) {
        const std::vector<std::int64_t> shape{static_cast<std::int64_t>(b->nbytes)};
        return export_capsule(b, 0, shape, {}, DLDataType{kDLUInt, 8, 1}, false, max_version, dl_device, copy);
      }, py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
         py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
         "The buffer's bytes as a 1-D uint8 DLPack tensor (a capsule).")
      .def("__dlpack_device__", [](const BufferPtr& b) { return device_of(*b->backend); });

  py::class_<ArrayView>(m, "ArrayView", "A typed view of a Buffer (as_array) that speaks DLPack.")
      .def_property_readonly("buffer", [](const ArrayView& v) { return v.buffer; })
      .def_property_readonly("ptr", [](const ArrayView& v) { return v.buffer->live_ptr("ptr").value + v.offset; })
      .def_property_readonly("__gpuplug_ptr__", [](const ArrayView& v) { return v.buffer->live_ptr("launch").value + v.offset; })
      .def_property_readonly("offset", [](const ArrayView& v) { return v.offset; })
      .def_property_readonly("shape", [](const ArrayView& v) { return py::tuple(py::cast(v.shape)); })
      .def_property_readonly("strides", [](const ArrayView& v) {
        return py::tuple(py::cast(v.strides.empty() ? row_major(v.shape) : v.strides));
      }, "In elements.")
      .def_property_readonly("dtype", [](const ArrayView& v) { return dtype_name(v.dtype); })
      .def_property_readonly("read_only", [](const ArrayView& v) { return v.read_only; })
      .def("__dlpack__", [](const ArrayView& v, py::object, py::object max_version, py::object dl_device, py::object copy) {
        return export_capsule(v.buffer, v.offset, v.shape, v.strides, v.dtype, v.read_only, max_version, dl_device, copy);
      }, py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
         py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack_device__", [](const ArrayView& v) { return device_of(*v.buffer->backend); })
      .def("__repr__", [](const ArrayView& v) {
        return "<gpuplug.ArrayView " + dtype_name(v.dtype) + std::string(py::str(py::tuple(py::cast(v.shape)))) +
               " of " + std::to_string(v.buffer->nbytes) + " bytes on " + std::string(v.buffer->backend->name()) + ">";
      });

  m.def("as_array", [](const BufferPtr& buf, py::object dtype, std::optional<std::vector<std::int64_t>> shape,
                       std::optional<std::vector<std::int64_t>> strides, std::uint64_t offset, bool read_only) {
    const std::string backend(buf->backend->name());
    buf->live_ptr("as_array");
    ArrayView v;
    v.buffer = buf;
    v.offset = offset;
    v.dtype = parse_dtype(dtype, "as_array");
    v.read_only = read_only;
    const std::size_t item = dtype_bytes(v.dtype);
    if (offset > buf->nbytes)
      refuse(backend, "as_array", "offset " + std::to_string(offset) + " is past the buffer's " + std::to_string(buf->nbytes) + " bytes");
    if (!shape) {
      if ((buf->nbytes - offset) % item != 0)
        refuse(backend, "as_array", std::to_string(buf->nbytes - offset) + " bytes are not a whole number of " +
                                        dtype_name(v.dtype) + " (" + std::to_string(item) + " bytes each): give a shape");
      shape = std::vector<std::int64_t>{static_cast<std::int64_t>((buf->nbytes - offset) / item)};
    }
    for (const auto e : *shape)
      if (e < 0) refuse(backend, "as_array", "shape has the negative extent " + std::to_string(e));
    v.shape = *shape;
    if (strides) {
      if (strides->size() != v.shape.size())
        refuse(backend, "as_array", "strides has " + std::to_string(strides->size()) + " entries, shape " + std::to_string(v.shape.size()));
      v.strides = *strides;
    }
    const auto [lo, hi] = extent(v.shape, v.strides.empty() ? row_major(v.shape) : v.strides);
    const auto first = static_cast<std::int64_t>(offset) + lo * static_cast<std::int64_t>(item);
    const auto end = static_cast<std::int64_t>(offset) + (hi + 1) * static_cast<std::int64_t>(item);
    if (hi >= lo && (first < 0 || end > static_cast<std::int64_t>(buf->nbytes)))
      refuse(backend, "as_array", dtype_name(v.dtype) + std::string(py::str(py::tuple(py::cast(v.shape)))) +
                                      " at offset " + std::to_string(offset) + " reaches bytes [" + std::to_string(first) +
                                      ", " + std::to_string(end) + "), the buffer has " + std::to_string(buf->nbytes));
    return v;
  }, py::arg("buffer"), py::arg("dtype"), py::arg("shape") = py::none(), py::arg("strides") = py::none(),
     py::arg("offset") = 0, py::arg("read_only") = false,
     "A typed view of buffer: dtype 'float32', ...; shape (default: as many as fit); strides in\n"
     "elements (default: row-major); offset in bytes. Every element must lie inside the buffer.");

  m.def("_from_dlpack", &import_capsule, py::arg("x"), py::arg("backend"), py::arg("writable") = false);
}

}  // namespace gpuplug::python
