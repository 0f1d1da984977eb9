"""Rows whose length the vector width does not divide (a vocabulary of 50257, a hidden size
of 1031): each row is walked as an aligned body of whole vectors, its start shifted per row
to the anchor access's 16-byte boundary, plus scalar edges (the head before that boundary,
the tail after the body).

Simulator tests check every position is taken exactly once against float64 NumPy at row
lengths that leave every head and tail length, under the layouts that change how the body
is walked (resident, streamed, staged, split, several rows a block); lowering tests check
the layout is chosen and which accesses are vectors; the gpu tests run it at model sizes,
with CuPy views whose rows start anywhere.
"""
import numpy as np
import pytest

import numbamr as nm
from conftest import SIMULATOR
from helpers import check, has_vector_load, run_and_check, to_host
from numbamr.lowering.options import edge_positions
from programs import BY_NAME

EDGE_PROGRAMS = ["sum_and_max", "two_inputs", "centered_sum", "variance", "softmax",
                 "log_softmax", "logsumexp", "layernorm", "layernorm_stats", "rmsnorm",
                 "zscore", "chain3", "dict_outputs"]
# float32 rows of 4-wide vectors: 1025, 1026 and 1027 leave heads and tails of every length
ODD_COLS = [1025, 1026, 1027]
LAYOUTS = [{}, dict(upcast=0, unroll=2), dict(upcast=0, zigzag=1),
           dict(upcast=1, stage=49152), dict(split=3), dict(split=2, upcast=0),
           dict(rows_per_block=2, threads_per_row=64)]


def _ids(v):
    return "-".join(f"{k}{x}" for k, x in v.items()) or "default" if isinstance(v, dict) \
        else str(v)


def _source(fn, inputs):
    return "\n".join(k.source for k in fn.lower(*inputs).kernels)


def _walks_edges(source):
    return "head0 = " in source and "body_end0 = " in source


@pytest.mark.parametrize("name", EDGE_PROGRAMS)
@pytest.mark.parametrize("cols", ODD_COLS)
def test_odd_rows_match_numpy(name, cols):
    """Each program over rows of odd length matches float64 NumPy, walked with edges."""
    p = BY_NAME[name]
    inputs = p.make(np.random.default_rng(cols), 5, cols)
    fn = nm.jit(p.fn)
    run_and_check(p, inputs, rtol=2e-5, jitted=fn)
    assert _walks_edges(_source(fn, inputs)), name


@pytest.mark.slow
@pytest.mark.parametrize("name", ["softmax", "logsumexp", "layernorm_stats", "variance",
                                  "rmsnorm"])
@pytest.mark.parametrize("options", LAYOUTS, ids=_ids)
def test_odd_rows_under_every_walk(name, options):
    """Rows with edges walked by every kind of pass: the body's chunks and the edge chunk
    still take every position once (a split row's first block takes the edges)."""
    p = BY_NAME[name]
    inputs = p.make(np.random.default_rng(3), 5, 1027)
    fn = nm.jit(p.fn, **options)
    run_and_check(p, inputs, rtol=2e-5, jitted=fn)
    assert _walks_edges(_source(fn, inputs)), options


@pytest.mark.parametrize("dtype,cols", [(np.float16, 1031), (np.float16, 1034),
                                        (np.int8, 1039), (np.float64, 1025)])
def test_odd_rows_of_other_dtypes(dtype, cols):
    """Halves, bytes and doubles: every head and tail length of a few rows (the row stride
    moves each row's head), maxima and positions exact, a softmax of them close."""
    rng = np.random.default_rng(cols)
    x = (rng.standard_normal((7, cols)) * 20).astype(dtype)

    def max_argmin_softmax(x):
        y = x.astype(np.float32)
        e = np.exp(y - y.max(axis=1, keepdims=True))
        return x.max(axis=1), x.argmin(axis=1), e / e.sum(axis=1, keepdims=True)
    fn = nm.jit(max_argmin_softmax)
    check(max_argmin_softmax, x, rtol=1e-5, jitted=fn)
    (kernel,) = fn.lower(x).kernels
    plan = kernel.layout.groups[0]
    assert plan.edges and cols % plan.vector and plan.vector > 1
    assert _walks_edges(kernel.source) and has_vector_load(kernel.source, "x")
    assert f"& {plan.vector - 1}" in kernel.source


