"""Programs that need several kernels: the scheduler splits them, fusing what it can."""
import re

import numpy as np
import pytest

import numbamr as nm
import numbamr.schedule as schedule
from numbamr.lowering.evaluate import walk
from numbamr.ops import Op, ReduceKind
import programs
from numbamr.experimental import Knobs, knobs
from programs import Program
from helpers import run_and_check
from test_ptx import lower_for_gpu, compile_report


@pytest.fixture
def small_splits():
    """Long reductions split from 64 elements a row (or column) on, into segments of 16 or
    more: the scheduler's split at sizes the simulator runs quickly."""
    with knobs(Knobs(split_min_extent=64, split_min_extent_col=64, split_min_segment=16)):
        yield


@pytest.fixture
def small_column_splits():
    """As small_splits, with segments of 8 or more."""
    with knobs(Knobs(split_min_extent=64, split_min_extent_col=64, split_min_segment=8)):
        yield


def abs_dev_rows(x):
    return np.abs(x - x.mean(0)).sum(1)


def normalized_col_max(x):
    return (x / x.sum(1, keepdims=True)).max(0)


def max_of_col_sums(x):
    return x.sum(0).max()


def unrelated_shapes(x):
    return x.sum(0), x.max(1), x * 2


def whole_array(x):
    return x.sum(), x.var(), (x - x.mean()).max()


# (function, kernels it must take at the small test size)
MULTI = [(abs_dev_rows, 2), (normalized_col_max, 2), (max_of_col_sums, 2),
         (unrelated_shapes, 2), (whole_array, 1)]


@pytest.mark.parametrize("fn,kernels", MULTI, ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("rows,cols", [(5, 7), (3, 40)])
def test_split_programs_match_numpy(fn, kernels, rows, cols):
    x = np.random.default_rng(rows + cols).standard_normal((rows, cols)).astype(np.float32)
    prog = Program(fn.__name__, fn, None)
    run_and_check(prog, (x,), expect_kernels=kernels)


def test_each_kernel_is_as_fused_as_it_can_be():
    """abs_dev_rows: the column sums in one kernel; the second reads them and does the rest
    (the mean, the absolute deviation and the row sum) in one pass."""
    x = np.zeros((6, 9), np.float32)
    low = nm.jit(abs_dev_rows).lower(x)
    assert [t[0] for k in low.kernels for t in k.targets] == ["tmp", "out"]
    assert len(low.kernels[1].kernel.reduces) == 1
    assert any(isinstance(key, str) for key in low.kernels[1].kernel.inputs)


def root_of_distance_to_column_min(x):
    t = x - np.prod(1.0 + 0.0007324 * np.tanh(x))
    return np.sqrt(t - t.min(axis=0, keepdims=True)).max()


def assert_each_reduction_in_one_kernel(kernels):
    per_kernel = [{id(r.node) for r in k.kernel.reduces} for k in kernels]
    assert sum(map(len, per_kernel)) == len(set().union(*per_kernel))


@pytest.mark.parametrize("shape,dtype", [((16, 256), np.float64), ((64, 512), np.float32)])
def test_each_reduction_is_computed_by_one_kernel(shape, dtype):
    """The product over the whole array is needed by the column-minimum kernel and by the
    kernel of the root's maximum. Each kernel reduces in the order of its own layout, so
    computed twice it may differ in its last bits, ``t - t.min()`` then goes below 0 and
    its root is NaN (GPU fuzz seed 149622 on the H200). It is computed once, into a
    temporary both read: no reduction appears in two kernels (GPU heuristics and the
    simulator's), and the values match NumPy."""
    x = np.random.default_rng(7).standard_normal(shape).astype(dtype)
    fn = nm.jit(root_of_distance_to_column_min)
    for kernels in (fn.lower(x).kernels, lower_for_gpu(fn, (x,)).kernels):
        assert_each_reduction_in_one_kernel(kernels)
    prog = Program(root_of_distance_to_column_min.__name__, root_of_distance_to_column_min,
                   None)
    run_and_check(prog, (x,), expect_kernels=len(fn.lower(x).kernels))


def min_with_its_odd_columns(x):
    m = x.min(axis=2)
    return x.max(axis=2, keepdims=True), np.sqrt(m[..., 1::2] * m[..., 1::2] + 1.0), m


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(3, 10, 7), (7, 100, 127)])
def test_a_shared_reduction_is_stored_by_the_first_kernel_that_computes_it(shape, monkeypatch):
    """The row minimum is an output and feeds a strided output that needs a kernel of its
    own. It is computed once, by the kernel of the row outputs, which stores it for the
    other (two kernels, where a kernel of its own would make three), and the values match
    NumPy."""
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    fn = nm.jit(min_with_its_odd_columns)
    for kernels in (fn.lower(x).kernels, lower_for_gpu(fn, (x,)).kernels):
        assert_each_reduction_in_one_kernel(kernels)
        assert len(kernels) == 2 and ("tmp", "t0") in kernels[0].targets
    prog = Program(min_with_its_odd_columns.__name__, min_with_its_odd_columns, None)
    run_and_check(prog, (x,), expect_kernels=2)
    monkeypatch.setattr(schedule, "_fold_into_first_reader", lambda s, groups, name: groups)
    assert len(nm.jit(min_with_its_odd_columns).lower(x).kernels) == 3


