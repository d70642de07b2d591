# SPDX-License-Identifier: Apache-2.0
# The binding of the C++ API: registry, memory, copies with any buffer-protocol object, memset,
# errors with their status, streams and events, kernel launches with packed arguments.
import gc

import numpy
import pytest

import gpuplug


def test_registry_lists_host_as_data(registry):
    plugins = registry.list()
    host = [p for p in plugins if p["name"] == "host"]
    assert host and host[0]["state"] == "available" and host[0]["reason"] == "none"
    assert host[0]["devices"] and host[0]["devices"][0]["device_class"] == "cpu"
    assert all({"name", "state", "reason", "message", "devices", "path"} <= set(p) for p in plugins)


def test_create_select_and_refusals(registry):
    with registry.create("host!") as gpu:
        assert gpu.name == "host:0" and gpu.plugin_name == "host"
    assert gpu.released
    with pytest.raises(gpuplug.Error) as e:
        gpu.alloc(8)
    assert e.value.status == "invalid_argument" and "released" in str(e.value)
    chosen = registry.select("host!")
    assert chosen["chosen"] == "host:0" and isinstance(chosen["backend"], gpuplug.GpuBackend)
    assert registry.dry_run("host!")["backend"] is None
    with pytest.raises(gpuplug.Error) as e:
        registry.create("nosuch!")
    assert e.value.operation == "select" and e.value.status in ("not_found", "unavailable")
    assert str(e.value).startswith(e.value.backend + ": select: " if e.value.backend else "select: ")
    with pytest.raises(gpuplug.Error) as e:
        registry.create("host:x")
    assert e.value.status == "invalid_argument"
    assert [b.name for b in registry.create_all("host")] == ["host:0"]
    assert registry.search_path() and all(isinstance(p, str) for p in registry.search_path())


def test_with_block_releases_on_an_exception_too(registry):
    with pytest.raises(ZeroDivisionError):
        with registry.create("host!") as gpu:
            buf = gpu.alloc(8)
            1 / 0
    assert gpu.released
    assert buf.nbytes == 8 and buf.backend.name == "host:0"  # the buffer keeps the backend
    buf.backend.free(buf)


@pytest.mark.parametrize("make", [bytes, bytearray, lambda b: memoryview(bytearray(b)),
                                  lambda b: numpy.frombuffer(b, dtype=numpy.uint8).copy()])
def test_copy_round_trip(gpu, make):
    data = bytes(range(200, 256)) + bytes(range(40))
    buf = gpu.alloc(len(data))
    gpu.copy_h2d(buf, make(data))
    out = bytearray(len(data))
    gpu.copy_d2h(out, buf)
    assert bytes(out) == data
    arr = numpy.zeros(len(data), dtype=numpy.uint8)
    gpu.copy_d2h(arr, buf)
    assert arr.tobytes() == data


def test_typed_numpy_round_trip_and_partial_copies(gpu):
    x = numpy.linspace(-1, 1, 33, dtype=numpy.float64)
    buf = gpu.alloc(x.nbytes)
    gpu.copy_h2d(buf, x)
    y = numpy.empty_like(x)
    gpu.copy_d2h(y, buf)
    assert (x == y).all()
    head = numpy.zeros(4, dtype=numpy.float64)
    gpu.copy_d2h(head, buf)  # fewer bytes than the buffer: the first ones
    assert (head == x[:4]).all()
    gpu.copy_h2d(buf, numpy.full(33, 5.0), nbytes=8)
    gpu.copy_d2h(y, buf)
    assert y[0] == 5.0 and (y[1:] == x[1:]).all()


