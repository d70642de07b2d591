# SPDX-License-Identifier: Apache-2.0
# DLPack both ways with NumPy 1.24 and PyTorch 1.13 (the legacy capsule) and gpuplug itself (the
# versioned one): exports see gpuplug's bytes and kernel writes, imports read the producer's,
# and every drop order of backend, buffer, capsule and consumer ends without a crash (each in a
# fresh interpreter, so that a crash fails its test).
import ctypes
import sys
import textwrap

import numpy
import pytest

import gpuplug
from conftest import run_python

torch = pytest.importorskip("torch")

capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
capsule_is_valid.restype = ctypes.c_int
capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def filled(gpu, values):
    buf = gpu.alloc(values.nbytes)
    gpu.copy_h2d(buf, values)
    return buf


def test_numpy_sees_the_bytes_and_a_kernel_write(gpu):
    x = numpy.arange(300, dtype=numpy.float32)
    bx, by = filled(gpu, x), filled(gpu, numpy.ones(300, dtype=numpy.float32))
    view = numpy.from_dlpack(gpuplug.as_array(by, "float32", (3, 100)))
    assert view.shape == (3, 100) and (view == 1).all()
    raw = numpy.from_dlpack(bx)  # the Buffer itself: 1-D uint8
    assert raw.dtype == numpy.uint8 and raw.tobytes() == x.tobytes()
    gpu.launch(gpu.kernel("axpy", "axpy"), 2, 256, [300, 3.0, bx, by])
    gpu.synchronize()
    assert (view.reshape(-1) == 3 * x + 1).all()  # the same memory


@pytest.mark.parametrize("consume", ["torch.from_dlpack", "torch.utils.dlpack.from_dlpack"])
def test_torch_sees_the_bytes_and_a_kernel_write(gpu, consume):
    fn = torch.from_dlpack if consume == "torch.from_dlpack" else torch.utils.dlpack.from_dlpack
    x = numpy.arange(64, dtype=numpy.float32)
    bx, by = filled(gpu, x), filled(gpu, numpy.zeros(64, dtype=numpy.float32))
    view = gpuplug.as_array(by, "float32", (8, 8))
    t = fn(view if consume == "torch.from_dlpack" else view.__dlpack__())
    assert t.shape == (8, 8) and t.dtype == torch.float32 and float(t.sum()) == 0
    gpu.launch(gpu.kernel("axpy", "axpy"), 1, 256, [64, 1.0, bx, by])
    gpu.synchronize()
    assert t.reshape(-1).tolist() == x.tolist()
    t2 = fn(gpuplug.as_array(bx, "int32", (4, 4), strides=(1, 4)))  # transposed, other dtype
    assert (t2.numpy() == x[:16].view(numpy.int32).reshape(4, 4).T).all()


def test_capsule_kinds_and_export_refusals(gpu):
    buf = gpu.alloc(16)
    assert capsule_is_valid(buf.__dlpack__(), b"dltensor")
    assert capsule_is_valid(buf.__dlpack__(max_version=(1, 0)), b"dltensor_versioned")
    assert capsule_is_valid(buf.__dlpack__(max_version=(0, 8)), b"dltensor")
    assert buf.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError):
        buf.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        buf.__dlpack__(copy=True)
    ro = gpuplug.as_array(buf, "uint8", read_only=True)
    with pytest.raises(BufferError, match="read-only"):
        ro.__dlpack__()  # the legacy capsule cannot say so
    assert capsule_is_valid(ro.__dlpack__(max_version=(1, 0)), b"dltensor_versioned")