def test_long_reductions_over_few_rows_spread_over_blocks(small_splits):
    """A whole-array sum is split into segments (one block each) and combined after."""
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    prog = Program("whole_array", whole_array, None)
    fn = nm.jit(whole_array)
    got = run_and_check(prog, (x,), jitted=fn)
    low = fn.lower(x)
    assert len(low.kernels) > 1 and low.kernels[0].kernel.nrows > 1
    again = fn(x)
    for a, b in zip(got, again):                      # no atomics: the same bits every run
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


@pytest.mark.slow
def test_split_kernels_compile_for_sm90():
    kernels = []
    for fn, _ in MULTI:
        kernels += lower_for_gpu(fn, (np.empty((4096, 4096), np.float32),)).kernels
    bad = [f"{k.name}: {r['error']}" for k, r in zip(kernels, compile_report(kernels))
           if not r["ok"]]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("options", [dict(), dict(threads_per_row=4, upcast=0)], ids=str)
def test_same_bits_on_every_run(options):
    x = np.random.default_rng(1).standard_normal((4, 300)).astype(np.float32)
    fn = nm.jit(**options)(lambda x: (x.sum(1), x.var(1), np.exp(x - x.max(1, keepdims=True))))
    first = fn(x)
    for _ in range(2):
        for a, b in zip(first, fn(x)):
            assert a.tobytes() == b.tobytes()


def test_size_zero_axes_as_numpy():
    x = np.zeros((3, 0), np.float32)
    got = nm.jit(lambda x: x.sum(1))(x)
    np.testing.assert_array_equal(got, np.zeros(3, np.float32))
    assert got.dtype == np.float32
    with pytest.raises(nm.ShapeError, match="zero-size"):
        nm.jit(lambda x: x.max(1))(x)


def test_zero_d_inputs_and_outputs():
    x = np.float32(3.5) * np.ones((), np.float32)
    y = np.arange(5, dtype=np.float32)
    got = nm.jit(lambda x, y: (x * y).sum() + x)(x, y)
    assert np.asarray(got).shape == () and abs(float(got) - (3.5 * 10 + 3.5)) < 1e-5


@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_split_variance_reads_the_input_once(small_splits, offset):
    """x.var() over few rows, split across blocks: one kernel reads x (shifted sums in
    float64), and the result stays within 1e-5 of float64 NumPy even when the data sit far
    from zero (mean / std = 1e4)."""
    x = (np.random.default_rng(2).standard_normal((256, 8)) + offset).astype(np.float32)

    def stats(x):
        return x.var(), x.std(), x.mean(), x.var(axis=0)
    prog = Program("stats", stats, None)
    fn = nm.jit(stats)
    run_and_check(prog, (x,), jitted=fn)
    readers = [k for k in fn.lower(x).kernels if _sums_input(k, 0)]
    assert len(readers) == 2          # whole-array stats in one, the column variance in one
    for k in readers:
        assert all(r.depth == 0 for r in k.kernel.reduces)


def _sums_input(k, key):
    """Whether a reduce of kernel ``k`` reads input ``key`` (more than a value per row)."""
    return any(v.op is Op.LOAD and v.arg[0] == key
               for r in k.kernel.reduces for v in walk(r.body))


def batch_stats(x, acc=np.float32):
    y = x.astype(acc)
    mu = y.mean(axis=0)
    return mu, ((y - mu) ** 2).mean(axis=0), y.mean(), y.var()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("first", ["plain", "far", "nan", "+inf", "-inf", "both infs"])
