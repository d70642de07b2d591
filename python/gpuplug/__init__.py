# SPDX-License-Identifier: Apache-2.0
"""gpuplug for Python: backends, device memory, kernels and DLPack (docs/python.md).

    import gpuplug
    registry = gpuplug.PluginRegistry()
    registry.discover()
    with registry.create("host!") as gpu:
        buf = gpu.alloc(16)
        gpu.copy_h2d(buf, bytes(range(16)))
"""
import threading as _threading

from ._gpuplug import (  # noqa: F401  (re-exported)
    ArrayView,
    Buffer,
    Error,
    Event,
    GpuBackend,
    Kernel,
    MemoryScope,
    OpCache,
    PluginRegistry,
    Stream,
    Teardown,
    TeardownError,
    __version__,
    abi_version,
    as_array,
)
from . import _gpuplug

__all__ = [
    "ArrayView", "Buffer", "Error", "Event", "GpuBackend", "Kernel", "MemoryScope", "OpCache",
    "PluginRegistry", "Stream", "Teardown", "TeardownError",
    "abi_version", "as_array", "from_dlpack", "host_backend", "__version__",
]

KDL_CPU = 1

_host_lock = _threading.Lock()
_host = None


def _error(status, operation, message, backend=""):
    """An Error as the C++ side makes them: str() is '<backend>: <operation>: <message>'."""
    e = Error(": ".join(part for part in (backend, operation, message) if part))
    e.status, e.backend, e.operation, e.message = status, backend, operation, message
    return e


def host_backend():
    """The host backend from_dlpack takes CPU tensors in on when given no backend: one per
    process, made on first use (a registry of its own, discovered then)."""
    global _host
    with _host_lock:
        if _host is None:
            registry = PluginRegistry()
            registry.discover()
            _host = registry.create("host!")
        return _host


def from_dlpack(x, backend=None, writable=False):
    """Takes in x (anything with __dlpack__, or a DLPack capsule) as an imported Buffer.

    The memory stays the producer's: on the ledger as kind external, never freed by gpuplug;
    freeing the Buffer (or dropping it) runs the producer's deleter. The Buffer's shape,
    strides (in elements), dtype, data (element 0's address) and read_only describe the tensor.
    backend: the backend of the tensor's device; None takes CPU tensors in on host_backend().
    writable: refuse a read-only tensor.
    """
    if backend is None:
        device = x.__dlpack_device__() if hasattr(x, "__dlpack_device__") else (KDL_CPU, 0)
        if device[0] != KDL_CPU:
            raise _error("invalid_argument", "from_dlpack",
                         f"the tensor is on DLPack device {tuple(device)}: pass the backend of that device")
        backend = host_backend()
    return _gpuplug._from_dlpack(x, backend, writable)
