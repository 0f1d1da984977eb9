"""Positions compared in 32 bits (numbamr/lowering/narrow.py): a comparison of an index
with a known range against a threshold keeps NumPy's int64 outcome for every threshold,
those far outside the row and those equal to a position modulo 2**32 included; and the
kernel's 64-bit compares do not grow with the elements a thread holds."""
import operator

import numpy as np
import pytest

import numbamr as nm
from helpers import check
from test_constant import _cross_entropy

COMPARE = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
           "eq": operator.eq, "ne": operator.ne}
COLS = 300


def _thresholds(dtype):
    """One per row: inside the row, at and past its ends, and (for wide dtypes) values
    whose low 32 bits are a position of the row."""
    info = np.iinfo(dtype)
    t = [0, 1, 7, COLS - 1, COLS, COLS + 1, int(info.max), int(info.min), -1, -7]
    if info.bits == 64:
        t += [2 ** 32 + 7, 2 ** 32, -(2 ** 32) + 7, 2 ** 33 - 1, 2 ** 40 + COLS - 1]
    return np.array([v for v in t if info.min <= v <= info.max], dtype=dtype)


def _masks(op):
    def fn(x, t):
        mask = COMPARE[op](np.arange(x.shape[-1]), t[:, None])
        return mask, np.where(mask, x, 0).sum(axis=-1)
    return fn


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64])
@pytest.mark.parametrize("op", COMPARE)
def test_positions_against_any_threshold_keep_numpys_outcome(op, dtype):
    t = _thresholds(dtype)
    x = np.random.default_rng(1).standard_normal((len(t), COLS)).astype(np.float32)
    check(_masks(op), x, t)


@pytest.mark.parametrize("op", COMPARE)
def test_positions_against_thresholds_from_the_row_index(op):
    """Both sides known (a mask NumPy builds from np.arange, computed by the kernel)."""
    def fn(x):
        rows, cols = x.shape
        mask = COMPARE[op](np.arange(cols), np.arange(rows)[:, None] + 2)
        return np.where(mask, x, 0).sum(axis=-1)
    x = np.random.default_rng(2).standard_normal((40, 100)).astype(np.float32)
    assert nm.jit(fn).lower(x).graph_text.count("INPUT") == 1
    check(fn, x)


@pytest.mark.parametrize("op", COMPARE)
def test_positions_shifted_past_int32_stay_64_bits_wide(op):
    """A position plus 2**32 against thresholds with the same low 32 bits as positions."""
    def fn(x, t):
        mask = COMPARE[op](np.arange(x.shape[-1]) + 2 ** 32, t[:, None])
        return np.where(mask, x, 0).sum(axis=-1)
    t = np.array([2 ** 32 + 7, 7, 2 ** 32 - 1, 2 ** 32 + COLS, -(2 ** 32) + 7])
    x = np.random.default_rng(5).standard_normal((len(t), COLS)).astype(np.float32)
    check(fn, x, t)


def test_positions_against_a_per_element_array():
    """The other side varies along the row: compared as it is (no clamp per element)."""
    def fn(x, y):
        return np.where(np.arange(x.shape[-1]) == y, x, 0).sum(axis=-1)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    y = rng.choice(np.array([0, 5, 63, 2 ** 32 + 5, -1]), size=(8, 64))
    check(fn, x, y)


def _causal_softmax(x):
    rows, cols = x.shape
    mask = np.arange(cols) <= np.arange(rows)[:, None]
    top = x.max(axis=-1, keepdims=True, where=mask, initial=-np.inf)
    e = np.exp(x - top) * mask
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.slow
@pytest.mark.ptx
def test_64_bit_compares_do_not_grow_with_the_elements_a_thread_holds():
    """The same 64 threads a row over rows twice as long: each thread compares twice as
    many positions, and the kernel's 64-bit compares stay as many (row-level ones only)."""
    from test_ptx import lower_for_gpu, compile_report
    kernels = []
    for cols in (1024, 2048):
        jit = nm.jit(threads_per_row=64)
        kernels += lower_for_gpu(jit(_cross_entropy), (np.empty((512, cols), np.float32),
                                                       np.empty(512, np.int64))).kernels
        kernels += lower_for_gpu(jit(_causal_softmax),
                                 (np.empty((cols, cols), np.float32),)).kernels
    reports = compile_report(kernels)
    assert all(r["ok"] for r in reports), [r["error"] for r in reports]
    ce_short, causal_short, ce_long, causal_long = (r["compares_64"] for r in reports)
    assert ce_long == ce_short and causal_long == causal_short, reports


def test_only_ranges_inside_int32_are_narrowed():
    """On kernel values: two positions are cast to int32, a position shifted past int32
    is not, and a value of unknown range is clamped to one past the position's ends."""
    from numbamr.ops import Op
    from numbamr.lowering import symbolic as sym
    from numbamr.lowering.evaluate import ValBuilder
    from numbamr.lowering.narrow import narrow_compare, int_bounds
    vb, i64 = ValBuilder(), np.dtype(np.int64)
    q, row = sym.var("q", 100), sym.var("row", 50)
    j, i = (vb.make(Op.INDEX, i64, (), e) for e in (q, row))
    far = vb.make(Op.INDEX, i64, (), q + 2 ** 32)
    label = vb.make(Op.LOAD, i64, (), (1, row))
    assert int_bounds(vb.make(Op.MUL, i64, (i, vb.make(Op.CONST, i64, (), -3))), {}) == \
        (-147, 0)
    assert [s.dtype for s in narrow_compare(vb, (j, i), lambda v: True, {})] == \
        [np.dtype(np.int32)] * 2
    assert narrow_compare(vb, (far, i), lambda v: True, {}) == (far, i)
    a, b = narrow_compare(vb, (j, label), lambda v: True, {})
    assert (a.op, b.op) == (Op.CAST, Op.CAST)
    clamp = b.srcs[0]
    assert clamp.op is Op.MIN and clamp.srcs[1].arg == 100
    assert clamp.srcs[0].op is Op.MAX and clamp.srcs[0].srcs[1].arg == -1
    assert narrow_compare(vb, (j, label), lambda v: False, {}) == (j, label)
