// SPDX-License-Identifier: Apache-2.0
// gpuplug.Buffer and the backend's memory members: alloc, free, copies between device memory and
// any Python object with the buffer protocol (bytes, bytearray, memoryview, NumPy arrays), memset.
#include "common.hpp"

#include <pybind11/stl.h>

namespace gpuplug::python {

BufferState::BufferState(std::shared_ptr<GpuBackend> b, DevicePtr p, std::size_t n, bool import)
    : backend(std::move(b)), ptr(p), nbytes(n), imported(import) {}

BufferState::~BufferState() {
  const std::unique_lock lock(mutex_);
  if (freed_ || !owner.empty()) return;
  try {
    release_memory();
  } catch (...) {  // a destructor cannot fail; the backend logged the error
  }
}

void BufferState::release_memory() {
  freed_ = true;
  if (imported && Py_IsInitialized()) {
    // Freeing an import runs its producer's deleter, which may be Python's (NumPy's, PyTorch's):
    // it gets the GIL, from whichever thread lets go of the last reference.
    const PyGILState_STATE gil = PyGILState_Ensure();
    try {
      backend->free(ptr);
    } catch (...) {
      PyGILState_Release(gil);
      throw;
    }
    PyGILState_Release(gil);
  } else {
    backend->free(ptr);
  }
}

void BufferState::owner_released() {
  const std::unique_lock lock(mutex_);
  freed_ = true;
}

bool BufferState::freed() const {
  const std::shared_lock lock(mutex_);
  return freed_;
}

DevicePtr BufferState::live_ptr(const char* operation) const {
  return use(operation).first;
}

std::pair<DevicePtr, std::shared_lock<std::shared_mutex>> BufferState::use(const char* operation) const {
  std::shared_lock lock(mutex_);
  if (freed_) refuse(std::string(backend->name()), operation, "the buffer was freed");
  return {ptr, std::move(lock)};
}

void BufferState::free(const char* operation) {
  const std::unique_lock lock(mutex_);
  if (freed_) refuse(std::string(backend->name()), operation, "the buffer was freed already");
  if (!owner.empty()) {
    refuse(std::string(backend->name()), operation,
           "the buffer is " + owner + "'s memory: it is freed by that OpCache's release()");
  }
  if (const auto n = exports.load(); n > 0) {
    refuse(std::string(backend->name()), operation,
           "the buffer has " + std::to_string(n) +
               " DLPack export(s) still in use: it is freed when the last of them is deleted");
  }
  release_memory();
}

namespace {

/// A Python object's bytes through the buffer protocol, C-contiguous; released on scope exit.
class HostBytes {
 public:
  HostBytes(const py::handle& obj, bool writable, const std::string& backend, const char* operation,
            const char* what) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) != 0) {
      py::error_already_set e;
      refuse(backend, operation,
             std::string(what) + " (" + std::string(py::str(py::type::handle_of(obj).attr("__name__"))) +
                 ") is not a " + (writable ? "writable " : "") +
                 "C-contiguous buffer: " + e.what());
    }
  }
  HostBytes(const HostBytes&) = delete;
  HostBytes& operator=(const HostBytes&) = delete;
  ~HostBytes() { PyBuffer_Release(&view_); }
  void* data() const { return view_.buf; }
  std::size_t size() const { return static_cast<std::size_t>(view_.len); }

 private:
  Py_buffer view_{};
};

const BufferPtr& same_backend(const BufferPtr& buf, const GpuBackend& gpu, const char* operation,
                              const char* which) {
  if (buf->backend.get() != &gpu) {
    refuse(std::string(gpu.name()), operation,
           std::string(which) + " is memory of " + std::string(buf->backend->name()));
  }
  return buf;
}

std::size_t count_of(const std::optional<std::size_t>& nbytes, std::size_t fallback) {
  return nbytes.value_or(fallback);
}

}  // namespace

void bind_buffer(py::module_& m) {
  py::class_<BufferState, BufferPtr>(m, "Buffer",
      "Memory of one backend. Keeps its backend alive; freed by GpuBackend.free(buffer) or when\n"
      "the last reference to it (an array view or DLPack export included) goes.")
      .def_property_readonly("ptr", [](const BufferState& b) { return b.live_ptr("ptr").value; },
                             "The device address (an int).")
      .def_property_readonly("nbytes", [](const BufferState& b) { return b.nbytes; })
      .def_property_readonly("freed", &BufferState::freed)
      .def_property_readonly("imported", [](const BufferState& b) { return b.imported; },
                             "True for memory from_dlpack took in (kind external on the ledger).")
      .def_property_readonly("backend", [](const BufferState& b) { return Backend(b.backend); })
      .def_property_readonly("data", [](const BufferState& b) -> py::object {
        if (!b.imported) return py::none();
        return py::int_(b.layout.data.value);
      }, "Imports: the address of element (0, ..., 0); None otherwise.")
      .def_property_readonly("shape", [](const BufferState& b) -> py::object {
        if (!b.imported) return py::none();
        return py::tuple(py::cast(b.layout.shape));
      })
      .def_property_readonly("strides", [](const BufferState& b) -> py::object {
        if (!b.imported) return py::none();
        return py::tuple(py::cast(b.layout.strides));
      }, "Imports: strides in elements; None otherwise.")
      .def_property_readonly("dtype", [](const BufferState& b) -> py::object {
        if (!b.imported) return py::none();
        return py::str(dtype_name(b.layout.dtype));
      })
      .def_property_readonly("read_only", [](const BufferState& b) { return b.imported && b.layout.read_only; })
      .def("__int__", [](const BufferState& b) { return b.live_ptr("ptr").value; })
      .def("__len__", [](const BufferState& b) { return b.nbytes; })
      .def("__repr__", [](const BufferState& b) {
        return "<gpuplug.Buffer " + std::to_string(b.nbytes) + " bytes on " + std::string(b.backend->name()) +
               (b.freed() ? ", freed>" : b.imported ? ", imported>" : ">");
      });
}

