"""Column layouts: adjacent columns a thread (``columns=2`` or 4: a column layout's rows
packed, the narrow loads of a thread's columns one word, docs/heuristics.md#column-pairs),
and the shared arrays of many column reductions kept within what a kernel may declare. The
simulator checks the values against float64 NumPy across block boundaries; the PTX tier
checks the loads, registers and shared memory."""
import itertools
import random

import numpy as np
import pytest

import numbamr as nm
from numbamr.errors import ArgumentError
from numbamr.lowering import symbolic as sym
from helpers import check
from test_ptx import compile_report, lower_for_gpu
from test_ptx_models import _arrays, _on, models


def colvar(x):
    return x.astype(np.float32).var(axis=0)


def sum_and_max(x):
    return x.astype(np.float32).sum(axis=0), x.max(axis=0)


def argmax(x):
    return x.argmax(axis=0)


def colsoftmax(x):          # writes every element: the packed rows store each column's
    y = x.astype(np.float32)
    e = np.exp(y - y.max(axis=0))
    return e / e.sum(axis=0)


def count(x):
    return x.sum(axis=0)


def _packed_columns(fn, x, w):
    """The columns each row of the kernel that reads ``x`` holds."""
    (k,) = nm.jit(columns=w)(fn).lower(x).kernels
    return k.kernel.columns


@pytest.mark.parametrize("w", [2, 4])
@pytest.mark.parametrize("rows", [2, 31, 33, 257])
@pytest.mark.parametrize("fn", [colvar, sum_and_max, argmax, colsoftmax],
                         ids=lambda f: f.__name__)
def test_packed_columns_match_numpy(fn, rows, w):
    """Half-precision columns, ``w`` a thread: each column's values as float64 NumPy's,
    over row counts on both sides of a warp and a block."""
    x = np.random.default_rng(rows).standard_normal((rows, 96)).astype(np.float16)
    assert _packed_columns(fn, x, w) == w
    check(fn, x, rtol=2e-3, jitted=nm.jit(columns=w)(fn))


@pytest.mark.parametrize("options", [dict(columns=2, split=4), dict(columns=4, split=3)],
                         ids=str)
def test_packed_columns_split_across_blocks_match_numpy(options):
    """Packed columns whose rows are split across blocks (one kernel, the partials
    exchanged): variance and argmax of every column as float64 NumPy's."""
    x = np.random.default_rng(4).standard_normal((300, 64)).astype(np.float16)
    fn = lambda x: (colvar(x), argmax(x))        # noqa: E731
    jf = nm.jit(**options)(fn)
    (k,) = jf.lower(x).kernels
    assert (k.kernel.columns, k.layout.split) == (options["columns"], options["split"])
    check(fn, x, rtol=2e-3, jitted=jf)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8])
def test_one_byte_columns_pack_four(dtype):
    """Counts of one-byte columns, 4 a thread (one 32-bit word): exact."""
    x = (np.random.default_rng(1).random((129, 64)) * 3).astype(dtype)
    assert _packed_columns(count, x, 4) == 4
    check(count, x, jitted=nm.jit(columns=4)(count))


def test_batch_norm_statistics_of_3d_bfloat16_pack_pairs():
    """Batch-norm statistics over the two leading axes of a bfloat16 array: the segment
    kernel packs pairs of channels; mean and variance as float64 NumPy's."""
    pytest.importorskip("ml_dtypes")
    fn = models.np_ops()["bnstats"]
    (x,) = _arrays("bnstats", (4, 50, 64), "bfloat16")
    x[...] = np.random.default_rng(2).standard_normal(x.shape).astype(x.dtype)
    jf = nm.jit(columns=2)(fn)
    assert 2 in [k.kernel.columns for k in jf.lower(x).kernels]
    check(fn, x, rtol=1e-4, jitted=jf)


@pytest.mark.parametrize("view", ["odd_count", "odd_start", "float32"])
def test_columns_that_do_not_pair_keep_one_a_thread(view):
    """A column count 4 does not divide, a view whose first column is not on a word, and
    four-byte columns (already words): one column a thread, values still NumPy's."""
    base = np.random.default_rng(3).standard_normal((70, 66)).astype(np.float16)
    x = {"odd_count": base[:, :62], "odd_start": base[:, 1:65],
         "float32": base.astype(np.float32)}[view]
    w = 4 if view == "odd_count" else 2
    assert _packed_columns(colvar, x, w) == 1
    check(colvar, x, rtol=2e-3, jitted=nm.jit(columns=w)(colvar))


def colstats(x):             # one-pass variance, logsumexp, argmax and a sum of a column
    y = x.astype(np.float32)
    m = y.max(axis=0)
    return y.var(axis=0), m + np.log(np.exp(y - m).sum(axis=0)), x.argmax(axis=0), \
        np.abs(y - y.mean(axis=0)).sum(axis=0)


