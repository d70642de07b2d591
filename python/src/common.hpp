// SPDX-License-Identifier: Apache-2.0
// What the parts of the extension gpuplug._gpuplug share: the Python-side objects that hold a
// backend (Backend, Buffer's state, Stream, Event, Kernel) and the helpers that name errors.
#pragma once

#include <gpuplug/dlpack.hpp>  // first: it must see its own DLPack header
#include <gpuplug/gpuplug.hpp>

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

namespace gpuplug::python {

namespace py = pybind11;

/// A backend as Python holds it. release() (the end of a `with` block) drops this object's
/// reference: Buffers, Streams, Events, Kernels and DLPack exports made from it keep their own.
class Backend {
 public:
  explicit Backend(std::shared_ptr<GpuBackend> backend);
  /// The backend (a reference of the caller's own, so that a release() from another thread
  /// while the GIL is let go cannot destroy it mid-call); Error(invalid_argument) once released.
  std::shared_ptr<GpuBackend> get(const char* operation) const;
  void release() noexcept;
  bool released() const noexcept { return backend_ == nullptr; }
  const std::string& name() const noexcept { return name_; }

 private:
  std::shared_ptr<GpuBackend> backend_;
  std::string name_;
};

/// Layout of an imported tensor (from_dlpack): what the producer said of it.
struct ImportLayout {
  DevicePtr data;  // element (0, ..., 0)
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in elements
  DLDataType dtype{};
  bool read_only = false;
};

/// The memory a Python Buffer stands for: an allocation of `backend`, or an import
/// (from_dlpack: kind external on the ledger). Shared by the Python Buffer, its array views and
/// every DLPack export of them not yet deleted; the memory goes back once, at free() or when the
/// last of them lets go, on whichever thread that is (a DLPack deleter may run without the GIL:
/// nothing here touches Python, except the release of an import, which runs the producer's
/// deleter with the GIL taken).
struct BufferState {
  std::shared_ptr<GpuBackend> backend;
  DevicePtr ptr;
  std::size_t nbytes = 0;
  bool imported = false;
  /// Non-empty for memory another object owns and frees (an OpCache's scratch: its label):
  /// free() refuses it and the last reference frees nothing.
  std::string owner;
  std::shared_ptr<void> keep;  // what the owner needs kept while the buffer is (its OpCache)
  ImportLayout layout;  // imports only
  std::atomic<std::int64_t> exports{0};  // DLPack exports whose deleter has not run

  BufferState(std::shared_ptr<GpuBackend> b, DevicePtr p, std::size_t n, bool import);
  BufferState(const BufferState&) = delete;
  BufferState& operator=(const BufferState&) = delete;
  ~BufferState();
  /// The pointer; Error(invalid_argument) naming `operation` once freed.
  DevicePtr live_ptr(const char* operation) const;
  /// The pointer, kept live while the lock is held: free() waits for it. Taken with the GIL
  /// released (free() waits holding the GIL), and let go of before the GIL is taken again.
  std::pair<DevicePtr, std::shared_lock<std::shared_mutex>> use(const char* operation) const;
  /// Frees now. Error(invalid_argument) when already freed or while DLPack exports are live.
  void free(const char* operation);
  /// The owner freed the memory (or is about to): waits for uses in flight, then every later
  /// use is refused as freed. Only for a buffer with an owner.
  void owner_released();
  bool freed() const;

 private:
  void release_memory();  // mutex_ held
  mutable std::shared_mutex mutex_;  // shared: a use of the memory; unique: freeing it
  bool freed_ = false;
};

using BufferPtr = std::shared_ptr<BufferState>;

/// A stream made by Backend.create_stream; destroyed by destroy(), `with`, or garbage collection.
struct StreamObject {
  std::shared_ptr<GpuBackend> backend;
  Stream stream;
  bool destroyed = false;
  std::mutex mutex;
  void destroy();
  ~StreamObject();
};

/// An event made by Backend.create_event.
struct EventObject {
  std::shared_ptr<GpuBackend> backend;
  Event event;
  bool destroyed = false;
  std::mutex mutex;
  void destroy();
  ~EventObject();
};

/// A resolved kernel: module::function of one backend, and its published signature if any.
struct KernelObject {
  std::shared_ptr<GpuBackend> backend;
  KernelHandle handle;
  std::string module;
  std::string function;
};

/// The Stream a Python `stream=` argument names: None is the default stream.
Stream stream_of(const py::object& stream, const GpuBackend& backend, const char* operation);

/// Error(invalid_argument) with the backend's name and the operation.
[[noreturn]] void refuse(const std::string& backend, const char* operation, const std::string& why);

/// "name" + the Python caller's file:line, interned so that the ledger may keep the pointer.
const char* caller_site(const py::object& site);

/// DLPack data types by NumPy's names ("float32", "uint8", "bool", ...); Error naming it else.
DLDataType parse_dtype(const py::handle& dtype, const char* operation);
std::string dtype_name(DLDataType dtype);
std::size_t dtype_bytes(DLDataType dtype);

void bind_errors(py::module_& m);
/// gpuplug.Error (a borrowed reference, valid once bind_errors ran).
PyObject* error_class() noexcept;
/// An instance of `type` (gpuplug.Error or a subclass) for e, its attributes set.
py::object error_value(PyObject* type, const Error& e);
/// The Status a gpuplug.Error's `status` text names; Status::internal for any other text.
Status status_named(const std::string& name) noexcept;
void bind_registry(py::module_& m);
void bind_backend(py::module_& m);
void bind_buffer(py::module_& m);
void bind_memory(py::class_<Backend>& backend);
void bind_launch(py::class_<Backend>& backend);
py::dict device_info_dict(const DeviceInfo& d);
void bind_dlpack(py::module_& m);
void bind_model(py::module_& m, py::class_<Backend>& backend);
void bind_memory_scope(py::module_& m, py::class_<Backend>& backend);

}  // namespace gpuplug::python
