"""NumPy functions numbamr composes from its ops (numbamr/composite.py): rounding, signbit,
products with a vector, norms, weighted averages, the *_like constructors, nanprod, nanvar,
nanstd, and NumPy functions jitted directly. Each against NumPy on the same inputs (dtype,
shape) and on float64 copies (values); kernels run in the simulator without a GPU.
"""

import numpy as np
import pytest

import numbamr as nm
from helpers import check, to_host


def rows(*shape, dtype=np.float32, seed=0, scale=3.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


# ---- rounding: bit for bit NumPy's, zeros' signs included ------------------------------
TIES = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.3, 0.0, -0.0, np.nan, np.inf, -np.inf,
        1e30, -7.25, 123.456, 0.125, -0.0625, 2.675, 1e-8]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("decimals", [0, 1, 2, 3, -1, -2])
def test_round_is_numpys_bit_for_bit(dtype, decimals):
    with np.errstate(all="ignore"):
        x = np.concatenate([np.array(TIES), rows(40, dtype=np.float64, seed=1)]).astype(dtype)
        want = np.round(x, decimals)
    got = to_host(nm.jit(lambda a: np.round(a, decimals))(x))
    assert got.dtype == want.dtype
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
    assert same.all(), (x[~same], got[~same], want[~same])


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int32, np.bool_])
def test_rint_and_signbit_follow_numpys_dtypes(dtype):
    x = np.array(TIES[:10] + [3, -4], np.float64)
    x = (x * 10).astype(dtype) if dtype != np.bool_ else x > 0
    for fn in (np.rint, np.signbit, lambda a: np.round(a)):
        with np.errstate(all="ignore"):
            want = fn(x)
        got = to_host(nm.jit(fn)(x))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64])
def test_integers_round_to_negative_decimals_as_numpys(dtype):
    x = np.array([15, 25, 35, 14, 16, 0, 5, 95, 125, 127, 100], dtype)
    if np.dtype(dtype).kind == "i":
        x = np.concatenate([x, -x])
    for d in (-1, -2, 0, 2):
        want = np.round(x, d)
        got = to_host(nm.jit(lambda a: np.round(a, d))(x))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


# ---- products with a vector ------------------------------------------------------------
M, K = 6, 300                  # rows of 300: more than one warp, not a multiple of 32
PRODUCTS = [
    ("matvec", lambda m, v, u: m @ v),
    ("vecmat", lambda m, v, u: u @ m),
    ("np_matmul", lambda m, v, u: np.matmul(m, v)),
    ("dot", lambda m, v, u: np.dot(m, v)),
    ("dot_vectors", lambda m, v, u: np.dot(v, v)),
    ("inner", lambda m, v, u: np.inner(m, v)),
    ("batched", lambda m, v, u: m.reshape(2, 3, K) @ v),
    ("vec_batched", lambda m, v, u: u[:3] @ m.reshape(2, 3, K)),
    ("softmax_weighted", lambda m, v, u: np.exp(m - m.max(axis=1, keepdims=True)) @ v),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.bool_])
@pytest.mark.parametrize("name, fn", PRODUCTS, ids=[p[0] for p in PRODUCTS])
def test_products_with_a_vector_are_numpys(name, fn, dtype):
    if dtype == np.bool_ and name == "softmax_weighted":
        pytest.skip("np.exp of bools is a float16 product")
    m, v, u = rows(M, K, seed=2), rows(K, seed=3), rows(M, seed=4)
    if dtype == np.bool_:
        m, v, u = m > 0, v > 0, u > 0
    else:
        m, v, u = (a.astype(dtype) for a in (m, v, u))
    check(fn, m, v, u, rtol=4e-3 if dtype == np.float16 else 1e-5)


EINSUMS = ["ij->i", "ij", "ji", "ij->ji", "ij->", "ij,j->i", "ij,j", "i,ij->j", "ij,ij->i",
           "ij,ij", "kij,ij->ki", "kij,j->ik", "i,j->ij", "kij,kij->k", "ij,j->", "i,i"]


def _einsum_operands(subscripts, m, v, u, t):
    by_subs = {"ij": m, "ji": m, "j": v, "i": u, "kij": t}
    return [by_subs[s] for s in subscripts.split("->")[0].split(",")]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.bool_])