def test_a_split_variances_mean_is_its_own_shifted_sum(small_splits, dtype, first):
    """The mean beside a split variance of two-byte floats (batch-norm statistics,
    ``x.mean()`` with ``x.var()``) is N*K + sum(x - K), the float64 sum the variance has
    already: x is summed once, two float64 sums and no float32 one. ``x - K`` is exact,
    so the mean is within an ulp of the float64 mean even when the data sit far from
    zero, and a first element (the shift K) that is NaN or infinite gives NumPy's NaN and
    inf (an infinite K is replaced by 0: inf - inf would make an infinite mean NaN)."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((512, 6)).astype(np.float32)
    if first == "far":
        x = x * np.float32(0.25) + np.float32(300)
    x = x.astype(dt)
    specials = {"nan": [np.nan], "+inf": [np.inf], "-inf": [-np.inf],
                "both infs": [np.inf, -np.inf]}.get(first, [])
    for i, v in enumerate(specials):
        x[0, i] = v                                   # the shift of column 0 (and 1)
        x[100, 3] = v                                 # a later value of another column
    fn = nm.jit(batch_stats)
    readers = [k for k in fn.lower(x).kernels if _sums_input(k, 0)]
    assert len(readers) == 2                          # the columns, the whole array
    for k in readers:
        kinds = [(r.kind, np.dtype(r.dtype)) for r in k.kernel.reduces]
        assert kinds == [(ReduceKind.SUM, np.dtype(np.float64))] * 2, kinds
    got = [np.asarray(g) for g in fn(x)]
    with np.errstate(all="ignore"):
        want = [np.asarray(w) for w in batch_stats(x, np.float64)]
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        assert np.array_equal(np.isnan(g), np.isnan(w)), (g, w)
        inf = np.isinf(w)
        assert np.array_equal(g[inf], w[inf].astype(np.float32))
    for g, w in zip(got[::2], want[::2]):               # the means: within an ulp
        fin = np.isfinite(w)
        ulp = np.spacing(np.abs(w[fin]).astype(np.float32)).astype(np.float64)
        assert (np.abs(g[fin] - w[fin]) <= ulp).all(), (g, w)
    for g, w in zip(got[1::2], want[1::2]):             # the variances
        fin = np.isfinite(w)
        np.testing.assert_allclose(g[fin], w[fin], rtol=1e-5)


@pytest.mark.parametrize("fn,dtype", [
    (lambda x: (x.mean(axis=0), (x * x).mean(axis=0)), np.float16),   # no variance
    (batch_stats, np.float32),                      # a float32 variance: x - K rounds
])
def test_a_mean_keeps_its_float32_sum_unless_a_variance_of_two_byte_floats_has_one(
        small_splits, fn, dtype):
    x = np.random.default_rng(5).standard_normal((512, 6)).astype(dtype)
    (k, *_) = [k for k in nm.jit(fn).lower(x).kernels if _sums_input(k, 0)]
    assert np.dtype(np.float32) in [np.dtype(r.dtype) for r in k.kernel.reduces]


def centered_extremes(x):
    return (x - x.mean()).max(), (x.mean() - x).min(), (-(x - x.max(axis=0)) + 2.0).max(axis=0)


@pytest.mark.parametrize("special", ["none", "nan", "-inf", "+inf", "both infs"])
def test_split_centered_max_reads_the_input_once(small_splits, special):
    """max/min of x shifted by a reduction of x, split across blocks: one kernel reads x
    (max, min and sum of each segment together), and NaN and inf come out as NumPy's
    (a mean of -inf makes x - mean NaN where x is -inf)."""
    x = np.random.default_rng(3).standard_normal((256, 8)).astype(np.float32)
    values = {"none": [], "nan": [np.nan], "-inf": [-np.inf], "+inf": [np.inf],
              "both infs": [np.inf, -np.inf]}[special]
    for i, v in enumerate(values):
        x[17 + 90 * i, 3] = v
    fn = nm.jit(centered_extremes)
    got = fn(x)
    with np.errstate(invalid="ignore"):
        want = centered_extremes(x.astype(np.float64))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=1e-5, atol=1e-5)
    low = fn.lower(x)
    readers = [k for k in low.kernels if 0 in k.kernel.inputs]
    assert len(readers) == 2          # the whole-array pair in one, the column max in one
    assert all(r.depth == 0 for k in readers for r in k.kernel.reduces)


def column_stats(x):
    return x.sum(axis=0), x.var(axis=0), x.max(axis=0), np.min(x, axis=0), x.mean(axis=0)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_columns_over_rows_that_are_not_whole_lines_split_interleaved(
        small_column_splits, dtype):
    """384 rows of 7 (28 bytes, not a whole 128-byte line): the column reductions are split
    so that segment s takes rows s, s + 32, ... (32 rows of 7 make whole lines), each block's
    steps then starting lines, and the results are NumPy's (NaN and the extremes in rows
    that fall to different segments)."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((384, 7)) * 100).astype(dtype)
    if dtype == np.float32:
        x[5, 2], x[300, 4], x[33, 6] = np.nan, 1e6, -1e6
    fn = nm.jit(column_stats)
    run_and_check(Program("column_stats", column_stats, None), (x,), jitted=fn)
    first = fn.lower(x).kernels[0]
    assert first.kernel.nrows == 32 * 7                       # (segment, column) rows
    # (segment, column) rows lie side by side, and each segment steps 32 rows of 7 at once
    load = re.search(r"x\[(\w+) \+ 224 \* q0_0\]", first.source)
    assert load and f"    {load.group(1)} = row\n" in first.source


