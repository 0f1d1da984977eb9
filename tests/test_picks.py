"""Picks: ``np.where(np.arange(n) == k[..., None], y, 0).sum(-1)`` (cross-entropy's label
term) is lowered as one range test a chunk, the element added only by the thread whose chunk
holds position ``k`` (numbamr/lowering/linearize/picks.py).

Simulator tests check the picked value bit for bit against NumPy indexing, for keys at every
position of short rows, at the chunk and edge boundaries of long ones, and out of range
(negative, the row's length, far past it), under the layouts that change how a row is
walked; lowering tests check that no per-element compare is left.
"""
import numpy as np
import pytest

import numbamr as nm
from helpers import check, to_host
from numbamr.ops import Op


def picked(x, k):
    return np.where(np.arange(x.shape[-1]) == k[..., None], x, 0).sum(axis=-1)


def picked_swapped(x, k):
    return np.where(k[..., None] == np.arange(x.shape[-1]), x, 0).sum(axis=-1)


def cross_entropy(x, k):
    y = x.astype(np.float32)
    m = y.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(y - m).sum(axis=-1)) + m[..., 0]
    return lse - np.where(np.arange(y.shape[-1]) == k[..., None], y, 0).sum(axis=-1)


def _expected(x, k):
    """The element at each row's key, 0 where the key is outside the row (NumPy indexing)."""
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    keys = k.reshape(-1).astype(np.int64)
    inside = (keys >= 0) & (keys < n)
    out = np.zeros(rows.shape[0], x.dtype)
    out[inside] = rows[inside, keys[inside]]
    return out.reshape(k.shape) + x.dtype.type(0)      # (-0.0 + 0 is 0.0, as the sum's is)


def _keys(n, dtype, rng, rows):
    """Keys at every position for short rows, else the ends, chunk boundaries and a sample,
    then keys out of range; as many rows as keys (more rows repeat them)."""
    inside = np.arange(n) if n <= 64 else np.unique(np.concatenate([
        [0, 1, 7, 8, 255, 256, 1023, 1024, n - 9, n - 8, n - 1], rng.integers(0, n, 20)]))
    inside = inside[(inside >= 0) & (inside < n)]
    info = np.iinfo(dtype)
    outside = [-1, n, n + 3, info.min, info.max] if info.min < 0 else [n, n + 3, info.max]
    keys = np.concatenate([inside, outside]).astype(dtype)
    return np.resize(keys, max(rows, keys.size))


# the default layout is every test's; these walk a row otherwise
LAYOUTS = [dict(upcast=0, unroll=2), dict(split=3), dict(upcast=0, split=2),
           dict(rows_per_block=2, threads_per_row=64), dict(upcast=1, stage=49152)]


def _check_picks(n, key_dtype, options):
    rng = np.random.default_rng(n)
    k = _keys(n, key_dtype, rng, 8)
    x = rng.standard_normal((k.size, n)).astype(np.float32)
    x[:, ::3] = -0.0                # picked negative zeros come out as the sum's 0.0
    x[:, 1::7] = np.nan             # NaNs elsewhere in a row are not picked
    for fn in (picked, picked_swapped):
        got = to_host(nm.jit(**options)(fn)(x, k))
        want = _expected(x, k)
        assert got.dtype == want.dtype
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), fn.__name__


@pytest.mark.parametrize("n", [1, 5, 33, 1027])
@pytest.mark.parametrize("key_dtype", [np.int64, np.int32, np.uint32])
def test_a_pick_is_the_element_at_the_key(n, key_dtype):
    _check_picks(n, key_dtype, {})


@pytest.mark.slow
@pytest.mark.parametrize("options", LAYOUTS, ids=lambda o: ",".join(
    f"{k}{v}" for k, v in o.items()))
@pytest.mark.parametrize("n", [5, 1027, 4100])
def test_a_pick_is_the_element_at_the_key_under_every_layout(n, options):
    _check_picks(n, np.int64, options)


@pytest.mark.parametrize("shape", [(3, 4, 1031), (2, 50257 // 7)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_cross_entropy_with_picks_matches_float64_numpy(shape, dtype):
    rng = np.random.default_rng(shape[-1])
    x = (3 * rng.standard_normal(shape)).astype(dtype)
    k = rng.integers(-1, shape[-1] + 1, shape[:-1])
    check(cross_entropy, x, k, rtol=1e-5 if dtype != np.float16 else 2e-3)


def _per_element_compares(program):
    """EQ instructions outside a pick's range test (one would be a per-element compare)."""
    inside, count = [], 0
    for ins in program.instrs:
        if ins.op == "IF":
            inside.append(str(ins.arg).startswith("pick_in"))
        elif ins.op == "ENDIF":
            inside.pop()
        elif ins.op == "ALU" and ins.arg is Op.EQ and not any(inside):
            count += 1
    return count


@pytest.mark.parametrize("shape,dtype", [((2048, 50257), np.float16), ((16, 128256), np.float32),
                                         ((64, 4096), np.float32), ((4, 3, 1031), np.float32)])
def test_a_pick_leaves_no_per_element_compare(monkeypatch, shape, dtype):
    """Lowered for an sm_90 GPU, the label term tests each chunk once: every compare of a
    position with the key sits inside a chunk's range test (rows held whole, split across
    a cluster, or of odd length with scalar edges)."""
    from numbamr.runtime import device
    from test_ptx import lower_for_gpu
    monkeypatch.setattr(device, "arch", lambda: (9, 0))
    x, k = np.zeros(shape, dtype), np.zeros(shape[:-1], np.int64)
    (kern,) = lower_for_gpu(nm.jit(cross_entropy), (x, k)).kernels
    assert "pick_in" in kern.source
    assert _per_element_compares(kern.program) == 0


def test_a_shifted_position_is_no_pick():
    """``arange + 1 == k`` is not the row's own position: summed element by element, still
    the element before the key."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 40)).astype(np.float32)
    k = np.array([0, 1, 20, 39, 40, 41])

    def shifted(x, k):
        return np.where(np.arange(x.shape[-1]) + 1 == k[..., None], x, 0).sum(axis=-1)

    got = to_host(nm.jit(shifted)(x, k))
    assert np.array_equal(got, _expected(x, k - 1))


@pytest.mark.gpu
@pytest.mark.parametrize("shape,dtype", [((4, 512, 50257), np.float16), ((16, 128256), np.float32),
                                         ((300, 1031), np.float32)])
def test_cross_entropy_with_picks_on_gpu(shape, dtype):
    """At model sizes (a vocabulary of 50257 in half precision, rows split across a
    cluster), against float64 NumPy, keys out of range included."""
    rng = np.random.default_rng(shape[-1])
    x = (3 * rng.standard_normal(shape)).astype(dtype)
    k = rng.integers(-1, shape[-1] + 1, shape[:-1])
    k.reshape(-1)[:2] = (0, shape[-1] - 1)
    check(cross_entropy, x, k, rtol=1e-5 if dtype != np.float16 else 2e-3)