@pytest.mark.parametrize("subscripts", EINSUMS)
def test_einsums_are_numpys(subscripts, dtype):
    """NumPy's einsum (its dtype: int8 stays int8, wrapping as NumPy's does; bools are
    logical), operands broadcast over every letter, summed over those the output lacks."""
    m, v, u, t = rows(M, K, seed=13), rows(K, seed=14), rows(M, seed=15), rows(2, M, K, seed=16)
    if subscripts == "i,i":
        v = u
    ops = [a > 0 if dtype == np.bool_ else a.astype(dtype)
           for a in _einsum_operands(subscripts, m, v, u, t)]
    check(lambda *a: np.einsum(subscripts, *a), *ops,
          rtol=4e-3 if dtype == np.float16 else 1e-5)


NUMPY2_PRODUCTS = [
    ("vecdot", lambda m, v, u, t: np.vecdot(m, v)),
    ("vecdot_axis", lambda m, v, u, t: np.vecdot(t, t, axis=1)),
    ("linalg_vecdot", lambda m, v, u, t: np.linalg.vecdot(t, m)),
    ("matvec", lambda m, v, u, t: np.matvec(t, v)),
    ("vecmat", lambda m, v, u, t: np.vecmat(u, t)),
    ("vector_norm", lambda m, v, u, t: np.linalg.vector_norm(t, axis=(0, 2), ord=3)),
    ("vector_norm_all", lambda m, v, u, t: np.linalg.vector_norm(m, keepdims=True)),
    ("matrix_norm", lambda m, v, u, t: np.linalg.matrix_norm(t, ord=np.inf)),
]


@pytest.mark.skipif(not hasattr(np, "matvec"), reason="NumPy 2.2 or newer has np.matvec")
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_])
@pytest.mark.parametrize("name, fn", NUMPY2_PRODUCTS, ids=[p[0] for p in NUMPY2_PRODUCTS])
def test_numpy2_vector_functions_are_numpys(name, fn, dtype):
    m, v, u, t = rows(M, K, seed=17), rows(K, seed=18), rows(M, seed=19), rows(2, M, K, seed=20)
    if dtype == np.bool_:
        m, v, u, t = m > 0, v > 0, u > 0, t > 0
    else:
        m, v, u, t = (a.astype(dtype) for a in (m, v, u, t))
    check(fn, m, v, u, t)


def test_a_matrix_vector_product_is_one_kernel():
    m, v = rows(64, 256), rows(256)
    assert len(nm.jit(lambda m, v: m @ v).lower(m, v).kernels) == 1
    assert len(nm.jit(lambda m, v: v @ m.T).lower(m, v).kernels) == 1
    assert len(nm.jit(lambda m, v: np.einsum("ij,j->i", m, v)).lower(m, v).kernels) == 1


# ---- norms -----------------------------------------------------------------------------
VECTOR_ORDS = [None, 1, 2, np.inf, -np.inf, 0, 3, -1.5, 0.5]
MATRIX_ORDS = [None, "fro", 1, -1, np.inf, -np.inf]


@pytest.mark.parametrize("ord", VECTOR_ORDS, ids=str)
@pytest.mark.parametrize("axis, keepdims", [(1, False), (0, True), (-1, True)])
def test_vector_norms_are_numpys(ord, axis, keepdims):
    x = rows(7, 130, seed=5)
    x[2, :40] = 0.0
    check(lambda x: np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("ord", MATRIX_ORDS, ids=str)
@pytest.mark.parametrize("axis, keepdims", [(None, False), ((2, 1), True), ((0, 2), False)])
def test_matrix_norms_are_numpys(ord, axis, keepdims):
    x = rows(3, 5, 70, seed=6)
    if axis is None:
        x = x[0]
    check(lambda x: np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.bool_])
def test_norms_of_other_dtypes_are_numpys(dtype):
    x = rows(4, 90, seed=7)
    x = x > 0 if dtype == np.bool_ else x.astype(dtype)
    check(lambda x: (np.linalg.norm(x), np.linalg.norm(x, axis=0), np.linalg.norm(x, 1)),
          x, rtol=4e-3 if dtype == np.float16 else 1e-5)