void bind_memory(py::class_<Backend>& cls) {
  cls.def("alloc", [](Backend& b, std::size_t nbytes, py::object site) {
        const auto& gpu = b.get("alloc");
        const char* s = caller_site(site);
        DevicePtr p;
        {
          py::gil_scoped_release u;
          p = gpu->alloc(nbytes, s);
        }
        return std::make_shared<BufferState>(gpu, p, nbytes, false);
      }, py::arg("nbytes"), py::arg("site") = py::none(),
      "Device memory on the ledger under site (default: the caller's file:line).")
      .def("free", [](Backend& b, BufferState& buf) {
        const auto& gpu = b.get("free");
        if (buf.backend != gpu) refuse(b.name(), "free", "the buffer is memory of " + std::string(buf.backend->name()));
        buf.free("free");
      }, py::arg("buffer"), "Frees now (refused while DLPack exports of it are in use).")
      .def("copy_h2d", [](Backend& b, const BufferPtr& dst, py::object src, std::optional<std::size_t> nbytes) {
        const auto& gpu = b.get("copy_h2d");
        same_backend(dst, *gpu, "copy_h2d", "the destination");
        const HostBytes host(src, false, b.name(), "copy_h2d", "the source");
        const std::size_t n = count_of(nbytes, host.size());
        if (n > host.size())
          refuse(b.name(), "copy_h2d", "nbytes " + std::to_string(n) + " is more than the source's " +
                                           std::to_string(host.size()) + " bytes");
        if (n > dst->nbytes)
          refuse(b.name(), "copy_h2d", "the source has " + std::to_string(n) + " bytes, the buffer " +
                                           std::to_string(dst->nbytes));
        py::gil_scoped_release u;
        const auto [p, in_use] = dst->use("copy_h2d");
        gpu->copy_h2d(p, host.data(), n);
      }, py::arg("dst"), py::arg("src"), py::arg("nbytes") = py::none(),
      "Copies src's bytes (any buffer-protocol object; all of them unless nbytes) to dst.")
      .def("copy_d2h", [](Backend& b, py::object dst, const BufferPtr& src, std::optional<std::size_t> nbytes) {
        const auto& gpu = b.get("copy_d2h");
        same_backend(src, *gpu, "copy_d2h", "the source");
        const HostBytes host(dst, true, b.name(), "copy_d2h", "the destination");
        const std::size_t n = count_of(nbytes, host.size());
        if (n > host.size())
          refuse(b.name(), "copy_d2h", "nbytes " + std::to_string(n) + " is more than the destination's " +
                                           std::to_string(host.size()) + " bytes");
        if (n > src->nbytes)
          refuse(b.name(), "copy_d2h", "the destination has room for " + std::to_string(n) +
                                           " bytes, the buffer holds " + std::to_string(src->nbytes));
        py::gil_scoped_release u;
        const auto [p, in_use] = src->use("copy_d2h");
        gpu->copy_d2h(host.data(), p, n);
      }, py::arg("dst"), py::arg("src"), py::arg("nbytes") = py::none(),
      "Copies the buffer's bytes into dst (a writable buffer-protocol object; all of it unless nbytes).")
      .def("copy_d2d", [](Backend& b, const BufferPtr& dst, const BufferPtr& src, std::optional<std::size_t> nbytes) {
        const auto& gpu = b.get("copy_d2d");
        same_backend(dst, *gpu, "copy_d2d", "the destination");
        same_backend(src, *gpu, "copy_d2d", "the source");
        const std::size_t n = count_of(nbytes, src->nbytes);
        if (n > src->nbytes || n > dst->nbytes)
          refuse(b.name(), "copy_d2d", std::to_string(n) + " bytes from a buffer of " + std::to_string(src->nbytes) +
                                           " to one of " + std::to_string(dst->nbytes));
        py::gil_scoped_release u;
        const auto [d, dst_in_use] = dst->use("copy_d2d");
        if (src == dst) {  // one shared lock: a second one could wait behind a waiting free
          gpu->copy_d2d(d, d, n);
        } else {
          const auto [s, src_in_use] = src->use("copy_d2d");
          gpu->copy_d2d(d, s, n);
        }
      }, py::arg("dst"), py::arg("src"), py::arg("nbytes") = py::none())
      .def("memset", [](Backend& b, const BufferPtr& dst, int value, std::optional<std::size_t> nbytes, py::object stream) {
        const auto& gpu = b.get("memset");
        same_backend(dst, *gpu, "memset", "the buffer");
        if (value < 0 || value > 255) refuse(b.name(), "memset", "value " + std::to_string(value) + " is not a byte (0 to 255)");
        const std::size_t n = count_of(nbytes, dst->nbytes);
        if (n > dst->nbytes)
          refuse(b.name(), "memset", std::to_string(n) + " bytes into a buffer of " + std::to_string(dst->nbytes));
        const Stream s = stream_of(stream, *gpu, "memset");
        py::gil_scoped_release u;
        const auto [p, in_use] = dst->use("memset");
        gpu->memset(p, static_cast<std::uint8_t>(value), n, s);
      }, py::arg("buffer"), py::arg("value"), py::arg("nbytes") = py::none(), py::arg("stream") = py::none(),
      "Sets nbytes (default: all) bytes to value, ordered on stream (asynchronous).");
}

}  // namespace gpuplug::python