def test_a_misaligned_view_is_read_element_by_element():
    """An input whose first row does not start on a 16-byte boundary is not the anchor's
    vectors (they would be misaligned): its loads are scalar, its result still right."""
    rng = np.random.default_rng(5)
    flat = rng.standard_normal(5 * 1027 + 1).astype(np.float32)
    view = flat[1:].reshape(5, 1027)
    p = BY_NAME["softmax"]
    fn = nm.jit(p.fn)
    run_and_check(p, (view,), jitted=fn)
    if SIMULATOR:       # (on a GPU the NumPy input is copied to an aligned device array)
        assert not has_vector_load(_source(fn, (view,)), "x")


def test_accesses_of_another_alignment_stay_scalar():
    """Where two inputs' rows are of different lengths, only the anchor's row (the first
    access that moves with the row) is read in vectors; the other input's chunks are
    scalar loads at the same positions, and a weight indexed by column alone too."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 1025)).astype(np.float32)
    y = rng.standard_normal((4, 1028)).astype(np.float32)[:, :1025]   # rows of 1028 apart
    w = rng.standard_normal(1025).astype(np.float32)

    def f(x, y, w):
        return (x * w).sum(axis=1) + y.max(axis=1)
    fn = nm.jit(f)
    check(f, x, y, w, jitted=fn)
    source = _source(fn, (x, y, w))
    assert _walks_edges(source) and has_vector_load(source, "x")
    assert not has_vector_load(source, "y") and not has_vector_load(source, "w")


def test_rows_too_short_or_threads_too_few_keep_whole_vectors():
    """Rows shorter than 1024 keep the width that divides them (no edges); so do rows whose
    threads are fewer than the edge positions (one a thread)."""
    x = np.random.default_rng(7).standard_normal((3, 999)).astype(np.float32)
    p = BY_NAME["softmax"]
    assert not _walks_edges(_source(nm.jit(p.fn), (x,)))
    x = np.random.default_rng(8).standard_normal((3, 1031)).astype(np.float16)
    assert edge_positions(1031, 8) > 4
    fn = nm.jit(p.fn, threads_per_row=4)
    run_and_check(p, (x,), rtol=2e-3, jitted=fn)
    assert not _walks_edges(_source(fn, (x,)))


# ---- at model sizes, on a GPU ------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["softmax", "logsumexp", "layernorm_stats"])
@pytest.mark.parametrize("cols", [50257, 4097, 32001])
@pytest.mark.parametrize("offset", [0, 1, 5])
def test_model_rows_with_edges_on_gpu(name, cols, offset):
    """Vocabulary-length rows of float16 in CuPy views that start ``offset`` elements past a
    16-byte boundary (then no vectors), checked against float64 NumPy."""
    import cupy as cp
    p = BY_NAME[name]
    rng = np.random.default_rng(cols + offset)
    host = [a.astype(np.float16) if a.ndim == 2 else a for a in p.make(rng, 37, cols)]
    flat = cp.zeros(host[0].size + offset, cp.float16)
    flat[offset:] = cp.asarray(host[0].ravel())
    inputs = (flat[offset:].reshape(host[0].shape),) + tuple(cp.asarray(a) for a in host[1:])
    got = nm.jit(p.fn)(*inputs)
    ref = p.fn(*[a.astype(np.float64) for a in host])
    got = got if isinstance(got, tuple) else (got,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    for g, r in zip(got, ref):
        g = to_host(g).astype(np.float64)
        err = np.max(np.abs(g - r)) / max(1.0, np.max(np.abs(r)))
        assert err < 4e-3, (name, cols, offset, err)
