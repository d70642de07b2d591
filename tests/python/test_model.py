# SPDX-License-Identifier: Apache-2.0
# A model's resources from Python: OpCache (the backend's own, standalone and model caches, scratch
# Buffers the cache owns), Teardown with OpCaches and Python resources, MemoryScope.
import gc
import threading

import numpy
import pytest

import gpuplug


def live(gpu):
    return gpu.ledger_stats()["live_bytes"]


def test_kernel_memo_reads_the_published_records(gpu):
    cache = gpu.op_cache()
    assert cache is gpu.op_cache()  # one object while it is referenced
    k = cache.kernel(gpu, "gemm", "gemm_a_e4m3")
    assert k.name == "gemm::gemm_a_e4m3"
    assert cache.n_tile(k) == 128 and cache.a_e4m3(k)
    f32 = cache.kernel(gpu, "gemm", "gemm_f32")
    assert cache.n_tile(f32) == 128 and not cache.a_e4m3(f32)
    cache.kernel(gpu, "gemm", "gemm_f32")  # a hit
    assert cache.kernel_count == 2
    cache.record_n_tile(f32, 32)
    assert cache.n_tile(f32) == 32
    with pytest.raises(gpuplug.Error) as e:
        cache.kernel(gpu, "gemm", "no_such_kernel")
    assert e.value.status == "not_found" and "no_such_kernel" in str(e.value)
    assert repr(cache) == "<gpuplug.OpCache { kernels: 2, scratch: 0 }>"


def test_gates_and_latch():
    cache = gpuplug.OpCache()
    assert [cache.first_n("warn", 2) for _ in range(4)] == [True, True, False, False]
    assert cache.once("x") and not cache.once("x")
    assert cache.first_shape("gemm", 1, 2, 3) and not cache.first_shape("gemm", 1, 2, 3)
    assert cache.first_shape("gemm", 1, 2, 4)
    assert not cache.alloc_fell_back
    cache.note_alloc_fallback()
    assert cache.alloc_fell_back


def test_scratch_is_owned_by_the_cache_and_freed_by_its_release(gpu):
    cache = gpu.op_cache()
    before = live(gpu)
    a = cache.scratch(gpu, "tmp", 256)
    assert isinstance(a, gpuplug.Buffer) and a.nbytes == 256
    assert cache.scratch(gpu, "tmp", 100) is a  # a hit: the same Buffer
    gpu.copy_h2d(a, bytes(range(256)))
    with pytest.raises(gpuplug.Error) as e:
        gpu.free(a)
    assert e.value.status == "invalid_argument" and "op scratch" in str(e.value) and "release()" in str(e.value)
    b = cache.scratch(gpu, "tmp", 1024)  # grows: a retired, still valid until release
    assert b.ptr != a.ptr and b.nbytes == 1024
    out = bytearray(256)
    gpu.copy_d2h(out, a)
    assert bytes(out) == bytes(range(256))
    rows = cache.scratch_memory()
    assert rows == [{"cache": "op scratch", "tag": "tmp", "live_bytes": 1024, "retired_bytes": 256,
                     "retired_count": 1}]
    assert live(gpu) == before + 1280
    cache.release(gpu)
    assert live(gpu) == before and cache.scratch_count == 0
    assert a.freed and b.freed
    with pytest.raises(gpuplug.Error) as e:
        gpu.copy_h2d(b, bytes(4))
    assert "freed" in str(e.value)
    cache.release(gpu)  # idempotent


def test_release_is_refused_while_a_scratch_buffer_is_exported(gpu):
    cache = gpu.op_cache()
    s = cache.scratch(gpu, "x", 64)
    arr = numpy.from_dlpack(gpuplug.as_array(s, "uint8", (64,)))
    with pytest.raises(gpuplug.Error) as e:
        cache.release(gpu)
    assert e.value.status == "invalid_argument" and "DLPack" in str(e.value)
    assert not s.freed and cache.scratch_count == 1  # nothing changed
    del arr
    gc.collect()
    cache.release(gpu)
    assert s.freed


def test_model_caches_share_the_memo_and_free_their_own_scratch(gpu):
    before = live(gpu)
    a = gpuplug.OpCache(gpu, "model A")
    b = gpuplug.OpCache(gpu, "model B")
    assert a.is_model_cache and a.label == "op scratch (model A)"
    assert gpu.op_cache().model_cache_count == 2
    ka = a.kernel(gpu, "axpy", "axpy")
    b.kernel(gpu, "axpy", "axpy")
    assert gpu.op_cache().kernel_count == a.kernel_count == 1
    sa = a.scratch(gpu, "kv", 512)
    b.scratch(gpu, "kv", 128)
    tags = {(r["cache"], r["live_bytes"]) for r in gpu.op_cache().all_scratch_memory()}
    assert tags == {("op scratch (model A)", 512), ("op scratch (model B)", 128)}
    with pytest.raises(gpuplug.Error) as e:
        gpu.op_cache().release(gpu)
    assert "model cache" in str(e.value)
    a.release(gpu)
    assert sa.freed and live(gpu) == before + 128
    with pytest.raises(gpuplug.Error) as e:
        a.scratch(gpu, "kv", 8)
    assert "model A" in str(e.value)
    a.rearm()
    a.scratch(gpu, "kv", 8)
    del b
    gc.collect()  # the last reference releases a model cache's scratch
    assert live(gpu) == before + 8
    assert ka.name == "axpy::axpy"