def test_bad_sizes_and_objects_raise_error_with_status(gpu):
    buf = gpu.alloc(16)
    with pytest.raises(gpuplug.Error) as e:
        gpu.copy_h2d(buf, bytes(17))
    assert (e.value.status, e.value.backend, e.value.operation) == ("invalid_argument", "host:0", "copy_h2d")
    assert "17 bytes" in str(e.value) and "16" in str(e.value)
    with pytest.raises(gpuplug.Error) as e:
        gpu.copy_d2h(bytearray(32), buf)
    assert e.value.operation == "copy_d2h" and "32" in e.value.message
    with pytest.raises(gpuplug.Error) as e:
        gpu.copy_d2h(bytes(16), buf)  # not writable
    assert e.value.status == "invalid_argument" and "writable" in e.value.message
    with pytest.raises(gpuplug.Error) as e:
        gpu.copy_h2d(buf, numpy.arange(8, dtype=numpy.int32)[::2])  # not contiguous
    assert "C-contiguous" in e.value.message
    with pytest.raises(gpuplug.Error) as e:
        gpu.copy_h2d(buf, 12)
    assert "int" in e.value.message
    with pytest.raises(gpuplug.Error) as e:
        gpu.copy_h2d(buf, bytes(4), nbytes=8)
    assert "nbytes 8" in e.value.message


def test_memset_whole_and_part(gpu):
    buf = gpu.alloc(32)
    gpu.memset(buf, 0xAB)
    gpu.memset(buf, 1, nbytes=4)
    gpu.synchronize()
    out = bytearray(32)
    gpu.copy_d2h(out, buf)
    assert bytes(out) == b"\x01" * 4 + b"\xab" * 28
    with pytest.raises(gpuplug.Error) as e:
        gpu.memset(buf, 256)
    assert e.value.status == "invalid_argument"
    with pytest.raises(gpuplug.Error):
        gpu.memset(buf, 0, nbytes=33)


def test_free_drop_and_ledger(gpu):
    base = gpu.ledger_stats()["live_count"]
    a = gpu.alloc(64)
    b = gpu.alloc(64, site="my site")
    assert gpu.ledger_stats()["live_count"] == base + 2
    sites = {x["site"] for x in gpu.memory_snapshot()["allocations"]}
    assert "my site" in sites and any(s.startswith("test_binding.py:") for s in sites)
    gpu.free(a)
    assert a.freed and gpu.ledger_stats()["live_count"] == base + 1
    with pytest.raises(gpuplug.Error) as e:
        gpu.free(a)
    assert "freed already" in e.value.message
    with pytest.raises(gpuplug.Error):
        a.ptr
    del b
    gc.collect()
    assert gpu.ledger_stats()["live_count"] == base  # the last reference freed it


def test_buffer_of_another_backend_is_refused(registry, gpu):
    other = registry.create("host!")
    buf = other.alloc(8)
    with pytest.raises(gpuplug.Error) as e:
        gpu.copy_h2d(buf, bytes(8))
    assert "memory of" in e.value.message
    with pytest.raises(gpuplug.Error):
        gpu.free(buf)


def test_streams_and_events(gpu):
    buf = gpu.alloc(1 << 16)
    with gpu.create_stream() as s:
        gpu.memset(buf, 9, stream=s)
        ev = gpu.create_event()
        gpu.record(ev, s)
        ev.synchronize()
        assert ev.query()
        end = gpu.create_event()
        gpu.record(end, s)
        end.synchronize()
        assert gpu.elapsed_ms(ev, end) >= 0
        s.synchronize()
    assert s.destroyed
    with pytest.raises(gpuplug.Error):
        gpu.memset(buf, 0, stream=s)
    out = bytearray(4)
    gpu.copy_d2h(out, buf)
    assert out == b"\x09" * 4
    assert gpu.native()["vendor"] == "host"


def axpy_inputs(gpu, n):
    x = numpy.arange(n, dtype=numpy.float32)
    y = numpy.full(n, 1.0, dtype=numpy.float32)
    bx, by = gpu.alloc(x.nbytes), gpu.alloc(y.nbytes)
    gpu.copy_h2d(bx, x)
    gpu.copy_h2d(by, y)
    return x, y, bx, by


