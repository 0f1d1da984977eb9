"""NumPy array constants inside a jitted function (numbamr/constant.py): those whose values
follow from their indices (np.arange and what NumPy builds from it, masks that compare a
position with thresholds affine in the other indices, two values laid out as such a mask)
are computed by the kernel, bit for bit; a constant with one value is a broadcast scalar;
any other is refused at the user's line."""
import numpy as np
import pytest

import numbamr as nm
from helpers import check, to_host


def _through_kernel(c):
    """A function returning constant ``c`` as the kernel computes it (broadcast to x)."""
    def fn(x):
        return np.where(x == x, c, c)
    return fn


COMPUTED = {
    "arange": np.arange(37),
    "column": np.arange(5)[:, None],
    "grid": np.arange(5)[:, None] * 1000 + np.arange(37),
    "negative_steps": np.arange(0, -3 * 37, -3) - np.arange(5)[:, None] * 7,
    "uint8": np.arange(37, dtype=np.uint8)[::-1].copy(),
    "int64_offset": np.arange(37, dtype=np.int64) * (2 ** 40) + 2 ** 62,
    "float32_steps": np.arange(37, dtype=np.float32) * np.float32(0.1) + np.float32(-1.5),
    "float64_arange": np.arange(0.0, 3.7, 0.1),
    "float64_down": np.arange(0, -37, -1.0),          # 0.0 + -0.0: a positive zero first
    "float16": np.arange(37, dtype=np.float16) * np.float16(0.25),
    "ones": np.ones((5, 37), np.float32),
    "bools": np.full(37, True),
    "broadcast_row": np.broadcast_to(np.arange(37.0), (5, 37)),
    # two values laid out as a mask
    "eye": np.eye(5, 37),
    "additive_causal": np.triu(np.full((5, 37), -np.inf, np.float32), 1),
    "int_prefix": np.where(np.arange(37) < 20, 3, 7).astype(np.int16),
    "signed_zeros": np.where(np.arange(37) < 20, 0.0, -0.0),
}


@pytest.mark.parametrize("name", COMPUTED)
def test_index_rule_constants_are_computed_bit_for_bit(name):
    c = COMPUTED[name]
    x = np.zeros((5, 37), np.float32)
    fn = _through_kernel(c)
    got = to_host(nm.jit(fn)(x))
    want = fn(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(f"u{got.itemsize}") if got.dtype.kind == "f" else got,
                          want.view(f"u{want.itemsize}") if want.dtype.kind == "f" else want)


@pytest.mark.parametrize("name", COMPUTED)
def test_index_rule_constants_read_no_memory(name):
    """The graph's only input is x, and the kernel's only arrays are x and the output."""
    x = np.zeros((5, 37), np.float32)
    lowered = nm.jit(_through_kernel(COMPUTED[name])).lower(x)
    assert lowered.graph_text.count("INPUT") == 1
    (k,) = lowered.kernels
    assert len([p for p in k.program.params if p[1] != "scalar"]) == 2


MASKS = {
    "padding": np.arange(24) < 17,
    "one_hot": np.arange(24) == 5,
    "all_but_one": np.broadcast_to(np.arange(24) != 3, (6, 24)),
    "causal": np.arange(24) <= np.arange(6)[:, None] * 4,
    "tril": np.tril(np.ones((6, 24), bool)),
    "triu": np.triu(np.ones((6, 24), bool), 2),
    "band": np.abs(np.arange(24) - np.arange(6)[:, None]) < 3,        # clipped at the ends
    "band_wide": np.abs(np.arange(24) - np.arange(6)[:, None] * 4) <= 5,
    "causal_tall": np.arange(24) <= np.arange(6)[:, None] - 3,        # empty first rows
    "rows": np.broadcast_to((np.arange(6) >= 2)[:, None], (6, 24)),
    "window_3d": np.broadcast_to(np.arange(24) < np.arange(6)[:, None] * 5 - 3, (2, 6, 24)),
}