def test_a_cache_serves_one_backend(registry, gpu):
    with registry.create("host!") as other:
        cache = gpuplug.OpCache()
        cache.scratch(gpu, "t", 16)
        with pytest.raises(gpuplug.Error) as e:
            cache.scratch(other, "t", 16)
        assert e.value.status == "invalid_argument"
        with pytest.raises(gpuplug.Error) as e:
            cache.release(other)
        assert e.value.status == "invalid_argument" and cache.scratch_count == 1
        cache.release(gpu)
        cache.scratch(other, "t", 16)  # released: unbound, it serves the next backend
        cache.release(other)
    with pytest.raises(gpuplug.Error) as e:
        gpuplug.OpCache(name="model")
    assert "backend" in str(e.value)


def test_alloc_with_fallback_returns_the_callers_buffer(gpu):
    cache = gpuplug.OpCache()
    buf = cache.alloc_with_fallback(gpu, 4096, site="weights (model A)")
    snap = gpu.memory_snapshot()
    assert any(s["site"] == "weights (model A)" for s in snap["sites"])
    gpu.free(buf)
    assert buf.freed


class Weights:
    def __init__(self, gpu, nbytes, fail=None):
        self.buf = gpu.alloc(nbytes, site="weights")
        self.fail = fail
        self.released = 0

    label = "weights"

    def release(self, gpu):
        self.released += 1
        if self.fail:
            raise self.fail
        if not self.buf.freed:
            gpu.free(self.buf)


def test_teardown_releases_in_reverse_order_past_failures(gpu):
    order = []

    class Recorder:
        def __init__(self, name, fail=None):
            self.label, self.fail = name, fail

        def release(self, g):
            assert g is gpu
            order.append(self.label)
            if self.fail:
                raise self.fail

    td = gpuplug.Teardown()
    cache = td.add(gpuplug.OpCache(gpu, "model A"))
    cache.scratch(gpu, "kv", 64)
    td.add(Recorder("tokenizer", ValueError("tokenizer state is gone")))
    w = td.add(Weights(gpu, 128))
    td.add(Recorder("kv cache", gpuplug.Error("kv")))
    assert len(td) == 4
    with pytest.raises(gpuplug.TeardownError) as e:
        td.release_all(gpu)
    assert isinstance(e.value, gpuplug.Error) and e.value.operation == "release_all"
    assert order == ["kv cache", "tokenizer"]
    failures = e.value.failures
    assert [f["label"] for f in failures] == ["kv cache", "tokenizer"]
    assert failures[1]["status"] == "internal" and "tokenizer state is gone" in failures[1]["message"]
    assert "2 of 4" in str(e.value)
    assert w.released == 1 and w.buf.freed and cache.scratch_count == 0  # the others went


def test_teardown_keeps_a_gpuplug_errors_status(gpu):
    def fail(g):
        raise gpuplug._error("device_error", "free", "device lost", g.name)

    res = type("KvCache", (), {"release": staticmethod(fail)})()
    td = gpuplug.Teardown()
    td.add(res)
    with pytest.raises(gpuplug.TeardownError) as e:
        td.release_all(gpu)
    assert e.value.status == "device_error"
    assert e.value.failures == [{"label": "KvCache", "status": "device_error", "operation": "free",
                                 "message": "device lost"}]
    with pytest.raises(gpuplug.Error) as e:
        td.add(object())
    assert "release(gpu)" in str(e.value)


def test_memory_scope_context_manager(gpu):
    with gpu.memory_scope("layer 1") as scope:
        assert scope.open
        with pytest.raises(gpuplug.Error) as e:
            scope.peak_bytes
        assert "still open" in str(e.value)
        a = gpu.alloc(1000)
        b = gpu.alloc(3000)
        gpu.free(b)
    assert not scope.open and scope.name == "layer 1"
    assert scope.peak_bytes == 4000 and scope.net_bytes == 1000
    assert scope.end() is scope and scope.peak_bytes == 4000  # ended once
    s = gpuplug.MemoryScope(gpu, "free")
    gpu.free(a)
    assert s.end().net_bytes == -1000
    assert "peak_bytes=0" in repr(s)


def test_memory_scope_ends_when_its_block_raises(gpu):
    with pytest.raises(KeyError):
        with gpu.memory_scope("failing") as scope:
            buf = gpu.alloc(64)
            raise KeyError("x")
    assert scope.net_bytes == 64
    gpu.free(buf)


def test_scratch_release_waits_for_copies_in_flight(gpu):
    cache = gpuplug.OpCache()
    bufs = [cache.scratch(gpu, f"t{i}", 1 << 20) for i in range(4)]
    data = bytes(1 << 20)
    errors = []

    def copier(buf):
        for _ in range(50):
            try:
                gpu.copy_h2d(buf, data)
            except gpuplug.Error as e:
                if "freed" not in str(e):
                    errors.append(e)
                return

    threads = [threading.Thread(target=copier, args=(b,)) for b in bufs]
    for t in threads:
        t.start()
    cache.release(gpu)
    for t in threads:
        t.join()
    assert not errors and all(b.freed for b in bufs)
