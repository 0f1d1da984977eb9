"""Shapes that change from call to call: kernels generic in their rows.

A kernel generic in its rows takes the row count as a parameter (where rows share a block)
and its grid is sized at launch, so a call whose arrays differ only in the extents that are
not reduced builds nothing: it lowers, finds the same code, and launches the kernels built
already. Checked in the simulator against float64 NumPy and against the kernels compiled
for each shape (bit for bit), and through ``lower(target=...)`` for an H200 without one.
"""
import numpy as np
import pytest

import numbamr as nm
from helpers import check_outputs, to_float64
from numbamr.runtime.compile import code_text


def rmsnorm(x, w):
    xf = x.astype(np.float32)
    r = xf / np.sqrt((xf * xf).mean(axis=-1, keepdims=True) + 1e-6)
    return (r * w).astype(x.dtype)


def layernorm_stats(x):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + 1e-5), mu[..., 0], var[..., 0]


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def compiles(capfd):
    """The NUMBAMR_DEBUG lines of the calls so far that compiled."""
    return [line for line in capfd.readouterr().err.splitlines()
            if line.startswith("numbamr: compiling")]


def reference(fn, *inputs):
    with np.errstate(all="ignore"):
        return fn(*inputs), fn(*[to_float64(a) for a in inputs])


ROWS = [5, 7, 9, 3, 2, 33, 64, 1]       # across the rows a block holds in the simulator


def test_new_row_counts_reuse_the_generic_kernel(monkeypatch, capfd):
    monkeypatch.setenv("NUMBAMR_DEBUG", "1")
    fn = nm.jit(rmsnorm)
    w = np.random.default_rng(1).standard_normal(48).astype(np.float32)
    rng = np.random.default_rng(0)
    for n in ROWS[:-1]:
        x = rng.standard_normal((n, 48)).astype(np.float16)
        check_outputs(fn(x, w), *reference(rmsnorm, x, w), rtol=2e-3)
    lines = compiles(capfd)
    # the first shape compiles for its shapes, the second a kernel generic in its rows
    assert len(lines) == 2, lines
    assert "first call" in lines[0]
    assert "argument 'x': shape (5, 48) -> (7, 48)" in lines[1]
    assert "generic in their rows" in lines[1]
    # a single row reads no row stride: its code differs, built once
    for _ in range(2):
        x = rng.standard_normal((1, 48)).astype(np.float16)
        check_outputs(fn(x, w), *reference(rmsnorm, x, w), rtol=2e-3)
    assert len(compiles(capfd)) <= 1


def test_generic_kernel_gives_the_bits_of_the_kernel_for_each_shape():
    static = nm.jit(dynamic=False)(layernorm_stats)
    generic = nm.jit(dynamic=True)(layernorm_stats)
    rng = np.random.default_rng(2)
    for n in ROWS:
        x = rng.standard_normal((n, 40)).astype(np.float32)
        got, want = generic(x), static(x)
        for g, s in zip(got, want):
            assert g.shape == s.shape and g.dtype == s.dtype
            assert np.array_equal(g, s), f"{n} rows: generic and per-shape kernels differ"
        check_outputs(got, *reference(layernorm_stats, x), rtol=1e-5)
    assert generic.lower(x).generic and not static.lower(x).generic


def test_batch_and_sequence_extents_both_vary_in_one_kernel(monkeypatch, capfd):
    monkeypatch.setenv("NUMBAMR_DEBUG", "1")
    fn = nm.jit(dynamic=True)(softmax)
    rng = np.random.default_rng(3)
    for shape in [(2, 3, 32), (3, 5, 32), (4, 2, 32), (1, 7, 32)]:
        x = rng.standard_normal(shape).astype(np.float32)
        check_outputs(fn(x), *reference(softmax, x), rtol=1e-5)
    assert len(compiles(capfd)) == 1


def test_a_new_reduced_extent_compiles_its_own_kernel(monkeypatch, capfd):
    monkeypatch.setenv("NUMBAMR_DEBUG", "1")
    fn = nm.jit(dynamic=True)(softmax)
    rng = np.random.default_rng(4)
    for cols in (24, 40):        # extents no other test compiles
        x = rng.standard_normal((6, cols)).astype(np.float32)
        check_outputs(fn(x), *reference(softmax, x), rtol=1e-5)
    assert len(compiles(capfd)) == 2


