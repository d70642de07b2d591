// SPDX-License-Identifier: Apache-2.0
// GpuBackend.launch: Python ints, floats, Buffers and bytes-like values packed as kernel arguments,
// each by the size the kernel's module publishes for it (<func>_args), then the counted launch.
#include "common.hpp"

#include <pybind11/stl.h>

#include <cstring>
#include <limits>

namespace gpuplug::python {

namespace {

Dim3 dim3_of(const py::object& v, const std::string& backend, const char* what) {
  if (py::isinstance<py::int_>(v)) {
    const auto x = v.cast<std::int64_t>();
    if (x < 1 || x > std::numeric_limits<std::uint32_t>::max())
      refuse(backend, "launch", std::string(what) + " " + std::to_string(x) + " is not in [1, 2^32)");
    return Dim3{static_cast<std::uint32_t>(x), 1, 1};
  }
  const auto t = v.cast<std::vector<std::int64_t>>();
  if (t.empty() || t.size() > 3)
    refuse(backend, "launch", std::string(what) + " must be an int or a tuple of 1 to 3 ints");
  std::uint32_t d[3] = {1, 1, 1};
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] < 1 || t[i] > std::numeric_limits<std::uint32_t>::max())
      refuse(backend, "launch", std::string(what) + "[" + std::to_string(i) + "] " + std::to_string(t[i]) + " is not in [1, 2^32)");
    d[i] = static_cast<std::uint32_t>(t[i]);
  }
  return Dim3{d[0], d[1], d[2]};
}

KernelArg arg_of_bytes(const void* p, std::size_t n) {
  switch (n) {
    case 1: { std::uint8_t v; std::memcpy(&v, p, 1); return KernelArg(v); }
    case 2: { std::uint16_t v; std::memcpy(&v, p, 2); return KernelArg(v); }
    case 4: { std::uint32_t v; std::memcpy(&v, p, 4); return KernelArg(v); }
    default: { std::uint64_t v; std::memcpy(&v, p, 8); return KernelArg(v); }
  }
}

/// One argument. `size`: the published size, 0 when the kernel publishes none (then an int is
/// 8 bytes, a float a double).
KernelArg pack(const py::handle& a, std::size_t index, std::uint32_t size, const std::string& backend,
               const std::string& kernel) {
  const std::string which = "kernel " + kernel + " argument " + std::to_string(index);
  const auto need = [&](std::uint32_t got) {
    if (size != 0 && size != got)
      refuse(backend, "launch", which + " takes " + std::to_string(size) + " bytes, was given " +
                                    std::to_string(got) + " (" +
                                    std::string(py::str(py::type::handle_of(a).attr("__name__"))) + ")");
  };
  if (py::isinstance<BufferState>(a)) {
    need(8);
    return KernelArg(a.cast<BufferState&>().live_ptr("launch").value);
  }
  if (py::hasattr(a, "__gpuplug_ptr__")) {  // an array view: its first byte
    need(8);
    return KernelArg(a.attr("__gpuplug_ptr__").cast<std::uint64_t>());
  }
  if (py::isinstance<py::bool_>(a) || py::isinstance<py::int_>(a)) {
    const std::uint32_t n = size == 0 ? 8 : size;
    if (n != 1 && n != 2 && n != 4 && n != 8) need(8);
    int overflow = 0;
    const long long sv = PyLong_AsLongLongAndOverflow(a.ptr(), &overflow);
    std::uint64_t bits = static_cast<std::uint64_t>(sv);
    bool fits = false;
    if (overflow == 0) {  // in int64: signed or unsigned of n bytes
      fits = n == 8 || (sv < 0 ? sv >= -(1LL << (8 * n - 1)) : static_cast<std::uint64_t>(sv) < (1ULL << (8 * n)));
    } else if (overflow > 0 && n == 8) {  // up to uint64's largest
      bits = PyLong_AsUnsignedLongLong(a.ptr());
      fits = !PyErr_Occurred();
      PyErr_Clear();
    }
    if (!fits)
      refuse(backend, "launch", which + ": " + std::string(py::str(a)) + " does not fit in " + std::to_string(n) + " bytes");
    return arg_of_bytes(&bits, n);  // little-endian: the low n bytes
  }
  if (py::isinstance<py::float_>(a)) {
    const double d = a.cast<double>();
    if (size == 4) return KernelArg(static_cast<float>(d));
    need(8);
    return KernelArg(d);
  }
  Py_buffer view{};
  if (PyObject_GetBuffer(a.ptr(), &view, PyBUF_C_CONTIGUOUS) == 0) {  // numpy.float32(2), bytes
    const auto n = static_cast<std::size_t>(view.len);
    std::uint64_t raw = 0;
    if (n == 1 || n == 2 || n == 4 || n == 8) std::memcpy(&raw, view.buf, n);
    PyBuffer_Release(&view);
    if (n != 1 && n != 2 && n != 4 && n != 8)
      refuse(backend, "launch", which + ": a bytes-like argument of " + std::to_string(n) +
                                    " bytes (Python passes 1, 2, 4 or 8)");
    need(static_cast<std::uint32_t>(n));
    return arg_of_bytes(&raw, n);
  }
  PyErr_Clear();
  refuse(backend, "launch", which + ": " + std::string(py::str(py::type::handle_of(a).attr("__name__"))) +
                                " is not an int, a float, a Buffer, an array view or bytes-like");
}

}  // namespace

void bind_launch(py::class_<Backend>& cls) {
  cls.def("launch", [](Backend& b, const KernelObject& k, py::object grid, py::object block,
                       py::sequence args, std::uint32_t shared, py::object stream) {
    const auto& gpu = b.get("launch");
    if (k.backend != gpu) refuse(b.name(), "launch", "kernel " + k.module + "::" + k.function + " belongs to " + std::string(k.backend->name()));
    const Dim3 g = dim3_of(grid, b.name(), "grid");
    const Dim3 bl = dim3_of(block, b.name(), "block");
    const Stream s = stream_of(stream, *gpu, "launch");
    const KernelSignature* sig = gpu->kernel_signature(k.handle);
    const std::string name = k.module + "::" + k.function;
    std::vector<KernelArg> packed;
    packed.reserve(args.size());
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::uint32_t size = sig != nullptr && i < sig->sizes.size() ? sig->sizes[i] : 0;
      packed.push_back(pack(args[i], i, size, b.name(), name));
    }
    py::gil_scoped_release u;
    gpu->launch(k.handle, g, bl, shared, s, std::span<const KernelArg>(packed));
  }, py::arg("kernel"), py::arg("grid"), py::arg("block"), py::arg("args"), py::arg("shared") = 0,
     py::arg("stream") = py::none(),
     "Queues kernel on stream. grid, block: an int or a tuple of up to 3. args: ints, floats,\n"
     "Buffers, array views or bytes-like, each packed by the size the kernel publishes for it\n"
     "(an int as 8 bytes and a float as a double where it publishes none). A count or size the\n"
     "kernel does not take is Error(invalid_argument) and nothing is launched.");
}

}  // namespace gpuplug::python
