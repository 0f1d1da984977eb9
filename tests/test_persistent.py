"""Persistent clusters (``persistent=N``): a split row's cluster loops over rows, loads the
weights (inputs indexed by column only) into registers once, and brings each row into
shared memory N rows ahead of its use.

In the simulator (CI) every cluster takes one row (the grid holds a cluster a row) and the
stages are filled by element copies: the loop, the stage indexing, the passes that read the
row again from its stage and the exchanges are checked there against float64 NumPy. The PTX
tier compiles the GPU form (bulk copies, mbarrier waits, no spills) and checks which
kernels take it by default; the gpu tests run it where each cluster loops over many rows.
"""

import numpy as np
import pytest

import numbamr as nm
from helpers import run_and_check, to_host
from numbamr.errors import ArgumentError
from numbamr.experimental import Knobs, knobs
from programs import BY_NAME
from test_split import _lowered_for_gpu

PERSISTENT_PROGRAMS = ["layernorm", "layernorm_stats", "rmsnorm", "softmax", "zscore",
                       "sum_and_max", "dict_outputs", "chain4"]


def _lowered(fn, inputs):
    return fn.lower(*inputs).kernels


@pytest.mark.parametrize("name", PERSISTENT_PROGRAMS)
@pytest.mark.parametrize("split,rows,cols,ahead", [
    (2, 5, 256, 2), (4, 3, 512, 1), (2, 4, 512, 3), (8, 2, 1024, 4)],
    ids=["s2-two-ahead", "s4-one-ahead", "s2-three-ahead", "s8-four-ahead"])
def test_persistent_rows_match_numpy(name, split, rows, cols, ahead):
    p = BY_NAME[name]
    inputs = p.make(np.random.default_rng(split * 10 + cols), rows, cols)
    fn = nm.jit(split=split, cluster=1, persistent=ahead)(p.fn)
    (k,) = _lowered(fn, inputs)
    assert k.layout.persistent == ahead and k.layout.split == split
    assert "for rit in range(mine)" in k.source and "bulk_load(" in k.source
    run_and_check(p, inputs, jitted=fn)


@pytest.mark.parametrize("options,why", [
    (dict(persistent=2), "not split across a cluster"),
    (dict(split=2, cluster=0, persistent=2), "not split across a cluster"),
    (dict(split=4, cluster=1, persistent=2, threads_per_row=16, upcast=0), "registers"),
])
def test_persistent_refused_with_the_reason(options, why):
    p = BY_NAME["layernorm"]
    inputs = p.make(np.random.default_rng(0), 3, 512)
    with pytest.raises(ArgumentError, match=f"option persistent=2.*{why}"):
        nm.jit(**options)(p.fn).lower(*inputs)


@pytest.mark.parametrize("options,blocks,stage", [
    (dict(split=4, threads_per_row=512, persistent=2), 1, 2 * 65536),  # a block alone
    (dict(split=8, threads_per_row=256, persistent=3), 2, 3 * 32768),   # two blocks of 256
    (dict(split=4, threads_per_row=512, persistent=4), 1, None),        # 256 KiB: too much
    (dict(split=8, threads_per_row=256, persistent=3, min_blocks_per_sm=3), 3, None),
])
def test_persistent_stages_fit_every_block_of_a_multiprocessor(monkeypatch, options, blocks,
                                                               stage):
    """The rows brought ahead are staged in shared memory by every block a multiprocessor
    holds: a block alone may take more than half of it, three blocks less than a third."""
    if stage is None:
        with pytest.raises(ArgumentError, match=f"for each of {blocks} blocks do not fit"):
            _lowered_for_gpu(monkeypatch, "layernorm", 1024, 65536, options=options)
        return
    (k,) = _lowered_for_gpu(monkeypatch, "layernorm", 1024, 65536, options=options)
    assert k.layout.persistent == options["persistent"]
    assert k.layout.min_blocks_per_sm == blocks and k.program.dynamic_shared == stage


