"""Bool arrays move in vectors: a mask argument is read 4 (or more) bytes a load and a bool
output written the same way, each byte's truth being "not zero". Shapes sweep warp and
block boundaries and rows whose last chunk is partly outside the row."""
import numpy as np
import pytest

import numbamr as nm
from helpers import check
from test_ptx import compile_report, lower_for_gpu

SHAPES = [(3, 4), (5, 36), (4, 1000), (2, 4100), (7, 256), (33, 64), (2, 65536)]


def masked_softmax(x, m):
    e = np.exp(x - x.max(axis=-1, keepdims=True, where=m, initial=-np.inf)) * m
    return e / e.sum(axis=-1, keepdims=True)


def above_mean(x):
    return x > x.mean(axis=-1, keepdims=True), x.sum(axis=-1)


def kept_sum(x, keep):
    return np.where(keep, x, 0).sum(axis=-1), (x * keep).max(axis=-1)


def _mask(rng, rows, cols):
    m = rng.random((rows, cols)) < 0.7
    m[0] = True                       # every element kept
    m[-1, : cols // 2] = False        # the first half dropped
    return m


def _bool_vector_accesses(fn, *inputs):
    """(op, width) of the vector loads and stores of bool buffers in fn's kernels."""
    found = []
    for k in lower_for_gpu(fn, inputs).kernels:
        bufs = {name for name, _, dt, _ in k.program.params if np.dtype(dt).kind == "b"}
        found += [(ins.op, len(ins.out) if ins.op == "VLOAD" else ins.arg[1])
                  for ins in k.program.instrs
                  if ins.op in ("VLOAD", "VSTORE") and ins.srcs[0] in bufs]
    return found


@pytest.mark.parametrize("rows, cols", SHAPES)
def test_a_mask_argument_is_read_in_vectors(rows, cols):
    rng = np.random.default_rng(rows * 7 + cols)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    m = _mask(rng, rows, cols)
    check(masked_softmax, x, m)
    if cols % 4 == 0:
        loads = _bool_vector_accesses(masked_softmax, x, m)
        assert loads and all(op == "VLOAD" and n >= 4 for op, n in loads), loads


@pytest.mark.parametrize("rows, cols", SHAPES)
def test_a_bool_output_is_written_in_vectors(rows, cols):
    x = np.random.default_rng(cols).standard_normal((rows, cols)).astype(np.float32)
    check(above_mean, x)
    if cols % 4 == 0:
        stores = _bool_vector_accesses(above_mean, x)
        assert stores and all(op == "VSTORE" and n >= 4 for op, n in stores), stores


@pytest.mark.parametrize("rows, cols", [(5, 36), (3, 4100), (64, 256)])
def test_a_mask_broadcast_along_the_rows_is_read_in_vectors(rows, cols):
    rng = np.random.default_rng(cols)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    keep = rng.random(cols) < 0.5
    keep[:3] = True
    check(kept_sum, x, keep)
    assert any(op == "VLOAD" for op, _ in _bool_vector_accesses(kept_sum, x, keep))


def test_nonzero_bytes_other_than_1_are_true():
    """A bool buffer whose bytes are 0 and 2..255 (a view of uint8 data): NumPy counts every
    nonzero byte as True, and so does the vector load."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 256)).astype(np.float32)
    raw = rng.integers(0, 256, (4, 256)).astype(np.uint8)
    m = raw.view(np.bool_)
    got = nm.jit(kept_sum)(x, m)
    want = kept_sum(x.astype(np.float64), raw != 0)
    np.testing.assert_allclose(np.asarray(got[0]), want[0], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got[1]), want[1], rtol=1e-6)


@pytest.mark.slow
@pytest.mark.ptx
def test_bool_masks_and_outputs_move_as_words_not_bytes():
    """A mask argument (a causal softmax's) is read 4 bytes a load and a bool output written
    4 bytes a store: no byte-wide global access is left (before, each element was one)."""
    x = np.empty((64, 4096), np.float32)
    m = np.ones((64, 4096), bool)
    kernels = lower_for_gpu(masked_softmax, (x, m)).kernels + \
        lower_for_gpu(above_mean, (x,)).kernels
    for k, r in zip(kernels, compile_report(kernels)):
        assert r["ok"], r["error"]
        assert r["byte_loads"] == 0 and r["byte_stores"] == 0, (k.name, r)
        assert r["spill_bytes"] == 0, (k.name, r["spill_bytes"])