def test_axpy_launch_with_ints_floats_and_buffers(gpu):
    n = 1000
    x, y, bx, by = axpy_inputs(gpu, n)
    k = gpu.kernel("axpy", "axpy")
    assert k.signature == [4, 4, 8, 8] and k.name == "axpy::axpy"
    gpu.launch(k, (n + 255) // 256, 256, [n, 2.5, bx, by])
    gpu.synchronize()
    out = numpy.empty(n, dtype=numpy.float32)
    gpu.copy_d2h(out, by)
    assert (out == 2.5 * x + y).all()
    gpu.launch(k, ((n + 255) // 256,), (256, 1, 1), [numpy.uint32(n), numpy.float32(-1.0), bx, by])
    gpu.synchronize()
    gpu.copy_d2h(out, by)
    assert (out == 1.5 * x + y).all()


def test_launch_refuses_wrong_arguments(gpu):
    _, _, bx, by = axpy_inputs(gpu, 8)
    k = gpu.kernel("axpy", "axpy")
    with pytest.raises(gpuplug.Error) as e:
        gpu.launch(k, 1, 256, [8, 2.0, bx])
    assert (e.value.status, e.value.operation) == ("invalid_argument", "launch")
    assert "takes 4 arguments" in e.value.message
    with pytest.raises(gpuplug.Error) as e:
        gpu.launch(k, 1, 256, [bx, 2.0, bx, by])  # a pointer where the kernel takes 4 bytes
    assert "argument 0 takes 4 bytes" in e.value.message
    with pytest.raises(gpuplug.Error) as e:
        gpu.launch(k, 1, 256, [1 << 32, 2.0, bx, by])
    assert "does not fit in 4 bytes" in e.value.message
    with pytest.raises(gpuplug.Error) as e:
        gpu.launch(k, 1, 256, [8, "2", bx, by])
    assert "str" in e.value.message
    with pytest.raises(gpuplug.Error) as e:
        gpu.launch(k, 0, 256, [8, 2.0, bx, by])
    assert "grid" in e.value.message
    with pytest.raises(gpuplug.Error) as e:
        gpu.kernel("axpy", "no_such_kernel")
    assert e.value.status == "not_found"


def test_type_stubs_match_the_module():
    import ast
    import pathlib

    package = pathlib.Path(gpuplug.__file__).parent
    assert (package / "py.typed").exists()
    tree = ast.parse((package / "_gpuplug.pyi").read_text())
    stubbed = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            stubbed[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)} | {
                n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
        elif isinstance(node, ast.FunctionDef):
            stubbed[node.name] = None
        elif isinstance(node, ast.AnnAssign):
            stubbed[node.target.id] = None
    runtime = {n for n in dir(gpuplug._gpuplug) if not n.startswith("__") or n == "__version__"}
    assert runtime - set(stubbed) == set(), "in the module, not in _gpuplug.pyi"
    assert {n for n in stubbed if not n.startswith("_")} - runtime == set(), "in _gpuplug.pyi, not in the module"
    for name, members in stubbed.items():
        if members is None:
            continue
        cls = getattr(gpuplug._gpuplug, name)
        inherited = set(dir(RuntimeError)) if issubclass(cls, BaseException) else set()
        public = {m for m in dir(cls) if not m.startswith("_") and m not in inherited} | (
            {"__dlpack__", "__dlpack_device__"} & set(dir(cls)))
        assert members >= public, f"{name}: {sorted(public - members)} not in _gpuplug.pyi"
        assert members - set(dir(cls)) == set(), f"{name}: {sorted(members - set(dir(cls)))} only in _gpuplug.pyi"


def test_modules_from_bytes_and_files(gpu):
    import pathlib

    lib = pathlib.Path(gpuplug.__file__).resolve().parents[2] / "lib" / "gpuplug" / "kernels" / "host" / "axpy.so"
    if not lib.exists():
        pytest.skip(f"{lib} is not built")
    gpu.load_module_file("from_file", str(lib))
    gpu.load_module("from_bytes", lib.read_bytes())
    assert gpu.has_module("from_file") and gpu.has_module("from_bytes")
    assert gpu.kernel("from_bytes", "axpy").signature == [4, 4, 8, 8]
    with pytest.raises(gpuplug.Error) as e:
        gpu.load_module("from_bytes", lib.read_bytes())  # the name is taken
    assert e.value.status == "invalid_argument"
    with pytest.raises(gpuplug.Error) as e:
        gpu.load_module("garbage", b"not an image")
    assert e.value.status == "invalid_image" and "garbage" in e.value.message
    gpu.unload_module("from_file")
    assert not gpu.has_module("from_file")