def test_persistent_refuses_rows_that_are_not_whole_segments():
    p = BY_NAME["layernorm"]
    inputs = p.make(np.random.default_rng(0), 3, 1000)
    with pytest.raises(ArgumentError, match="whole chunks"):
        nm.jit(split=4, cluster=1, persistent=2)(p.fn).lower(*inputs)


def test_persistent_refuses_bool_rows():
    x = np.random.default_rng(0).standard_normal((3, 512)) > 0
    with pytest.raises(ArgumentError, match="dtype bool"):
        nm.jit(split=2, cluster=1, persistent=2)(
            lambda m: m * m.sum(axis=-1, keepdims=True)).lower(x)


@pytest.mark.parametrize("value", [-1, 5, 1.5])
def test_persistent_option_values(value):
    with pytest.raises(ArgumentError, match="persistent"):
        nm.jit(persistent=value)(lambda x: x.sum(axis=-1))


@pytest.mark.parametrize("name,rows,cols,ahead", [
    ("layernorm", 1024, 65536, 2),      # two weights: the suite's cell
    ("layernorm", 2048, 131072, 2),     # 16 blocks a row
    ("rmsnorm", 1024, 65536, 0),        # one exchange a row: a cluster a row as before
    ("rmsnorm", 2048, 131072, 0),
    ("zscore", 1024, 65536, 0),         # no weights: the row's registers as before
    ("softmax", 1024, 65536, 0),
    ("layernorm", 2048, 100000, 0),     # segments that end inside a chunk
    ("layernorm", 64, 8192, 0),         # rows held by one block
])
def test_persistent_by_default_where_split_rows_read_weights_and_exchange_twice(
        monkeypatch, name, rows, cols, ahead):
    """The default loops over rows where a split row reads weights and one reduce depends
    on another. Such a grid fills the GPU: it is launched as a programmatic dependent of the
    stream's previous kernel (waiting for it before touching memory) but does not let the
    next kernel start early (its blocks' ends do)."""
    (k,) = _lowered_for_gpu(monkeypatch, name, rows, cols)
    assert k.layout.persistent == ahead, k.layout
    if ahead:
        assert k.layout.cluster and k.launch_bounds == (256, 2)
        assert "vload_keep(" not in k.source      # rows come by bulk copy
        assert k.dependent and "griddep_wait()" in k.source
        assert "griddep_launch()" not in k.source


def _stage_reads_and_refill(kernel):
    """(positions of the row loop's stage reads, of its first barrier, of its refill) in
    the kernel's linear program."""
    ops = [ins.op for ins in kernel.program.instrs]
    start = ops.index("ROWLOOP")
    barrier = ops.index("BARRIER", start)
    return ([i for i, op in enumerate(ops) if op == "SVLOAD"], barrier, ops.index("ROWS_FILL"))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["layernorm", "layernorm_stats", "chain4"])
def test_rows_held_in_registers_read_their_stage_once(name):
    """The study knob Knobs.persistent_hold_rows: later passes use the registers of the
    first, so every read of a row's stage comes before the row's first barrier and the stage is
    refilled right after it (by default later passes read the stage again and the refill
    waits for them); the results still match float64 NumPy."""
    p = BY_NAME[name]
    inputs = p.make(np.random.default_rng(7), 5, 1024)
    # two warps a block: a block's partials combine through shared memory, past a barrier
    options = dict(split=2, cluster=1, persistent=2, threads_per_row=64)
    fn = nm.jit(**options)(p.fn)
    reads, barrier, fill = _stage_reads_and_refill(_lowered(fn, inputs)[0])
    assert max(reads) > barrier and fill > max(reads)
    with knobs(Knobs(persistent_hold_rows=True)):
        reads, barrier, fill = _stage_reads_and_refill(_lowered(fn, inputs)[0])
        assert max(reads) < barrier and fill == barrier + 1
        run_and_check(p, inputs, jitted=fn)


@pytest.mark.parametrize("mode,wait,launch", [(0, False, None), (1, True, "start"),
                                              (2, True, "last row"), (3, True, None)])