def test_as_array_checks_sizes_and_dtypes(gpu):
    buf = gpu.alloc(64)
    assert gpuplug.as_array(buf, "float64").shape == (8,)
    assert gpuplug.as_array(buf, numpy.dtype("int16")).dtype == "int16"
    assert gpuplug.as_array(buf, torch.float32).dtype == "float32"
    for bad in [dict(dtype="float32", shape=(17,)), dict(dtype="float64", shape=(2, 2), offset=40),
                dict(dtype="float32", shape=(4, 4), strides=(5, 1)), dict(dtype="float32", shape=(2,), strides=(1,) * 2),
                dict(dtype="int24"), dict(dtype="float32", offset=65), dict(dtype="float64", offset=4)]:
        with pytest.raises(gpuplug.Error) as e:
            gpuplug.as_array(buf, **bad)
        assert e.value.status == "invalid_argument" and e.value.operation == "as_array", bad


def test_an_exported_buffer_is_freed_by_its_last_owner(gpu):
    base = gpu.ledger_stats()["live_count"]
    buf = gpu.alloc(32)
    arr = numpy.from_dlpack(gpuplug.as_array(buf, "uint8"))
    with pytest.raises(gpuplug.Error) as e:
        gpu.free(buf)  # the array still uses it
    assert "DLPack export" in e.value.message
    del buf
    assert gpu.ledger_stats()["live_count"] == base + 1  # the array keeps it
    assert arr.nbytes == 32  # still readable
    del arr
    assert gpu.ledger_stats()["live_count"] == base