def test_columns_over_whole_lines_split_into_runs(small_column_splits):
    """Rows of 32 float32 are whole lines already: segments stay runs of rows (segment s
    takes rows s * 24 to s * 24 + 23), as they were measured."""
    x = np.random.default_rng(5).standard_normal((384, 32)).astype(np.float32)
    fn = nm.jit(column_stats)
    run_and_check(Program("column_stats", column_stats, None), (x,), jitted=fn)
    first = fn.lower(x).kernels[0]
    segments = first.kernel.nrows // 32
    assert segments > 1 and f"{32 * (384 // segments)} * ((row) // 32)" in first.source


@pytest.mark.slow
def test_column_variance_of_odd_width_reads_whole_lines_on_the_gpu():
    """100000 x 999 float32 (the GPU's thresholds): 32 interleaved segments, so the partial
    kernel reads rows of 31968 floats (whole 128-byte lines) down 3125 steps, its loads
    compiled without spills."""
    x = np.empty((100000, 999), np.float32)
    kernels = lower_for_gpu(lambda x: x.var(axis=0), (x,)).kernels
    first = kernels[0]
    assert first.kernel.nrows == 31968 and "31968 * q0" in first.source
    (r,) = compile_report([first])
    assert r["ok"] and r["spill_bytes"] == 0, r


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(100000, 999), (65536, 333)])
def test_columns_of_odd_width_split_interleaved_on_gpu(shape):
    """Column sums, variances, extremes and means over 999 and 333 columns, split into 32
    interleaved segments by the GPU's thresholds, against float64 NumPy."""
    x = (np.random.default_rng(6).standard_normal(shape) + 3).astype(np.float32)
    fn = nm.jit(column_stats)
    assert fn.lower(x).kernels[0].kernel.nrows == 32 * shape[1]
    run_and_check(Program("column_stats", column_stats, None), (x,), jitted=fn)


# ---- the schedule comes from the fusion facts; each kernel is built once -------------------

def _whole_sum(x):
    return x.sum()


BUILT_ONCE = [programs.softmax, programs.layernorm, programs.variance, programs.logsumexp,
              programs.sum_and_max, _whole_sum]


@pytest.mark.parametrize("fn", BUILT_ONCE, ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape", [(64, 512), (8, 65536), (1, 1 << 20)], ids=str)
@pytest.mark.parametrize("target", ["sim", "sm_90"])
def test_each_kernel_is_built_once(monkeypatch, fn, shape, target):
    """The scheduler decides from the kernel analysis' facts and builds every kernel it keeps
    once: at most one build more than kernels (the unsplit graph, built to ask whether one
    kernel holding the rows on chip would compute everything), where partitioning by trial
    took up to 13 builds for 4 kernels (softmax over one row of 2**20)."""
    builds = []
    real = schedule.build_kernel
    monkeypatch.setattr(schedule, "build_kernel",
                        lambda *a, **k: builds.append(1) or real(*a, **k))
    x = np.zeros(shape, np.float32)
    args = (x, x[0], x[0]) if fn is programs.layernorm else (x,)
    kernels = nm.jit(fn).lower(*args, target=target).kernels
    assert len(builds) <= len(kernels) + 1


def test_the_fusion_facts_say_what_one_kernel_holds():
    """For every catalogue program and each set of its outputs (each alone, and all),
    lowering.fusion's facts say one kernel fits exactly where building one succeeds."""
    from numbamr.errors import FusionError
    from numbamr.graph import verify_graph
    from numbamr.lowering.fusion import FactsCache
    from numbamr.lowering.kernel import build_kernel
    from numbamr.trace import trace
    import programs as catalogue
    checked = {True: 0, False: 0}
    for prog in catalogue.PROGRAMS + [Program(f.__name__, f, None) for f, _ in MULTI]:
        inputs = prog.make(np.random.default_rng(0), 4, 9) if prog.make else \
            (np.zeros((4, 9), np.float32),)
        specs = [("array", (a.shape, a.dtype)) for a in inputs]
        _, outputs, _ = trace(lambda vals: prog.fn(*vals), specs)
        verify_graph(outputs)
        layouts = {i: (schedule.c_strides(a.shape), 0) for i, a in enumerate(inputs)}
        facts = FactsCache()
        for nodes in [[o] for o in outputs] + [list(outputs)]:
            try:
                build_kernel(nodes, layouts, [(schedule.c_strides(n.shape), 0) for n in nodes])
                built = True
            except FusionError:
                built = False
            assert facts.fit_one_kernel(nodes, layouts) == built, (prog.name, nodes)
            checked[built] += 1
    assert checked[True] and checked[False]