@pytest.mark.parametrize("name", MASKS)
def test_mask_constants_are_computed_exactly(name):
    """Bool constants that are comparisons of a position with per-row thresholds affine in
    the other indices (clipped to the row): the same bools, from no memory; a masked softmax
    over them matches NumPy (where= and np.where take them)."""
    m = MASKS[name]
    x = np.random.default_rng(3).standard_normal(m.shape).astype(np.float32)
    fn = _through_kernel(m)
    lowered = nm.jit(fn).lower(x)
    assert lowered.graph_text.count("INPUT") == 1
    assert np.array_equal(to_host(nm.jit(fn)(x)), fn(x))

    def masked_softmax(x):
        top = x.max(axis=-1, keepdims=True, where=m, initial=-np.inf)
        e = np.where(m, np.exp(x - top), 0)
        return e / e.sum(axis=-1, keepdims=True)
    check(masked_softmax, x)


def test_an_additive_causal_mask_softmax_reads_only_the_scores():
    def fn(x):
        s = x + np.triu(np.full(x.shape, -np.inf, np.float32), 1)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    x = np.random.default_rng(4).standard_normal((40, 40)).astype(np.float32)
    lowered = nm.jit(fn).lower(x)
    assert len(lowered.kernels) == 1 and lowered.graph_text.count("INPUT") == 1
    check(fn, x)


def _cross_entropy(logits, labels):
    top = logits.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(logits - top).sum(axis=-1)) + top[:, 0]
    picked = np.where(np.arange(logits.shape[-1]) == labels[:, None], logits, 0).sum(axis=-1)
    return lse - picked


def _expected_position(x):
    p = np.exp(x - x.max(axis=-1, keepdims=True))
    return (p * np.arange(x.shape[-1])).sum(axis=-1) / p.sum(axis=-1)


@pytest.mark.parametrize("rows,cols", [(3, 31), (8, 300), (2, 1025)])
def test_one_hot_cross_entropy_is_one_kernel_and_matches_numpy(rows, cols):
    rng = np.random.default_rng(rows + cols)
    logits = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    labels = rng.integers(0, cols, rows)
    fn = nm.jit(_cross_entropy)
    assert len(fn.lower(logits, labels).kernels) == 1
    check(_cross_entropy, logits, labels, jitted=fn)


def test_positions_weighted_by_a_softmax():
    x = np.random.default_rng(2).standard_normal((6, 200)).astype(np.float32)
    check(_expected_position, x, rtol=1e-5)


@pytest.mark.parametrize("c", [
    np.array([1.0, 3.0, 2.0, 5.0], np.float32),             # no index rule
    np.arange(4) % 2 == 0,                                  # bools that vary
    np.array([1.0, 2.0, 4.0, 8.0], np.float32),             # geometric
    np.array([np.inf, np.inf, np.nan, 1.0]),
    np.array([2 ** 63 - 1, 0, -(2 ** 63) + 1, 0]),          # int64 sums would overflow
    np.broadcast_to(np.arange(4) % 2 == 0, (3, 4)),         # a checkerboard row
    np.array([1.0, 2.0, 1.0, 2.0]),                         # two values, alternating
    np.array([True, False, False, True]),                   # two runs
], ids=["table", "bools", "geometric", "specials", "overflow", "alternating", "two-values",
        "two-runs"])
def test_other_array_constants_are_refused_at_the_users_line(c):
    def fn(x):
        return x + c
    with pytest.raises(nm.TraceError, match=r"constant of shape .*pass it as an argument") \
            as info:
        nm.jit(fn).lower(np.zeros((2, 4), np.float32))
    assert "return x + c" in str(info.value)


@pytest.mark.slow
@pytest.mark.ptx
@pytest.mark.parametrize("cols", [1000, 32768])
def test_one_hot_cross_entropy_compiles_with_vector_loads_and_no_spills(cols):
    from test_ptx import lower_for_gpu, compile_report
    inputs = (np.empty((4096, cols), np.float32), np.empty(4096, np.int64))
    kernels = lower_for_gpu(_cross_entropy, inputs).kernels
    assert len(kernels) == 1
    (r,) = compile_report(kernels)
    assert r["ok"], r["error"]
    assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, r
    assert 16 in r["vector_bytes"], r["vector_bytes"]


@pytest.mark.gpu
@pytest.mark.parametrize("rows,cols", [(512, 32000), (4096, 1000), (8, 131072)])
def test_one_hot_cross_entropy_on_gpu(rows, cols):
    rng = np.random.default_rng(cols)
    logits = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
    labels = rng.integers(0, cols, rows)
    check(_cross_entropy, logits, labels)
    check(_expected_position, logits)
