#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# numpy_exchange.py <bridge.so>: NumPy (Debian's python3-numpy, 1.24: the legacy `__dlpack__`
# capsule "dltensor") and gpuplug exchange host tensors both ways through bridge.cpp:
#   - numpy.from_dlpack reads gpuplug's exports (compact and transposed), and dropping the arrays
#     runs gpuplug's deleter, which frees the memory (the ledger is empty again);
#   - gpuplug imports the capsules of NumPy arrays (compact, strided, reversed), reads the same
#     values, and freeing the import runs NumPy's deleter (the array is released).
# Exit status 77 (skipped) when NumPy is missing or lacks from_dlpack (before 1.22).
import ctypes
import gc
import sys
import weakref

try:
    import numpy
except ImportError as e:
    print(f"skipped: NumPy is not installed for {sys.executable} ({e})")
    sys.exit(77)
if not hasattr(numpy, "from_dlpack"):
    print(f"skipped: NumPy {numpy.__version__} has no from_dlpack (1.22 or later has)")
    sys.exit(77)

lib = ctypes.CDLL(sys.argv[1])
lib.bridge_open.restype = ctypes.c_void_p
lib.bridge_open.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
lib.bridge_close.argtypes = [ctypes.c_void_p]
lib.bridge_live.restype = ctypes.c_uint64
lib.bridge_live.argtypes = [ctypes.c_void_p]
lib.bridge_export.restype = ctypes.c_void_p
lib.bridge_export.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
                              ctypes.c_char_p, ctypes.c_size_t]
lib.bridge_import.restype = ctypes.c_int64
lib.bridge_import.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_double),
                              ctypes.c_int64, ctypes.c_char_p, ctypes.c_size_t]

capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
capsule_pointer.restype = ctypes.c_void_p
capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
capsule_rename = ctypes.pythonapi.PyCapsule_SetName
capsule_rename.restype = ctypes.c_int
capsule_rename.argtypes = [ctypes.py_object, ctypes.c_char_p]
DLTENSOR = b"dltensor"  # kept alive: a capsule keeps a pointer to its name
USED = b"used_dltensor"

failures = []
error = ctypes.create_string_buffer(1024)


def check(what, ok):
    print(("ok: " if ok else "FAILED: ") + what)
    if not ok:
        failures.append(what)


class Exported:
    """What NumPy's from_dlpack asks of a producer: __dlpack__ and __dlpack_device__."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU, device 0

    def __dlpack__(self, stream=None):
        # No capsule destructor: NumPy consumes the capsule (renames it "used_dltensor") and
        # calls the deleter when the array goes.
        return capsule_new(self.tensor, DLTENSOR, None)


bridge = lib.bridge_open(error, len(error))
if not bridge:
    print("FAILED: bridge_open: " + error.value.decode())
    sys.exit(1)

# gpuplug -> NumPy
for transposed in (0, 1):
    tensor = lib.bridge_export(bridge, 3, 4, transposed, error, len(error))
    if not tensor:
        check("bridge_export: " + error.value.decode(), False)
        continue
    array = numpy.from_dlpack(Exported(tensor))
    expected = numpy.arange(12, dtype=numpy.float32).reshape(3, 4)
    if transposed:
        expected = expected.T
    name = "transposed" if transposed else "compact"
    check(f"numpy.from_dlpack reads gpuplug's {name} 3x4 float32 tensor",
          array.dtype == numpy.float32 and numpy.array_equal(array, expected))
    check(f"{name}: gpuplug's allocation is live while NumPy holds it", lib.bridge_live(bridge) == 1)
    del array
    gc.collect()
    check(f"{name}: dropping the array ran gpuplug's deleter (ledger empty)",
          lib.bridge_live(bridge) == 0)

# NumPy -> gpuplug
base = numpy.arange(24, dtype=numpy.float64).reshape(4, 6)
views = {"compact": base.copy(), "strided": base[:, ::2], "reversed": base[::-1, ::-3]}
for name in list(views):
    view = views.pop(name)  # the only reference left: its release is what the deleter does
    alive = weakref.ref(view)
    capsule = view.__dlpack__()
    tensor = capsule_pointer(capsule, DLTENSOR)
    capsule_rename(capsule, USED)  # consumed: from_dlpack owns it from here on
    out = (ctypes.c_double * view.size)()
    n = lib.bridge_import(bridge, tensor, out, view.size, error, len(error))
    if n < 0:
        check(f"gpuplug imports NumPy's {name} array: " + error.value.decode(), False)
        continue
    check(f"gpuplug reads NumPy's {name} {view.shape} float64 array",
          n == view.size and list(out) == view.reshape(-1).tolist())
    del capsule, view
    gc.collect()
    check(f"{name}: freeing the import ran NumPy's deleter (the array is released)",
          alive() is None)
check("nothing left on gpuplug's ledger", lib.bridge_live(bridge) == 0)
lib.bridge_close(bridge)

print(f"numpy {numpy.__version__}: {len(failures)} failed")
sys.exit(1 if failures else 0)
