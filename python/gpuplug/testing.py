# SPDX-License-Identifier: Apache-2.0
"""Helpers for tests of code that runs on gpuplug backends."""
import math

__all__ = ["assert_close"]


def _flat(values, name):
    """values as a flat list of floats and its shape: NumPy arrays, PyTorch tensors, DLPack
    producers (a gpuplug ArrayView) and nested sequences of numbers."""
    if hasattr(values, "__dlpack__") and not hasattr(values, "tolist"):
        import numpy  # a DLPack producer without tolist (gpuplug.ArrayView): read through NumPy

        values = numpy.from_dlpack(values)
    if hasattr(values, "detach"):  # a torch tensor
        values = values.detach().cpu()
    if hasattr(values, "tolist"):
        shape = tuple(getattr(values, "shape", ()))
        values = values.tolist()
    else:
        shape = None
    flat = []

    def walk(v, depth, dims):
        if isinstance(v, (list, tuple)):
            if len(dims) <= depth:
                dims.append(len(v))
            for e in v:
                walk(e, depth + 1, dims)
        else:
            try:
                flat.append(complex(v) if isinstance(v, complex) else float(v))
            except (TypeError, ValueError):
                raise TypeError(f"assert_close: {name} holds {type(v).__name__}, not a number") from None

    dims = []
    walk(values, 0, dims)
    return flat, shape if shape is not None else tuple(dims)


def _index(i, shape):
    if not shape:
        return "()"
    idx = []
    for extent in reversed(shape):
        idx.append(i % extent if extent else 0)
        i //= extent if extent else 1
    return "(" + ", ".join(str(x) for x in reversed(idx)) + ")"


def assert_close(actual, expected, rtol=1e-5, atol=1e-8, msg=None):
    """Checks |actual - expected| <= atol + rtol * |expected| element by element (NaN equals
    NaN). On failure the AssertionError names how many elements are off and the worst one: its
    index, both values, its absolute and relative error and the tolerance it broke."""
    a, a_shape = _flat(actual, "actual")
    e, e_shape = _flat(expected, "expected")
    if len(a) != len(e):
        raise AssertionError(f"assert_close: actual has {len(a)} elements (shape {a_shape}), "
                             f"expected {len(e)} (shape {e_shape})")
    bad = 0
    worst = None  # (excess over the tolerance, index)
    for i, (x, y) in enumerate(zip(a, e)):
        if x == y or (x != x and y != y):  # equal, or both NaN
            continue
        diff = abs(x - y)
        limit = atol + rtol * abs(y)
        if not (diff <= limit):
            bad += 1
            excess = math.inf if diff != diff else diff - limit
            if worst is None or excess > worst[0]:
                worst = (excess, i)
    if bad:
        i = worst[1]
        x, y = a[i], e[i]
        diff = abs(x - y)
        rel = diff / abs(y) if y else math.inf
        text = (f"{bad} of {len(a)} elements differ beyond atol={atol} + rtol={rtol} * |expected|; "
                f"worst at index {_index(i, e_shape)}: actual {x!r}, expected {y!r}, "
                f"abs error {diff:.6g}, rel error {rel:.6g} (allowed {atol + rtol * abs(y):.6g})")
        raise AssertionError(f"{msg}: {text}" if msg else text)