def test_how_a_persistent_grid_is_launched(monkeypatch, mode, wait, launch):
    """The study knob Knobs.persistent_dependent, lowered as on sm_90: plainly (0), or as a
    dependent that waits first and lets the next kernel start at once (1), at each block's
    last row (2) or as its blocks end (3, the default)."""
    with knobs(Knobs(persistent_dependent=mode)):
        (k,) = _lowered_for_gpu(monkeypatch, "layernorm", 1024, 65536)
    assert k.layout.persistent and k.dependent == wait
    src = k.source
    assert ("griddep_wait()" in src) == wait
    if launch is None:
        assert "griddep_launch()" not in src
    elif launch == "start":
        assert src.index("griddep_launch()") < src.index("griddep_wait()")
    else:
        assert src.index("for rit in range(mine)") < src.index("if rit == mine - 1:") < \
            src.index("griddep_launch()")


@pytest.mark.slow
@pytest.mark.ptx
def test_persistent_kernels_compile_with_bulk_copies_and_no_spills(monkeypatch):
    from test_ptx import compile_report
    kernels = []
    for name in ("layernorm", "layernorm_stats"):
        kernels += _lowered_for_gpu(monkeypatch, name, 1024, 65536)
    kernels += _lowered_for_gpu(monkeypatch, "rmsnorm", 1024, 65536,
                                options=dict(persistent=2))
    kernels += _lowered_for_gpu(monkeypatch, "softmax", 1024, 65536,
                                options=dict(persistent=3))
    for k, r in zip(kernels, compile_report(kernels)):
        assert r["ok"], r["error"]
        assert r["bulk_copies"] > 0 and r["mbarrier_waits"] >= 2, k.name
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, (k.name, r)
        assert r["griddep_waits"] == 1 and r["griddep_launches"] == 0, k.name
        assert r["global_before_griddep_wait"] == 0, k.name


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["layernorm", "layernorm_stats", "rmsnorm"])
@pytest.mark.parametrize("rows,cols,options", [
    (1000, 65536, {}),                          # rows not a multiple of the clusters
    (37, 65536, {}),                            # fewer rows than clusters fit
    (777, 16384, dict(split=2, cluster=1, persistent=1)),
    (777, 16384, dict(split=2, cluster=1, persistent=3)),
    (500, 32768, dict(split=8, cluster=1, persistent=4)),
    (600, 131072, {}),                          # 16 blocks a row
])
def test_persistent_rows_on_gpu(name, rows, cols, options):
    """Against float64 NumPy, and the same bits on three calls back to back (CuPy arrays:
    each call's clusters loop over many rows)."""
    cp = pytest.importorskip("cupy")
    if name == "rmsnorm":           # one exchange a row: looping over rows is forced
        options = dict(options, persistent=options.get("persistent", 2))
    p = BY_NAME[name]
    inputs = p.make(np.random.default_rng(rows + cols), rows, cols)
    fn = nm.jit(**options)(p.fn)
    (k,) = _lowered(fn, inputs)
    assert k.layout.persistent == options.get("persistent", 2)
    run_and_check(p, inputs, jitted=fn)
    dev = [cp.asarray(a) for a in inputs]
    runs = [fn(*dev) for _ in range(3)]
    runs = [r if isinstance(r, tuple) else (r,) for r in runs]
    for again in runs[1:]:
        assert all(np.array_equal(to_host(a), to_host(b)) for a, b in zip(runs[0], again))


@pytest.mark.gpu
def test_persistent_half_rows_on_gpu():
    """float16 rows (8 a 16-byte piece) with float32 weights."""
    def layernorm16(x, w, b):
        x = x.astype(np.float32)
        mu = x.mean(axis=-1, keepdims=True)
        d = x - mu
        return (d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5) * w + b) \
            .astype(np.float16)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((700, 65536)).astype(np.float16)
    w, b = (rng.standard_normal(65536).astype(np.float32) for _ in range(2))
    fn = nm.jit(layernorm16)
    (k,) = _lowered(fn, (x, w, b))
    assert k.layout.persistent == 2
    got = to_host(fn(x, w, b)).astype(np.float64)
    ref = layernorm16(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64))
    assert np.abs(got - ref).max() <= 2e-3 * np.abs(ref).max()