@pytest.mark.parametrize("layout", ["compact", "strided", "transposed", "reversed"])
def test_import_numpy_arrays(gpu, layout):
    base = numpy.arange(24, dtype=numpy.float64).reshape(4, 6)
    a = {"compact": base, "strided": base[:, ::2], "transposed": base.T, "reversed": base[::-1]}[layout]
    refs = sys.getrefcount(base)
    host = gpuplug.host_backend()
    live = host.ledger_stats()["live_count"]
    imp = gpuplug.from_dlpack(a)
    assert imp.imported and imp.dtype == "float64" and imp.shape == a.shape
    assert imp.strides == tuple(s // 8 for s in a.strides)
    assert host.ledger_stats()["live_count"] == live + 1
    kinds = {x["kind"] for x in host.memory_snapshot()["allocations"] if int(x["ptr"], 16) == imp.ptr}
    assert kinds == {"external"}
    raw = numpy.empty(imp.nbytes, dtype=numpy.uint8)
    host.copy_d2h(raw, imp)  # the bytes the elements span, lowest first
    assert (raw.view(numpy.float64) == base.reshape(-1)[
        (imp.ptr - base.ctypes.data) // 8:(imp.ptr - base.ctypes.data) // 8 + imp.nbytes // 8]).all()
    again = numpy.from_dlpack(gpuplug.as_array(imp, imp.dtype, imp.shape, imp.strides, offset=imp.data - imp.ptr))
    assert (again == a).all()
    del again
    host.free(imp)  # runs NumPy's deleter: the array is released
    assert host.ledger_stats()["live_count"] == live and sys.getrefcount(base) == refs


def test_import_read_only(registry, gpu):
    ro = numpy.arange(4.0)
    ro.flags.writeable = False
    if tuple(int(p) for p in numpy.__version__.split(".")[:2]) < (2, 0):
        with pytest.raises(gpuplug.Error) as e:  # NumPy 1.x will not export a read-only array
            gpuplug.from_dlpack(ro)
        assert "refused" in e.value.message and "readonly" in e.value.message.replace("-", "")
    else:
        assert gpuplug.from_dlpack(ro).read_only
    # A versioned, read-only producer: another host backend's read-only view.
    other = registry.create("host!")
    src = filled(other, numpy.arange(8, dtype=numpy.int32))
    view = gpuplug.as_array(src, "int32", read_only=True)
    imp = gpuplug.from_dlpack(view, backend=gpu)
    assert imp.read_only and imp.shape == (8,) and imp.dtype == "int32"
    out = numpy.empty(8, dtype=numpy.int32)
    gpu.copy_d2h(out, imp)
    assert out.tolist() == list(range(8))
    with pytest.raises(gpuplug.Error) as e:
        gpuplug.from_dlpack(view, backend=gpu, writable=True)
    assert e.value.status == "invalid_argument"
    gpu.free(imp)


def test_import_torch_tensors_and_capsules(gpu):
    t = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    host = gpuplug.host_backend()
    imp = gpuplug.from_dlpack(t)
    assert imp.shape == (3, 4) and imp.dtype == "int64" and imp.strides == (4, 1)
    out = numpy.empty(12, dtype=numpy.int64)
    host.copy_d2h(out, imp)
    assert out.tolist() == list(range(12))
    host.free(imp)
    cap = torch.utils.dlpack.to_dlpack(t[:, 1])
    imp = gpuplug.from_dlpack(cap)
    assert imp.shape == (3,) and imp.strides == (4,)
    with pytest.raises(gpuplug.Error) as e:
        gpuplug.from_dlpack(cap)  # consumed
    assert "consumed only once" in e.value.message
    with pytest.raises(gpuplug.Error):
        gpuplug.from_dlpack(object())
    with pytest.raises(gpuplug.Error) as e:  # memory already on the backend's own ledger
        gpuplug.from_dlpack(gpuplug.as_array(gpu.alloc(8), "uint8"), backend=gpu)
    assert e.value.status == "invalid_argument"


DROP_PRELUDE = """
    import gc, numpy, torch, gpuplug
    r = gpuplug.PluginRegistry(); r.discover()
    gpu = r.create("host!")
    buf = gpu.alloc(64)
    gpu.copy_h2d(buf, numpy.arange(16, dtype=numpy.float32))
"""


DROPS = [
    ("backend first, then tensor", """
        arr = numpy.from_dlpack(gpuplug.as_array(buf, "float32"))
        t = torch.from_dlpack(gpuplug.as_array(buf, "float32"))
        del gpu, buf, r; gc.collect()
        assert arr.sum() == 120 and float(t.sum()) == 120
        del arr; gc.collect(); del t; gc.collect()
    """),
    ("tensor first, then buffer, then backend", """
        arr = numpy.from_dlpack(buf)
        stats = gpu.ledger_stats
        del arr; gc.collect()
        assert stats()["live_count"] == 1
        del buf; gc.collect()
        assert stats()["live_count"] == 0
        del gpu, stats; gc.collect()
    """),
    ("capsule never consumed", """
        stats = gpu.ledger_stats
        caps = [buf.__dlpack__(), buf.__dlpack__(max_version=(1, 0))]
        del buf, gpu; gc.collect()
        assert stats()["live_count"] == 1
        del caps; gc.collect()
        assert stats()["live_count"] == 0
    """),
    ("consumers alive at interpreter exit", """
        keep = [numpy.from_dlpack(buf), torch.from_dlpack(gpuplug.as_array(buf, "float32")),
                buf.__dlpack__(), gpuplug.from_dlpack(numpy.arange(5.0)), gpuplug.from_dlpack(torch.ones(3))]
        del buf, gpu
    """),
    ("import outlives its array and backend", """
        a = numpy.arange(8.0)
        imp = gpuplug.from_dlpack(a, backend=gpu)
        del a, gpu, r; gc.collect()
        out = numpy.empty(8); imp.backend.copy_d2h(out, imp); assert out.sum() == 28
        del imp; gc.collect()
    """),
    ("tensor deleted on another thread", """
        import threading
        t = torch.from_dlpack(gpuplug.as_array(buf, "float32"))
        del buf, gpu; gc.collect()
        box = [t]; del t
        th = threading.Thread(target=box.clear); th.start(); th.join()
    """),
]


@pytest.mark.parametrize("name, steps", DROPS, ids=[n for n, _ in DROPS])
def test_drop_orders(name, steps):
    done = run_python(textwrap.dedent(DROP_PRELUDE) + textwrap.dedent(steps) + "print('done')\n")
    assert done.returncode == 0 and done.stdout.strip().endswith("done"), (
        f"{name}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