# ---- averages, constructors, NaN-skipping reductions -----------------------------------
AVERAGES = [
    ("plain", lambda x, w: np.average(x, axis=1)),
    ("all", lambda x, w: np.average(x)),
    ("weights_1d", lambda x, w: np.average(x, axis=1, weights=w)),
    ("weights_same_shape", lambda x, w: np.average(x, axis=0, weights=np.abs(x))),
    ("returned", lambda x, w: np.average(x, axis=-1, weights=w, returned=True)),
    ("returned_plain", lambda x, w: np.average(x, axis=0, returned=True)),
    ("keepdims", lambda x, w: np.average(x, axis=1, weights=w, keepdims=True)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
@pytest.mark.parametrize("name, fn", AVERAGES, ids=[a[0] for a in AVERAGES])
def test_averages_are_numpys(name, fn, dtype):
    x = rows(5, 140, seed=8).astype(dtype)
    w = np.abs(rows(140, seed=9)) + 0.5
    check(fn, x, w, rtol=4e-3 if dtype == np.float16 else 1e-5)


def test_like_constructors_are_numpys():
    x = rows(3, 50, seed=10)
    i = (x * 3).astype(np.int16)
    check(lambda x, i: (np.zeros_like(x) + x, np.ones_like(i), np.full_like(x, 2.5) * x,
                        np.full_like(i, 7.9), np.ones_like(x, dtype=np.int8),
                        np.zeros_like(x, shape=(2, 3)), np.full_like(x, x[0]),
                        np.empty_like(i) * 0 + i), x, i)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32])
def test_nan_prod_var_std_are_numpys(dtype):
    x = rows(6, 120, seed=11, scale=1.0).astype(dtype)
    if dtype != np.int32:
        x[1, ::3] = np.nan
        x[2] = np.nan                   # every value NaN: NaN, as NumPy gives
        x[3, 1:] = np.nan               # one value left: a variance of 0, NaN with ddof=1
    check(lambda x: (np.nanprod(x[:, :12], axis=1), np.nanvar(x, axis=1),
                     np.nanstd(x, axis=1, ddof=1), np.nanvar(x, axis=0, keepdims=True),
                     np.nanstd(x)), x, rtol=4e-3 if dtype == np.float16 else 1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_nan_reductions_with_where_and_initial_are_numpys(dtype):
    """NaN-skipping reductions with NumPy's where= and initial=: with an initial, rows of
    nothing but NaN (or masked values) give it; without, nanmax of such a row is NaN."""
    x = rows(6, 120, seed=21, scale=1.0).astype(dtype)
    m = rows(6, 120, seed=22) > -1.0
    if dtype != np.int32:
        x[1, ::3] = np.nan
        x[2] = np.nan
    m[3] = False
    check(lambda x, m: (np.nansum(x, axis=1, where=m, initial=2.5),
                        np.nanmean(x, axis=1, where=m),
                        np.nanmax(x, axis=1, initial=-4.0),
                        np.nanmin(x, axis=0, where=m, initial=4.0),
                        np.nanmax(x, axis=1),
                        np.nanprod(x[:, :10], axis=1, where=m[:, :10], initial=0.5)),
          x, m, rtol=4e-3 if dtype == np.float16 else 1e-5)


@pytest.mark.parametrize("fn", [np.exp, np.hypot, np.signbit, np.sum, np.max, np.nanmax,
                                np.std, np.linalg.norm, np.average, np.round],
                         ids=lambda f: f.__name__)
def test_numpy_functions_jitted_directly_are_numpys(fn):
    x = rows(4, 60, seed=12)
    args = (x, x.T.copy().T) if isinstance(fn, np.ufunc) and fn.nin == 2 else (x,)
    check(fn, *args)
    if not isinstance(fn, np.ufunc):
        check(lambda x: fn(x, 1), x)


@pytest.mark.slow
@pytest.mark.ptx
def test_composites_compile_for_sm90_without_spills():
    from test_ptx import compile_report, lower_for_gpu
    x, v = rows(64, 1024), rows(1024)

    def composites(x, v):
        return (np.round(x, 2), np.signbit(x), x @ v, np.linalg.norm(x, axis=1),
                np.linalg.norm(x, np.inf), np.average(x, axis=1, weights=v), np.nanstd(x, axis=1),
                np.nanprod(x, axis=1))
    kernels = lower_for_gpu(composites, (x, v)).kernels
    report = compile_report(kernels)
    assert all(r["ok"] and r["spill_bytes"] == 0 for r in report), report
