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