def test_dynamic_false_compiles_every_shape(monkeypatch, capfd):
    monkeypatch.setenv("NUMBAMR_DEBUG", "1")
    fn = nm.jit(dynamic=False)(softmax)
    for n in (6, 7):            # 7 rows mask the last block's second row: other code
        fn(np.ones((n, 32), np.float32))
    lines = compiles(capfd)
    assert len(lines) == 2 and "kernels for these shapes" in lines[1]
    assert not fn.lower(np.ones((9, 32), np.float32)).generic


def test_dynamic_must_be_none_true_or_false():
    with pytest.raises(nm.ArgumentError, match="dynamic must be None, True or False"):
        nm.jit(dynamic="yes")


def test_generic_kernel_takes_its_row_count_and_names_no_count():
    fn = nm.jit(dynamic=True)(softmax)
    a = fn.lower(np.ones((6, 256), np.float32), target="sm_90").kernels[0]
    b = fn.lower(np.ones((4098, 256), np.float32), target="sm_90").kernels[0]
    assert a.source == b.source
    rb = a.layout.rows_per_block
    assert rb > 1 and b.layout == a.layout
    assert "def softmax(x, out0, nrows)" in a.source
    assert "row = min(bid * %d + rib, nrows - 1)" % rb in a.source and "row_ok" not in a.source
    assert "4098" not in b.source
    assert (a.grid, b.grid) == (-(-6 // rb), -(-4098 // rb))


def test_rows_split_across_blocks_stay_per_shape():
    """A split row's segments and a persistent grid are laid out for the row count."""
    fn = nm.jit(dynamic=True)(layernorm_stats)
    low = fn.lower(np.ones((64, 65536), np.float32), target="sm_90")
    assert not low.generic
    assert any(k.layout.split > 1 for k in low.kernels)


def test_disk_key_is_the_code_not_its_comments():
    """Static kernels of 4096 and 4098 one-block rows differ only in comments that name
    the row count: they are one kernel."""
    fn = nm.jit(dynamic=False)(softmax)
    a = fn.lower(np.ones((4096, 8192), np.float32), target="sm_90").kernels[0]
    b = fn.lower(np.ones((4098, 8192), np.float32), target="sm_90").kernels[0]
    assert a.layout.rows_per_block == 1 and a.source != b.source
    assert code_text(a.source) == code_text(b.source)
    assert "#" not in code_text(a.source)


@pytest.mark.parametrize("target,dependent", [("sm_90", True), ("sm_80", False)])
def test_lower_for_a_named_gpu_without_one(target, dependent):
    low = nm.jit(softmax).lower(np.ones((8, 65536), np.float32), target=target)
    assert low.target == target
    src = low.as_text()
    assert "(cuda target)" in src
    assert ("griddep_wait()" in src) == dependent
    assert ("cluster_wait" in src) == (target == "sm_90")     # clusters: sm_90 and newer


def test_lower_for_the_simulator_and_bad_targets():
    fn = nm.jit(softmax)
    low = fn.lower(np.ones((4, 32), np.float32), target="sim")
    assert low.target == "sim" and low.kernels[0].sim_source
    for bad in ("sm90", "gpu", 90, "sm_9"):
        with pytest.raises(nm.ArgumentError, match="target must be 'sim'"):
            fn.lower(np.ones((4, 32), np.float32), target=bad)


@pytest.mark.ptx
def test_generic_kernel_compiles_for_sm90_with_its_row_count_parameter():
    from test_ptx import compile_report
    fn = nm.jit(dynamic=True)(rmsnorm)
    kernels = fn.lower(np.ones((3, 4096), np.float16), np.ones(4096, np.float32),
                       target="sm_90").kernels
    report = compile_report(kernels)
    assert all(r["ok"] for r in report), report
    assert all(r["spill_bytes"] == 0 for r in report)


def column_stats(x):            # reduced along axis 0: rows (columns here) a thread each
    return x.mean(axis=0), x.max(axis=0)


def short_rows(x, y):           # rows of 12: several rows a block, a row count parameter
    return (x * y).sum(axis=-1), (x - y).max(axis=-1, keepdims=True) * x


MEMO_CASES = [(softmax, [(5, 300), (9, 300), (1, 300), (64, 300)]),
              (layernorm_stats, [(2, 3, 256), (4, 7, 256), (1, 1, 256)]),
              (rmsnorm, [(3, 4096), (1000, 4096)]),
              (column_stats, [(100, 48), (100, 96), (100, 7)]),
              (short_rows, [(40, 12), (3, 12), (1025, 12)])]


def _inputs(fn, shape):
    x = np.ones(shape, np.float32)
    return (x, np.ones(shape[-1], np.float32)) if fn is rmsnorm else \
        (x, x) if fn is short_rows else (x,)


@pytest.mark.parametrize("target", ["sm_90", "sim"])
@pytest.mark.parametrize("fn,shapes", MEMO_CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_a_generic_kernel_lowered_again_is_the_one_lowered_fresh(fn, shapes, target):
    """Reusing a generic kernel's lowering for new rows gives the source, parameters and
    grid that lowering it afresh gives (the memo changes nothing but the time)."""
    from numbamr import lowering
    jf = nm.jit(dynamic=True)(fn)
    jf.lower(*_inputs(fn, shapes[0]), target=target)
    for shape in shapes[1:]:
        reused = jf.lower(*_inputs(fn, shape), target=target)
        saved = dict(lowering._GENERIC_LOWERED)
        lowering._GENERIC_LOWERED.clear()
        try:
            fresh = jf.lower(*_inputs(fn, shape), target=target)
        finally:
            lowering._GENERIC_LOWERED.update(saved)
        assert reused.generic and fresh.generic
        for r, f in zip(reused.kernels, fresh.kernels, strict=True):
            assert (r.source, r.sim_source) == (f.source, f.sim_source)
            assert (r.grid, r.block, r.program.params) == (f.grid, f.block, f.program.params)


def test_new_row_counts_lower_a_generic_kernel_once(monkeypatch):
    """Calls at new row counts reuse the generic kernel's linear program: the linearizer
    runs for the first shapes (the kernel for those shapes and the generic one) only."""
    from numbamr import lowering
    runs = []
    real = lowering.linearize
    monkeypatch.setattr(lowering, "linearize", lambda *a, **k: runs.append(1) or real(*a, **k))
    jf = nm.jit(softmax)
    rng = np.random.default_rng(3)
    for n in (17, 18, 19, 20, 21, 2, 40):
        x = rng.standard_normal((n, 130)).astype(np.float32)
        check_outputs(jf(x), *reference(softmax, x), rtol=1e-5)
    assert len(runs) == 2


def test_a_persistent_or_split_generic_lowering_is_not_reused():
    """Layouts sized for their rows (a split row here) are lowered per shape: the memo
    keeps only layouts whose code serves every row count."""
    from numbamr import lowering
    jf = nm.jit(dynamic=True, split=4)(lambda x: x.sum(axis=-1))
    for n in (3, 5):
        lowered = jf.lower(np.ones((n, 4096), np.float32), target="sm_90")
        assert not lowered.generic and lowered.kernels[0].layout.split == 4
    assert all(v.layout.split == 1 and not v.layout.persistent
               for v in lowering._GENERIC_LOWERED.values())


@pytest.mark.parametrize("shapes", [[(6, 64), (12, 64), (7, 64)], [(3, 5, 64), (4, 5, 64)]])
def test_outputs_of_one_value_a_row_name_no_row_count(shapes):
    """Per-row statistics (layernorm's mean and variance, reshaped to one value a row) are
    stored at the row's own index, so the generic kernel's code is the same for every row
    count, and it computes what NumPy does."""
    fn = nm.jit(dynamic=True)(layernorm_stats)
    rng = np.random.default_rng(5)
    codes = set()
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        codes |= {code_text(k.source) for k in fn.lower(x, target="sm_90").kernels}
        check_outputs(fn(x), *reference(layernorm_stats, x), rtol=1e-5)
    assert len(codes) == 1