@pytest.mark.parametrize("t", [64, 128])
@pytest.mark.parametrize("rows", [63, 200, 700, 3000])
def test_many_threads_down_a_column_combine_in_halving_steps(t, rows):
    """More threads down each column than are combined in order (forced here; packed
    columns get them too): the partials are halved in log2(t) steps, one barrier each, and
    every column's statistics (a later reduce reading an earlier one's result among them)
    are float64 NumPy's, at row counts below, across and past the threads' first pass; at
    3000 rows the columns stream, and the variance and logsumexp halve one-pass partials
    (Chan's merge, the online max and sum)."""
    x = np.random.default_rng(rows).standard_normal((rows, 5)).astype(np.float16)
    x[rows // 3, 2] = x[rows // 2, 2] = 9.0          # a tie: argmax takes the first
    jf = nm.jit(layout="col", threads_per_row=t, rows_per_block=2)(colstats)
    (k,) = jf.lower(x).kernels
    steps = t.bit_length() - 1
    levels = k.source.count("if lane < 1:")     # the last step of each depth's combine
    assert levels >= 1 and k.source.count("partials of reduce") == levels * (1 + steps)
    assert "for part in range" not in k.source
    if rows == 3000:
        assert "_nn = " in k.source and "_mn = " in k.source, k.source
    check(colstats, x, rtol=2e-3, jitted=jf)


def rowstats(x):             # colstats along the rows
    y = x.astype(np.float32)
    m = y.max(axis=1)
    return y.var(axis=1), m + np.log(np.exp(y - m[:, None]).sum(axis=1)), \
        x.argmax(axis=1), np.abs(y - y.mean(axis=1, keepdims=True)).sum(axis=1)


EXIT = "return  # the rest needs only these threads"


_COL_TAILS = [dict(layout="col", threads_per_row=8, rows_per_block=4),
              dict(layout="col", threads_per_row=32, rows_per_block=2),
              dict(layout="col", threads_per_row=64, rows_per_block=2),         # halved
              dict(columns=2, layout="col", threads_per_row=16, rows_per_block=4)]


@pytest.mark.parametrize("fn,options,shape", [
    *[(colstats, o, shape) for o in _COL_TAILS for shape in [(63, 6), (700, 34)]],
    (rowstats, dict(threads_per_row=64), (3, 700)),
    (rowstats, dict(threads_per_row=128), (5, 1001)),
], ids=lambda v: str(v) if isinstance(v, tuple) else None)
def test_results_only_stored_are_read_back_by_each_rows_first_thread(fn, options, shape):
    """Where the last reduces' results are only stored once a row, the threads other than
    each row's first leave after the last barrier (none follows), and the first reads the
    partials back alone: the statistics are float64 NumPy's, in column and row layouts,
    combined in order or halved, at sizes across warps and blocks. The earlier depth (the
    mean that the absolute deviations read) is read back by every thread."""
    x = np.random.default_rng(shape[0]).standard_normal(shape).astype(np.float16)
    jf = nm.jit(**options)(fn)
    (k,) = jf.lower(x).kernels
    assert k.source.count(EXIT) == 1, k.source
    tail = k.source[k.source.index(EXIT):]
    assert "syncthreads" not in tail and "shfl" not in tail
    assert "partials of reduce" in k.source[:k.source.index(EXIT)]
    check(fn, x, rtol=2e-3, jitted=jf)


def test_results_used_along_the_row_are_read_back_by_every_thread():
    """A column softmax writes every element with its column's max and sum: no thread
    leaves early."""
    x = np.random.default_rng(0).standard_normal((300, 40)).astype(np.float32)
    jf = nm.jit(layout="col", threads_per_row=16, rows_per_block=8)(colsoftmax)
    (k,) = jf.lower(x).kernels
    assert EXIT not in k.source
    check(colsoftmax, x, jitted=jf)


def test_option_columns_is_checked():
    with pytest.raises(ArgumentError, match="option columns must be 1, 2 or 4, got 3"):
        nm.jit(columns=3)
    assert nm.KernelOptions(columns=2).columns == 2


def test_packed_layout_keeps_the_blocks_and_threads(monkeypatch):
    """At GPU sizes the packed kernel keeps the grid and block of the unpacked one, with
    twice the threads down each column and half the chunks a loop iteration."""
    _on(monkeypatch, (9, 0))
    fn = models.np_ops()["bnstats"]
    args = _arrays("bnstats", (262144, 128), "bfloat16")
    plain = lower_for_gpu(fn, args).kernels[0]
    packed = lower_for_gpu(nm.jit(columns=2)(fn), args).kernels[0]
    assert packed.kernel.columns == 2 and plain.kernel.columns == 1
    assert (packed.grid, packed.block) == (plain.grid, plain.block)
    assert packed.layout.threads_per_row == 2 * plain.layout.threads_per_row
    assert 2 * packed.layout.groups[0].chunks == plain.layout.groups[0].chunks


def test_columns_are_one_a_thread_unless_forced(monkeypatch):
    """A column layout takes one column a thread by default (pairs of two-byte columns
    were slower at most shapes measured); columns=2 packs two-byte ones, never float32."""
    _on(monkeypatch, (9, 0))
    fn = models.np_ops()["bnstats"]
    for shape in [(262144, 128), (32, 2048, 256), (16384, 1024)]:
        for dtype in ["bfloat16", "float16"]:
            args = _arrays("bnstats", shape, dtype)
            assert lower_for_gpu(fn, args).kernels[0].kernel.columns == 1
            assert lower_for_gpu(nm.jit(columns=2)(fn), args).kernels[0].kernel.columns == 2
        wide = _arrays("bnstats", shape, "float32")
        assert lower_for_gpu(nm.jit(columns=2)(fn), wide).kernels[0].kernel.columns == 1


def test_autotuner_tries_the_other_column_count(monkeypatch):
    """The autotuner's candidates for a column layout of two-byte loads hold columns=2;
    where the options force the count, and for float32 columns, none."""
    from numbamr import tune
    _on(monkeypatch, (9, 0))
    fn = models.np_ops()["bnstats"]
    narrow = lower_for_gpu(fn, _arrays("bnstats", (262144, 128), "bfloat16"))
    wide = lower_for_gpu(fn, _arrays("bnstats", (262144, 128), "float32"))
    assert {"columns": 2} in tune.candidates(narrow, nm.KernelOptions())
    two = nm.KernelOptions(columns=2)
    packed = lower_for_gpu(nm.jit(columns=2)(fn), _arrays("bnstats", (262144, 128), "bfloat16"))
    assert not any("columns" in c for c in tune.candidates(packed, two))
    assert not any("columns" in c for c in tune.candidates(wide, nm.KernelOptions()))


@pytest.mark.ptx
@pytest.mark.xdist_group("ptx")
@pytest.mark.parametrize("shape,dtype", [((262144, 128), "bfloat16"),
                                         ((32, 2048, 256), "float16")], ids=str)
def test_packed_columns_load_words_without_spills(monkeypatch, shape, dtype):
    """The packed segment kernel of batch-norm statistics reads its input as 32-bit words
    (no two-byte load) and compiles for sm_90 without spills or local memory."""
    _on(monkeypatch, (9, 0))
    fn = models.np_ops()["bnstats"]
    k = lower_for_gpu(nm.jit(columns=2)(fn), _arrays("bnstats", shape, dtype)).kernels[0]
    assert k.kernel.columns == 2
    assert "vload(x, " in k.source
    (r,) = compile_report([k])
    assert r["ok"], r["error"]
    assert r["spill_bytes"] == r["stack_bytes"] == r["local_accesses"] == 0, r
    assert r["scalar_global_loads"] > 0 and r["half_loads"] == 0, r


def test_floor_division_and_modulo_by_a_common_factor_are_exact():
    """(g y + r) // (g m) and (g y + r) % (g m), simplified through the common factor g of
    the coefficients, equal Python's at every point (the packed rows' addresses rely on
    (2 r' + 1) // 128 == r' // 64)."""
    rng = random.Random(0)
    x, y = sym.Var("x", 300), sym.Var("y", 37)
    for _ in range(400):
        a, b, c = rng.randint(-12, 12), rng.randint(-6, 6), rng.randint(-50, 50)
        d = rng.choice([2, 3, 4, 6, 8, 12, 16, 128])
        e = sym.lift(x) * a + sym.lift(y) * b + c
        for got, op in ((e // d, lambda v: v // d), (e % d, lambda v: v % d)):
            for xv, yv in itertools.islice(zip(range(0, 300, 7), itertools.cycle(range(37))),
                                           40):
                at = got.substitute({x: sym.lift(xv), y: sym.lift(yv)})
                assert at.is_const() and at.const == op(a * xv + b * yv + c), (a, b, c, d)
    r = sym.Var("r", 4096)
    assert ((sym.lift(r) * 2 + 1) // 128).render() == ((sym.lift(r)) // 64).render()


def many_stats(x):
    return (x.mean(axis=0), x.var(axis=0), x.min(axis=0), x.max(axis=0), (x * x).sum(axis=0),
            x.argmax(axis=0), np.abs(x).sum(axis=0))


def _shared_bytes(k):
    return sum(int(np.prod(shape)) * np.dtype(dt).itemsize
               for _, shape, dt, _ in k.program.shared)


@pytest.mark.ptx
@pytest.mark.xdist_group("ptx")
def test_many_float64_column_reductions_fit_the_shared_memory_of_a_kernel(monkeypatch):
    """Seven float64 statistics of each column (eight accumulators) at 8192 x 8192: no
    kernel declares more than 48 KB of shared arrays (blocks of 1024 threads would need 64),
    and each compiles for sm_90."""
    _on(monkeypatch, (9, 0))
    kernels = lower_for_gpu(many_stats, (np.empty((8192, 8192), np.float64),)).kernels
    assert any(k.layout.layout == "col" and len(k.program.shared) >= 7 for k in kernels)
    assert all(_shared_bytes(k) <= 48 * 1024 for k in kernels)
    for k, r in zip(kernels, compile_report(kernels)):
        assert r["ok"], (k.name, r["error"])


def test_forced_blocks_too_big_for_the_shared_arrays_are_an_argument_error(monkeypatch):
    """Forced 32 x 32 column blocks for the seven statistics: a clear error that names the
    options, not a kernel the compiler refuses."""
    _on(monkeypatch, (9, 0))
    jf = nm.jit(layout="col", threads_per_row=32, rows_per_block=32)(many_stats)
    with pytest.raises(ArgumentError, match="more than the 49152 a kernel may declare"):
        lower_for_gpu(jf, (np.empty((8192, 8192), np.float64),))


def five_stats(x):
    return x.sum(axis=0), x.max(axis=0), x.min(axis=0), (x * x).sum(axis=0), np.abs(x).sum(axis=0)


@pytest.mark.ptx
@pytest.mark.xdist_group("ptx")
@pytest.mark.parametrize("dtype,floor", [(np.float32, 2), (np.float64, 0), (np.int64, 0)],
                         ids=str)
def test_two_blocks_a_multiprocessor_only_where_the_partials_fit(monkeypatch, dtype, floor):
    """Five column sums and extremes at 8192 x 8192: 5 registers of float32 partials a
    column keep the two-block floor (32 registers a thread), 10 of float64 or int64 go
    without it; neither spills (docs/heuristics.md#column-occupancy)."""
    _on(monkeypatch, (9, 0))
    k = max(lower_for_gpu(five_stats, (np.empty((8192, 8192), dtype),)).kernels,
            key=lambda k: k.grid * k.block)
    assert k.layout.layout == "col"
    assert k.layout.block_threads == 1024 and k.grid > 132
    assert k.layout.min_blocks_per_sm == floor
    (r,) = compile_report([k])
    assert r["ok"], r["error"]
    assert r["spill_bytes"] == r["stack_bytes"] == 0, r


def wide_sums(x):           # four float64 sums of float32 columns: 8 registers of partials
    y = x.astype(np.float64)
    return y.sum(axis=0), (y * y).sum(axis=0), np.abs(y).sum(axis=0), (y * y * y).sum(axis=0)


def stats_and_variance(x):  # eight partials, the variance computed in one pass (a count more)
    return (x.sum(axis=0), x.max(axis=0), x.min(axis=0), (x * x).sum(axis=0),
            np.abs(x).sum(axis=0), x.var(axis=0), np.abs(x).max(axis=0),
            (x * x * x).sum(axis=0))


def six_f32_stats(x):       # six float32 partials: within the floor's registers
    return (x.max(axis=0), x.min(axis=0), np.abs(x).sum(axis=0), (x * x * x).sum(axis=0),
            np.abs(x).max(axis=0), np.abs(x).min(axis=0))


@pytest.mark.slow
@pytest.mark.ptx
@pytest.mark.xdist_group("ptx")
@pytest.mark.parametrize("fn,shape,floor", [(wide_sums, (8192, 8192), 0),
                                            (stats_and_variance, (1024, 16384), 0),
                                            (six_f32_stats, (8192, 8192), 2)],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_the_floor_counts_what_the_partials_updates_hold(monkeypatch, fn, shape, floor):
    """The two-block floor leaves 32 registers a thread: four float64 sums of float32
    columns (each widened operand a register more) and a one-pass variance beside seven
    more statistics (its count) go without it; six float32 statistics keep it. None
    spills (docs/heuristics.md#column-occupancy)."""
    _on(monkeypatch, (9, 0))
    k = lower_for_gpu(fn, (np.empty(shape, np.float32),)).kernels[0]
    assert k.layout.layout == "col" and k.layout.block_threads == 1024 and k.grid > 132
    assert k.layout.min_blocks_per_sm == floor, k.layout
    (r,) = compile_report([k])
    assert r["ok"], r["error"]
    assert r["spill_bytes"] == r["stack_bytes"] == r["local_accesses"] == 0, r
