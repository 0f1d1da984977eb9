"""Tracing semantics, each checked against NumPy on the same inputs.

numbamr's result must have NumPy's shape and dtype (NumPy run on the same inputs) and NumPy's
values (NumPy run on float64 copies of float inputs). Shapes stay tiny: kernels run in numba's
CPU simulator when there is no GPU.
"""
import math
import time
import warnings

import numpy as np
import pytest

import numbamr as nm
from numbamr.errors import VerifyError
from numbamr.ops import Op, ReduceKind
from helpers import check, check_outputs, to_host


def f32(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def pos32(*shape, seed=0):
    """Positive float32 values (for log, sqrt, ...)."""
    return (np.abs(f32(*shape, seed=seed)) + 0.25).astype(np.float32)


def ints(*shape, dtype=np.int32, lo=-9, hi=10, seed=0):
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


def dtype_of(a):
    return to_host(a).dtype


# ==========================================================================================
# numpy dtype rules
# ==========================================================================================

X32 = f32(3, 40, seed=1)
Y32 = f32(3, 40, seed=2)
I32 = ints(3, 40, seed=3)
J32 = ints(3, 40, lo=1, hi=7, seed=4)          # no zeros: a divisor

DTYPE_CASES = [
    # (id, fn, inputs, the dtype numpy gives)
    ("f32*pyfloat", lambda x: x * 2.5 + 0.1, (X32,), np.float32),
    ("f32+pyint", lambda x: x + 3, (X32,), np.float32),
    ("pyfloat-f32", lambda x: 1.5 - x, (X32,), np.float32),
    ("f32/pyint", lambda x: x / 3, (X32,), np.float32),
    ("i32+pyint", lambda x: x + 7, (I32,), np.int32),
    ("i32*pyint-pyint", lambda x: x * 3 - 2, (I32,), np.int32),
    ("i32+pyfloat", lambda x: x + 1.5, (I32,), np.float64),
    ("i32+f32", lambda x, y: x + y, (I32, Y32), np.float64),
    ("f32*i32", lambda x, y: x * y, (X32, I32), np.float64),
    ("i32/i32", lambda x, y: x / y, (I32, J32), np.float64),
    ("i32/pyint", lambda x: x / 4, (I32,), np.float64),
    ("i32//pyint", lambda x: x // 4, (I32,), np.int32),
    ("i32%pyint", lambda x: x % 4, (I32,), np.int32),
    ("i32//i32", lambda x, y: x // y, (I32, J32), np.int32),
    ("i32%neg_i32", lambda x, y: x % (-y), (I32, J32), np.int32),
    ("f32//pyfloat", lambda x: x // 0.5, (X32,), np.float32),
    ("f32%pyfloat", lambda x: x % 0.7, (X32,), np.float32),
    ("i32**2", lambda x: x ** 2, (I32,), np.int32),
    ("f32>pyfloat", lambda x: x > 0.5, (X32,), np.bool_),
    ("i32==pyint", lambda x: x == 3, (I32,), np.bool_),
    ("f32<=i32", lambda x, y: x <= y, (X32, I32), np.bool_),
    ("f32!=f32", lambda x, y: x != y, (X32, Y32), np.bool_),
    ("i32.sum()", lambda x: x.sum(), (I32,), np.int64),
    ("i32.sum(1)", lambda x: x.sum(axis=1), (I32,), np.int64),
    ("i32.mean()", lambda x: x.mean(), (I32,), np.float64),
    ("i32.mean(1)", lambda x: x.mean(axis=1), (I32,), np.float64),
    ("i32.var(1)", lambda x: x.var(axis=1), (I32,), np.float64),
    ("i32.max(1)", lambda x: x.max(axis=1), (I32,), np.int32),
    ("i32.argmax(1)", lambda x: x.argmax(axis=1), (I32,), np.int64),
    ("bool.sum()", lambda x: (x > 0).sum(), (X32,), np.int64),
    ("bool.sum(1)", lambda x: (x > 0).sum(axis=1), (X32,), np.int64),
    ("bool.mean(1)", lambda x: (x > 0).mean(axis=1), (X32,), np.float64),
    ("bool+bool", lambda x, y: (x > 0) + (y > 0), (X32, Y32), np.bool_),
    ("bool*bool", lambda x, y: (x > 0) * (y > 0), (X32, Y32), np.bool_),
    ("bool+pyint", lambda x: (x > 0) + 1, (X32,), np.int64),
    ("bool&|~", lambda x, y: (x > 0) & ~(y > 0) | (x < -1), (X32, Y32), np.bool_),
    ("u8+i8", lambda x, y: x + y, (ints(3, 40, dtype=np.uint8, lo=0, hi=100, seed=5),
                                   ints(3, 40, dtype=np.int8, seed=6)), np.int16),
    ("u8.sum(1)", lambda x: x.sum(axis=1), (ints(3, 40, dtype=np.uint8, lo=0, hi=250, seed=7),),
     np.uint64),
    ("i8.sum(1)", lambda x: x.sum(axis=1), (ints(3, 40, dtype=np.int8, seed=8),), np.int64),
    ("i32*np.float32", lambda x: x * np.float32(2), (I32,), np.float64),
    ("f32*np.float64", lambda x: x * np.float64(2), (X32,), np.float64),
    ("f32*np.float32", lambda x: x * np.float32(2), (X32,), np.float32),
    ("exp(i32)", lambda x: np.exp(x / 4), (I32,), np.float64),
    ("sqrt(i16)", lambda x: np.sqrt(x), (ints(3, 40, dtype=np.int16, lo=0, seed=9),), np.float32),
    ("f32.astype(i32)", lambda x: (x * 4).astype(np.int32), (X32,), np.int32),
    ("i32.astype(f32)", lambda x: x.astype(np.float32) / 3, (I32,), np.float32),
    ("f64+f32", lambda x, y: x + y, (X32.astype(np.float64), Y32), np.float64),
    ("f32.sum(dtype=f64)", lambda x: x.sum(axis=1, dtype=np.float64), (X32,), np.float64),
    ("f32.mean(dtype=f64)", lambda x: np.mean(x, axis=1, dtype=np.float64), (X32,), np.float64),
    ("bool.sum(dtype=i32)", lambda x: (x > 0).sum(axis=1, dtype=np.int32), (X32,), np.int32),
    ("square(bool)", lambda x: np.square(x > 0), (X32,), np.int8),
    ("reciprocal(bool)", lambda x: np.reciprocal(x > 0.5) * 3, (X32,), np.int8),
    ("reciprocal(i32)", lambda x: np.reciprocal(x),      # nonzero: 1/0 is undefined
     (np.where(I32 % 4 == 2, 1, I32 % 4 - 2).astype(np.int32),), np.int32),
    ("log10(f32)", lambda x: np.log10(np.abs(x) + 1), (X32,), np.float32),
]


@pytest.mark.parametrize("fn,inputs,expected", [
    pytest.param(*c[1:4], id=c[0], marks=c[4:]) for c in DTYPE_CASES])
def test_numpy_dtype_rules(fn, inputs, expected):
    got = check(fn, *inputs)
    assert dtype_of(got) == np.dtype(expected)


def test_float16_stays_float16():
    h = f32(3, 40, seed=10).astype(np.float16)
    got = check(lambda x: x * 2 + 1, h, rtol=2e-3)
    assert dtype_of(got) == np.float16
    got = check(lambda x: x.max(axis=1), h, rtol=2e-3)
    assert dtype_of(got) == np.float16


def test_bool_sum_counts():
    x = f32(4, 33, seed=11)
    got = nm.jit(lambda x: ((x > 0).sum(axis=1), (x > 0).sum(axis=1, keepdims=True)))(x)
    np.testing.assert_array_equal(got[0], np.count_nonzero(x > 0, axis=1))
    assert dtype_of(got[0]) == np.int64 and got[1].shape == (4, 1)


# ==========================================================================================
# numpy ufuncs (__array_ufunc__), numpy functions (__array_function__), numbamr.*
# ==========================================================================================

P = pos32(3, 40, seed=12)      # positive
S = f32(3, 40, seed=13)        # either sign

UFUNC_CASES = [
    ("exp", lambda p, s: np.exp(s)),
    ("exp2", lambda p, s: np.exp2(s)),
    ("expm1", lambda p, s: np.expm1(s)),
    ("log", lambda p, s: np.log(p)),
    ("log2", lambda p, s: np.log2(p)),
    ("log10", lambda p, s: np.log10(p)),
    ("log1p", lambda p, s: np.log1p(p)),
    ("sqrt", lambda p, s: np.sqrt(p)),
    ("abs", lambda p, s: np.abs(s)),
    ("absolute", lambda p, s: np.absolute(s)),
    ("builtin_abs", lambda p, s: abs(s)),
    ("negative", lambda p, s: np.negative(s)),
    ("positive", lambda p, s: np.positive(s) + 0),
    ("tanh", lambda p, s: np.tanh(s)),
    ("sin", lambda p, s: np.sin(s)),
    ("cos", lambda p, s: np.cos(s)),
    ("square", lambda p, s: np.square(s)),
    ("reciprocal", lambda p, s: np.reciprocal(p)),
    ("floor", lambda p, s: np.floor(s * 3)),
    ("ceil", lambda p, s: np.ceil(s * 3)),
    ("sign", lambda p, s: np.sign(s)),
    ("maximum", lambda p, s: np.maximum(p, s)),
    ("minimum", lambda p, s: np.minimum(p, s)),
    ("maximum_scalar", lambda p, s: np.maximum(s, 0.0)),
    ("add", lambda p, s: np.add(p, s)),
    ("subtract", lambda p, s: np.subtract(p, s)),
    ("multiply", lambda p, s: np.multiply(p, s)),
    ("divide", lambda p, s: np.divide(s, p)),
    ("floor_divide", lambda p, s: np.floor_divide(s, p)),
    ("remainder", lambda p, s: np.remainder(s, p)),
    ("power", lambda p, s: np.power(p, s)),
    ("power_half", lambda p, s: p ** 0.5),
    ("power_scalar", lambda p, s: np.power(p, 1.5)),
    ("logaddexp", lambda p, s: np.logaddexp(p, s)),
    ("greater", lambda p, s: np.greater(p, s)),
    ("less_equal", lambda p, s: np.less_equal(s, 0.1)),
    ("equal", lambda p, s: np.equal(np.floor(s), 0)),
    ("logical_and", lambda p, s: np.logical_and(p > 1, s < 0)),
    ("logical_or", lambda p, s: np.logical_or(p > 1, s < 0)),
    ("logical_not", lambda p, s: np.logical_not(s < 0)),
    ("isnan", lambda p, s: np.isnan(np.log(s))),
    ("isfinite", lambda p, s: np.isfinite(np.log(s))),
    ("isinf", lambda p, s: np.isinf(np.log(np.maximum(s, 0)))),
    ("exp_dtype", lambda p, s: np.exp(s, dtype=np.float64)),
    ("softplus", lambda p, s: np.log1p(np.exp(-np.abs(s))) + np.maximum(s, 0)),
]


@pytest.mark.parametrize("fn", [c[1] for c in UFUNC_CASES], ids=[c[0] for c in UFUNC_CASES])
def test_numpy_ufunc(fn):
    check(fn, P, S)


def small_and_large(dtype):
    """Values from 1e-8 to 30 of both signs (where 1 + x rounds away most of a small x)."""
    mags = np.geomspace(1e-8, 30.0, 64)
    return np.concatenate([mags, -mags[mags < 0.9]]).astype(dtype)


@pytest.mark.parametrize("name", ["log1p", "expm1"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log1p_and_expm1_keep_small_arguments_accurate(name, dtype):
    """Every element within 4 ulps of its own float64 value, also where x is far below 1
    (log(1 + x) and exp(x) - 1 there keep none of x's digits below 1's ulp)."""
    fn = getattr(np, name)
    x = small_and_large(dtype)
    got = to_host(nm.jit(lambda a: fn(a))(x))
    want = fn(x.astype(np.float64))
    assert got.dtype == fn(x).dtype
    rel = np.abs(got.astype(np.float64) - want) / np.abs(want)
    assert rel.max() <= 4 * np.finfo(dtype).eps, x[np.argmax(rel)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_logaddexp_of_infinities_and_nan_is_numpys(dtype):
    a = np.array([np.inf, -np.inf, np.inf, -np.inf, np.nan, 1.0, 3.0, -2.0], dtype)
    b = np.array([np.inf, -np.inf, -np.inf, 2.0, 1.0, np.nan, 3.0, 5.0], dtype)
    with np.errstate(all="ignore"):
        want = np.logaddexp(a, b)
    got = to_host(nm.jit(lambda p, q: np.logaddexp(p, q))(a, b))
    np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps)
    got = to_host(nm.jit(lambda p: np.logaddexp(0.0, p))(a))       # a weak scalar first
    assert got.dtype == dtype
    with np.errstate(all="ignore"):
        want = np.logaddexp(0.0, a)
    np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps)


DIVMOD_A = [np.nan, -0.0, 0.0, -2.5, 3.0, np.inf, -np.inf, 1e-30, -7.0, 5.0, -5.0, 7.5, 1e7]
DIVMOD_B = [2.0, 0.0, -0.0, 2.0, -2.0, 3.0, 2.0, np.inf, np.inf, -np.inf, 0.0, 0.1, 0.7]


@pytest.mark.parametrize("name", ["floor_divide", "remainder", "sign"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_float_floor_divide_remainder_and_sign_are_numpys(name, dtype):
    """Bit for bit NumPy's (npy_divmod: the remainder from the exact fmod), zeros' signs,
    infinities and NaN included; and the remainders of many values by 0.1 and 0.7, where
    ``a - floor(a / b) * b`` lands off (and beyond b) for most of them."""
    fn = getattr(np, name)
    rng = np.random.default_rng(1)
    with np.errstate(all="ignore"):     # 1e7 is an infinity in float16
        a = np.concatenate([DIVMOD_A, rng.standard_normal(500) * 1000]).astype(dtype)
        b = np.concatenate([DIVMOD_B, np.resize([0.1, 0.7, -0.3, 3.0], 500)]).astype(dtype)
        want = fn(a, b) if name != "sign" else fn(a)
    jitted = nm.jit(lambda p, q: fn(p, q)) if name != "sign" else nm.jit(lambda p, q: fn(p))
    got = to_host(jitted(a, b))
    assert got.dtype == want.dtype
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
    assert same.all(), (a[~same][:4], b[~same][:4], got[~same][:4], want[~same][:4])


@pytest.mark.parametrize("n", [1, 2, 9])
def test_a_float_sum_of_negative_zeros_is_positive_zero(n):
    """NumPy starts a float sum from +0, also over an axis of one element."""
    x = np.full((3, n), -0.0, np.float32)
    got = nm.jit(lambda a: (a.sum(axis=1), a.sum(), a.mean(axis=1)))(x)
    for g, w in zip(map(to_host, got), (x.sum(axis=1), x.sum(), x.mean(axis=1))):
        assert np.array_equal(np.signbit(g), np.signbit(w)) and np.array_equal(g, w)


MORE_UNARY = ["sinh", "cosh", "tan", "arcsin", "arccos", "arctan", "arcsinh", "arccosh",
              "arctanh", "trunc", "deg2rad", "rad2deg", "radians", "degrees"]
MORE_BINARY = ["arctan2", "hypot", "fmod", "copysign", "fmax", "fmin", "heaviside"]
EDGE_A = [[np.nan, -0.0, 0.0, -2.5, 3.0, np.inf, -np.inf, 0.5],
          [1e-3, -0.99, 0.99, 1.0, -1.0, 2.0, 30.0, -40.0]]
EDGE_B = [[2.0, 0.0, -0.0, 2.0, -2.0, 3.0, np.nan, -1.0],
          [np.inf, 0.5, -0.5, 0.0, 7.0, np.nan, 1.0, -3.0]]


@pytest.mark.parametrize("name", MORE_UNARY + MORE_BINARY)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.int8])
def test_more_ufuncs_match_numpy_on_edge_values(name, dtype):
    """NumPy's dtype, and its values within 4 ulps (NaN, infinities and zeros' signs as
    NumPy's), on zeros, infinities, NaN, values near +-1 and beyond the domains; integer
    inputs as NumPy promotes them (fmod of integers stays integer, 0 for a zero divisor)."""
    fn = getattr(np, name)
    unary = name in MORE_UNARY
    ints = np.dtype(dtype).kind == "i"
    with np.errstate(all="ignore"):
        a = np.nan_to_num(np.array(EDGE_A) * 3, posinf=9, neginf=-9) if ints else np.array(EDGE_A)
        b = np.nan_to_num(np.array(EDGE_B) * 2, posinf=5, neginf=-5) if ints else np.array(EDGE_B)
        a, b = a.astype(dtype), b.astype(dtype)
        want = fn(a) if unary else fn(a, b)
    got = to_host(nm.jit((lambda p, q: fn(p)) if unary else (lambda p, q: fn(p, q)))(a, b))
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    eps = float(np.finfo(want.dtype).eps)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=4 * eps,
                               atol=0)
    # NumPy's own fmax/fmin of +0 and -0 depend on the array's length and dtype (its SIMD
    # loops return one operand, its scalar loop the other): zeros' signs there are free
    zeros = (want == 0) & (name not in ("fmax", "fmin"))
    assert np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))


def test_copy_ptp_and_count_nonzero_are_numpys():
    x = np.array([[0.0, 2.0, -1.0], [3.0, 0.0, 0.0]], np.float32)
    fns = [lambda p: p.copy() + np.copy(p), lambda p: np.ptp(p, axis=1),
           lambda p: np.ptp(p, 0, keepdims=True), lambda p: np.count_nonzero(p, axis=1),
           lambda p: np.count_nonzero(p), lambda p: np.count_nonzero(p > 0, axis=0, keepdims=True)]
    for f in fns:
        got, want = to_host(nm.jit(f)(x)), np.asarray(f(x))
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["nansum", "nanmax", "nanmin", "nanmean"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.bool_])
def test_nan_reductions_are_numpys(name, dtype):
    """NaNs skipped; a row of only NaN gives NaN (max, min, mean) or 0 (sum); NumPy's dtype
    for each input dtype."""
    x = np.array([[np.nan, 1.0, -2.0, np.inf], [np.nan] * 4, [1.0, 2.0, 3.0, 4.0]])
    a = x.astype(dtype) if np.dtype(dtype).kind == "f" else \
        np.nan_to_num(x, nan=0, posinf=9).astype(dtype)
    fn = getattr(np, name)
    for kw in ({"axis": 1}, {"axis": 0, "keepdims": True}, {}):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = np.asarray(fn(a, **kw))
        got = to_host(nm.jit(lambda p: fn(p, **kw))(a))
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-6)


@pytest.mark.ptx
def test_more_ufuncs_compile_for_sm90():
    from test_ptx import compile_report, lower_for_gpu
    x = np.ones((64, 256), np.float32)
    fns = [getattr(np, n) for n in MORE_UNARY]
    two = [getattr(np, n) for n in MORE_BINARY]
    kernels = lower_for_gpu(nm.jit(lambda a, b: tuple(f(a) for f in fns) +
                                   tuple(f(a, b) for f in two)), (x, x)).kernels
    kernels += lower_for_gpu(nm.jit(lambda a, b: tuple(f(a, b) for f in two)),
                             (x.astype(np.float64), x.astype(np.float64))).kernels
    report = compile_report(kernels)
    assert all(r["ok"] and r["spill_bytes"] == 0 for r in report), report


@pytest.mark.ptx
def test_log1p_and_expm1_compile_for_sm90():
    from test_ptx import compile_report, lower_for_gpu
    x = small_and_large(np.float32)
    kernels = lower_for_gpu(nm.jit(lambda a: (np.log1p(a), np.expm1(a))), (x,)).kernels
    report = compile_report(kernels)
    assert all(r["ok"] for r in report), report


FUNCTION_CASES = [
    ("np.sum", lambda x: np.sum(x, axis=1)),
    ("np.sum_all", lambda x: np.sum(x)),
    ("np.max", lambda x: np.max(x, axis=1)),
    ("np.amax", lambda x: np.amax(x, axis=-1)),
    ("np.min", lambda x: np.min(x, axis=0)),
    ("np.mean", lambda x: np.mean(x, axis=-1, keepdims=True)),
    ("np.var", lambda x: np.var(x, axis=1)),
    ("np.var_ddof", lambda x: np.var(x, axis=1, ddof=1)),
    ("np.std", lambda x: np.std(x, axis=1)),
    ("np.std_ddof_keepdims", lambda x: np.std(x, axis=-1, ddof=1, keepdims=True)),
    ("np.prod", lambda x: np.prod(1 + x / 8, axis=1)),
    ("np.argmax", lambda x: np.argmax(x, axis=1)),
    ("np.argmin", lambda x: np.argmin(x, axis=1)),
    ("np.any", lambda x: np.any(x > 1.5, axis=1)),
    ("np.all", lambda x: np.all(x > -2.0, axis=1)),
    ("np.where", lambda x: np.where(x > 0, x, 0.1 * x)),
    ("np.where_scalar", lambda x: np.where(x > 0, x, 0.0)),
    ("np.where_bcast", lambda x: np.where(x[:1] > 0, x[:, :1], x)),
    ("np.clip", lambda x: np.clip(x, -0.5, 0.75)),
    ("np.clip_upper", lambda x: np.clip(x, None, 0.25)),
    ("np.reshape", lambda x: np.reshape(x, (2, -1)) * 2),
    ("np.transpose", lambda x: np.transpose(x) * 2),
    ("np.transpose_sum", lambda x: np.transpose(x).sum(axis=0)),
    ("np.expand_dims", lambda x: np.expand_dims(x, 1) + 1),
    ("np.expand_dims_sum", lambda x: np.expand_dims(x, 0).sum(axis=2)),
    ("np.squeeze", lambda x: np.squeeze(x[:, None, :, None]) * 2),
    ("np.squeeze_axis", lambda x: np.squeeze(x[:, None], axis=1) - 1),
    ("np.broadcast_to", lambda x: np.broadcast_to(x[0], (4, 40)) * 1.5),
    ("np.swapaxes", lambda x: np.swapaxes(x, 0, 1).max(axis=1)),
    ("np.moveaxis", lambda x: np.moveaxis(x, 0, -1).sum(axis=-1)),
    ("np.ravel", lambda x: np.ravel(x) + 0.5),
    ("np.shape", lambda x: x.sum(axis=1) * np.shape(x)[1]),
    ("np.size_ndim", lambda x: x.sum(axis=1) / np.size(x) + np.ndim(x)),
]


@pytest.mark.parametrize("fn", [c[1] for c in FUNCTION_CASES],
                         ids=[c[0] for c in FUNCTION_CASES])
def test_numpy_function(fn):
    check(fn, S)


def _np_logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    r = np.log(np.exp(x - m).sum(axis=axis, keepdims=True)) + m
    return r if keepdims else np.squeeze(r, axis=axis)


def _np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _np_erf(x):
    return np.vectorize(math.erf, otypes=[x.dtype])(x)


NM_CASES = [
    # (id, numbamr version, numpy reference)
    ("exp", lambda p, s: nm.exp(s), lambda p, s: np.exp(s)),
    ("exp2", lambda p, s: nm.exp2(s), lambda p, s: np.exp2(s)),
    ("log", lambda p, s: nm.log(p), lambda p, s: np.log(p)),
    ("log2", lambda p, s: nm.log2(p), lambda p, s: np.log2(p)),
    ("sqrt", lambda p, s: nm.sqrt(p), lambda p, s: np.sqrt(p)),
    ("rsqrt", lambda p, s: nm.rsqrt(p), lambda p, s: 1 / np.sqrt(p)),
    ("sin_cos", lambda p, s: nm.sin(s) * nm.cos(p), lambda p, s: np.sin(s) * np.cos(p)),
    ("tanh", lambda p, s: nm.tanh(s), lambda p, s: np.tanh(s)),
    ("sigmoid", lambda p, s: nm.sigmoid(s * 4), lambda p, s: 1 / (1 + np.exp(-(s * 4)))),
    ("erf", lambda p, s: nm.erf(s), lambda p, s: _np_erf(s)),
    ("abs", lambda p, s: nm.abs(s), lambda p, s: np.abs(s)),
    ("maximum", lambda p, s: nm.maximum(p, s), lambda p, s: np.maximum(p, s)),
    ("minimum", lambda p, s: nm.minimum(s, 0.0), lambda p, s: np.minimum(s, 0.0)),
    ("where", lambda p, s: nm.where(s > 0, p, -p), lambda p, s: np.where(s > 0, p, -p)),
    ("clip", lambda p, s: nm.clip(s, -0.5, 0.5), lambda p, s: np.clip(s, -0.5, 0.5)),
    ("isnan", lambda p, s: nm.isnan(nm.log(s)), lambda p, s: np.isnan(np.log(s))),
    ("isfinite", lambda p, s: nm.isfinite(nm.log(s)), lambda p, s: np.isfinite(np.log(s))),
    ("astype", lambda p, s: nm.astype(s * 5, np.int16), lambda p, s: (s * 5).astype(np.int16)),
    ("sum", lambda p, s: nm.sum(s, axis=1), lambda p, s: np.sum(s, axis=1)),
    ("max", lambda p, s: nm.max(s, axis=-1), lambda p, s: np.max(s, axis=-1)),
    ("min", lambda p, s: nm.min(s, axis=0), lambda p, s: np.min(s, axis=0)),
    ("mean", lambda p, s: nm.mean(s, axis=1, keepdims=True),
     lambda p, s: np.mean(s, axis=1, keepdims=True)),
    ("var", lambda p, s: nm.var(s, axis=1), lambda p, s: np.var(s, axis=1)),
    ("std", lambda p, s: nm.std(s, axis=1, ddof=1), lambda p, s: np.std(s, axis=1, ddof=1)),
    ("prod", lambda p, s: nm.prod(1 + s / 8, axis=1), lambda p, s: np.prod(1 + s / 8, axis=1)),
    ("argmax", lambda p, s: nm.argmax(s, axis=1), lambda p, s: np.argmax(s, axis=1)),
    ("argmin", lambda p, s: nm.argmin(s, axis=1), lambda p, s: np.argmin(s, axis=1)),
    ("any_all", lambda p, s: nm.any(s > 2, axis=1) | nm.all(s < 2, axis=1),
     lambda p, s: np.any(s > 2, axis=1) | np.all(s < 2, axis=1)),
    ("logsumexp_rows", lambda p, s: nm.logsumexp(s * 10, axis=1),
     lambda p, s: _np_logsumexp(s * 10, axis=1)),
    ("logsumexp_keepdims", lambda p, s: nm.logsumexp(s, axis=-1, keepdims=True),
     lambda p, s: _np_logsumexp(s, axis=-1, keepdims=True)),
    ("logsumexp_all", lambda p, s: nm.logsumexp(s), lambda p, s: _np_logsumexp(s)),
    ("softmax", lambda p, s: nm.softmax(s * 5), lambda p, s: _np_softmax(s * 5)),
    ("softmax_axis0", lambda p, s: nm.softmax(s, axis=0), lambda p, s: _np_softmax(s, axis=0)),
    ("reshape", lambda p, s: nm.reshape(s, (6, 20)) + 1, lambda p, s: np.reshape(s, (6, 20)) + 1),
    ("transpose", lambda p, s: nm.transpose(s).max(axis=0),
     lambda p, s: np.transpose(s).max(axis=0)),
    ("broadcast_to", lambda p, s: nm.broadcast_to(s[:, :1], (3, 40)) * p,
     lambda p, s: np.broadcast_to(s[:, :1], (3, 40)) * p),
]


@pytest.mark.parametrize("fn,ref", [c[1:] for c in NM_CASES], ids=[c[0] for c in NM_CASES])
def test_numbamr_function(fn, ref):
    check(fn, P, S, ref=ref)


def test_logsumexp_of_large_values_is_stable():
    x = f32(3, 40, seed=14, scale=300.0)        # exp would overflow float32 without the max
    got = check(lambda x: nm.logsumexp(x, axis=1), x, ref=lambda x: _np_logsumexp(x, axis=1))
    assert np.all(np.isfinite(got))


def test_nan_propagates_as_in_numpy():
    x = f32(4, 30, seed=15)
    x[1, 7] = np.nan
    x[3, 0] = np.nan
    check(lambda x: (x.max(axis=1), x.min(axis=1), x.sum(axis=1), x.argmax(axis=1)), x)
    check(lambda x: np.maximum(x, 0.0) + np.minimum(x, 0.5), x)


def test_nm_functions_on_plain_numpy_arrays_are_numpy():
    x = P
    np.testing.assert_allclose(nm.exp(x), np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(nm.maximum(x, 1.0), np.maximum(x, 1.0))
    np.testing.assert_allclose(nm.where(x > 1, x, 0.0), np.where(x > 1, x, 0.0))


# ==========================================================================================
# broadcasting and views
# ==========================================================================================

BROADCAST_CASES = [
    ("row_vector", lambda a, b: a + b, (f32(3, 40), f32(40, seed=1))),
    ("column", lambda a, b: a * b, (f32(3, 40), f32(3, 1, seed=1))),
    ("outer", lambda a, b: a - b, (f32(5, 1), f32(1, 30, seed=1))),
    ("rank_diff_3d", lambda a, b: a + b, (f32(4, 1, 5), f32(3, 1, seed=1))),
    ("rank_diff_4d", lambda a, b: a * b, (f32(2, 3, 1, 5), f32(4, 1, seed=1))),
    ("size1_both", lambda a, b: a / (2 + b * b), (f32(1, 3, 1, 8), f32(2, 1, 5, 1, seed=1))),
    ("zero_d", lambda a, b: a * b, (f32(3, 40), np.array(1.5, dtype=np.float32))),
    ("one_element", lambda a, b: a - b, (f32(3, 40), f32(1, seed=1))),
    ("three_way", lambda a, b: np.where(a > 0, a, b[:, None]) + b[:, None] * a[:1],
     (f32(4, 9), f32(4, seed=1))),
    ("bcast_then_reduce", lambda a, b: (a[:, None, :] * b[None, :, :]).sum(axis=-1),
     (f32(3, 8), f32(4, 8, seed=1))),
    ("vector_matrix", lambda v, m: (v[:, None] * m).sum(axis=0), (f32(6), f32(6, 30, seed=1))),
    ("row_stat_back", lambda a, b: (a - a.mean(axis=1, keepdims=True)) * b,
     (f32(4, 33), f32(33, seed=1))),
]


@pytest.mark.parametrize("fn,inputs", [c[1:] for c in BROADCAST_CASES],
                         ids=[c[0] for c in BROADCAST_CASES])
def test_broadcasting(fn, inputs):
    check(fn, *inputs)


X2 = f32(4, 30, seed=20)
X3 = f32(3, 4, 5, seed=21)

VIEW_CASES = [
    ("reshape_flat", lambda x: x.reshape(-1) * 2, X2),
    ("reshape_minus1", lambda x: x.reshape(8, -1) + 1, X2),
    ("reshape_tuple", lambda x: x.reshape((2, -1, 5)).sum(axis=-1), X2),
    ("reshape_merge", lambda x: x.reshape(3, 20).max(axis=1), X3),
    ("reshape_split_reduce", lambda x: x.reshape(4, 3, 10).sum(axis=(0, 2)), X2),
    ("flatten", lambda x: x.flatten() - 1, X3),
    ("T", lambda x: x.T * 3, X2),
    ("T_reduce", lambda x: x.T.sum(axis=1), X2),
    ("T_3d", lambda x: x.T + 0, X3),
    ("transpose_perm", lambda x: x.transpose(1, 0, 2).max(axis=-1), X3),
    ("transpose_tuple", lambda x: x.transpose((2, 0, 1)) * 2, X3),
    ("swapaxes", lambda x: x.swapaxes(0, 2).sum(axis=0), X3),
    ("none_front", lambda x: x[None] * 2, X2),
    ("none_middle", lambda x: x[:, None] - x[:, None, :1], X2),
    ("none_both", lambda x: x[None, :, None] + 1, X2),
    ("step", lambda x: x[::2] * 2, X2),
    ("step_cols", lambda x: x[:, 1::3] + 1, X2),
    ("neg_step", lambda x: x[::-1] + 0, X2),
    ("neg_step_cols", lambda x: x[:, ::-3] * 2, X2),
    ("neg_step_both", lambda x: x[::-2, -1:2:-5] * 1, X2),
    ("range", lambda x: x[1:-1, 5:27:4] * 1, X2),
    ("slice_reduce", lambda x: x[1:, ::2].sum(axis=1), X2),
    ("reversed_reduce", lambda x: (x[:, ::-1] - x).max(axis=1), X2),
    ("reversed_softmax", lambda x: np.exp(x[:, ::-1] - x.max(axis=1, keepdims=True)), X2),
    ("int_row", lambda x: x[2] * 2, X2),
    ("int_neg", lambda x: x[-1] + x[0], X2),
    ("int_col", lambda x: x[:, 3] - x[:, -2], X2),
    ("int_both", lambda x: x - x[1, 2], X2),
    ("int_3d_middle", lambda x: x[:, 1, :].sum(axis=1), X3),
    ("ellipsis_last", lambda x: x[..., 1] * 2, X3),
    ("ellipsis_first", lambda x: x[0, ...] + 1, X3),
    ("ellipsis_none", lambda x: x[..., None] * x[..., :1, None], X3),
    ("ellipsis_mixed", lambda x: x[1, ..., ::-2] + 0, X3),
    ("ellipsis_only", lambda x: x[...] * 2, X3),
    ("empty_slice_ok", lambda x: x[:, 2:3].sum(axis=1), X2),
]


@pytest.mark.parametrize("fn,x", [c[1:] for c in VIEW_CASES], ids=[c[0] for c in VIEW_CASES])
def test_views(fn, x):
    check(fn, x)


def test_strided_and_transposed_inputs():
    base = f32(6, 40, seed=22)
    check(lambda x: x.sum(axis=1), base[::2, ::3])
    check(lambda x: x.max(axis=1), base.T[5:15])
    check(lambda x: x * 2 - x.mean(axis=-1, keepdims=True), base[::-1, ::-2])


# ==========================================================================================
# reductions: axis None / int / negative / tuple, keepdims
# ==========================================================================================

AXES = [None, 0, 1, 2, -1, -2, (0, 2), (2, 0), (-1, -2), (0, 1, 2)]
R3 = f32(3, 4, 5, seed=30)


@pytest.mark.parametrize("keepdims", [False, True], ids=["drop", "keep"])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("kind", ["sum", "max", "mean", "var"])
def test_reduction_axes(kind, axis, keepdims):
    check(lambda x: getattr(x, kind)(axis=axis, keepdims=keepdims), R3)


@pytest.mark.parametrize("keepdims", [False, True], ids=["drop", "keep"])
@pytest.mark.parametrize("axis", [None, 1, -1, (0, 2)], ids=str)
@pytest.mark.parametrize("kind", ["min", "std", "prod", "any", "all"])
def test_more_reductions(kind, axis, keepdims):
    x = (1 + R3 / 4).astype(np.float32) if kind == "prod" else R3
    if kind in ("any", "all"):
        check(lambda x: getattr(x > 0.5 if kind == "any" else x > -1.5, kind)(
            axis=axis, keepdims=keepdims), x)
    else:
        check(lambda x: getattr(x, kind)(axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("keepdims", [False, True], ids=["drop", "keep"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1], ids=str)
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_reductions(kind, axis, keepdims):
    x = f32(4, 30, seed=31)
    got = check(lambda x: getattr(x, kind)(axis=axis, keepdims=keepdims), x)
    assert dtype_of(got) == np.int64


@pytest.mark.parametrize("kind", [
    "sum", "prod", "max", "min"])
def test_integer_reductions(kind):
    x = ints(4, 30, lo=-3, hi=4, seed=32)
    check(lambda x: (getattr(x, kind)(axis=1), getattr(x, kind)(axis=1, keepdims=True) * 2), x)


INT_DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64,
              np.bool_]


def _row_reductions(x):
    return x.sum(axis=1), x.max(axis=1), x.min(axis=1), x.argmax(axis=1), x.argmin(axis=-1)


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_row_reductions_of_every_integer_dtype(dtype):
    """Rows of 300 (whole warps shuffle, then shared memory) in every integer dtype and bool,
    values at both ends of the dtype's range: NumPy's sums (wrapping as NumPy's), extremes
    and their indices, in NumPy's dtypes."""
    info = np.iinfo(dtype) if dtype is not np.bool_ else None
    rng = np.random.default_rng(34)
    if info is None:
        x = rng.random((5, 300)) < 0.5
    else:
        x = rng.integers(info.min, info.max, (5, 300), dtype=dtype, endpoint=True)
        x[1, 17], x[2, 250] = info.max, info.min
    got = nm.jit(_row_reductions)(x)
    for g, w in zip(got, _row_reductions(x)):
        g = to_host(g)
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("options", [{}, {"upcast": 1}, {"upcast": 1, "online": 1},
                                     {"split": 2, "online": 1}], ids=str)
def test_integer_means_beside_variances_are_numpys_bit_for_bit(options):
    """The mean of integers is their exact sum over the count, also beside their variance
    in a row that is streamed or split (a running Welford mean rounds: a mean of 0 was
    -2.8e-17, simulator fuzz seed 954283)."""
    seed_row = [2, -3, -4, 1, 1, 0, 0, -2, 8, -2, 1, 0, 0, 1, -1, 4, -6]
    y = np.random.default_rng(37).integers(-9, 10, (4, 256)).astype(np.int32)
    y[:, -1] -= y.sum(axis=1)                                # each row sums to 0
    y[:, :17] = seed_row
    y[:, 17:34] = seed_row[::-1]
    for rows in ([y] if "split" in options else [y, y[:, :17], y[:, 17:34]]):
        rows = np.ascontiguousarray(rows)
        fn = nm.jit(**options)(lambda y: (y.mean(axis=1), y.var(axis=1), np.std(y, axis=1)))
        got = [to_host(g) for g in fn(rows)]
        np.testing.assert_array_equal(got[0], rows.mean(axis=1))
        np.testing.assert_allclose(got[1], rows.var(axis=1), rtol=1e-14)
        np.testing.assert_allclose(got[2], rows.std(axis=1), rtol=1e-14)


@pytest.mark.slow
@pytest.mark.ptx
def test_row_reductions_of_every_integer_dtype_compile_for_sm90():
    from test_ptx import compile_report, lower_for_gpu
    kernels = [k for dt in INT_DTYPES
               for k in lower_for_gpu(_row_reductions, (np.ones((64, 4096), dt),)).kernels]
    report = compile_report(kernels)
    assert all(r["ok"] for r in report), [r["error"] for r in report if not r["ok"]]


def _lowest(x):
    return -np.inf if x.dtype.kind == "f" else -10**4     # NumPy casts no inf to integers


MASKED = [
    ("sum", lambda x, m: x.sum(axis=1, where=m)),
    ("sum_initial", lambda x, m: np.sum(x, axis=0, initial=2.5, keepdims=True)),
    ("sum_row_mask", lambda x, m: x.sum(axis=1, where=m[0])),
    ("prod", lambda x, m: x.prod(axis=1, where=m, initial=3)),
    ("max", lambda x, m: x.max(axis=1, where=m, initial=_lowest(x))),
    ("max_initial_above", lambda x, m: np.max(x, axis=None, initial=1.5)),
    ("min", lambda x, m: np.min(x, axis=0, where=m, initial=0.25)),
    ("any", lambda x, m: (x > 1).any(axis=1, where=m)),
    ("all", lambda x, m: np.all(x > -1, axis=(0, 1), where=m, keepdims=True)),
    ("mean", lambda x, m: x.mean(axis=1, where=m)),
    ("mean_all", lambda x, m: np.mean(x, where=m)),
    ("var", lambda x, m: x.var(axis=1, where=m, ddof=1)),
    ("std", lambda x, m: np.std(x, axis=0, where=m)),
    ("masked_softmax", lambda x, m: np.exp(x - x.max(axis=1, keepdims=True, where=m,
                                                     initial=_lowest(x))) * m),
    ("masked_mean_and_max", lambda x, m: (x.mean(axis=1, where=m),
                                          x.max(axis=1, where=m, initial=0.0))),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("name, fn", MASKED, ids=[c[0] for c in MASKED])
def test_reductions_with_where_and_initial_are_numpys(name, fn, dtype):
    """NumPy's where= and initial= keywords: masked values count as the reduction's identity
    (or ``initial``), ``initial`` joins every result; rows with nothing kept and a mean over
    them (NaN) included. Rows of 130 cross warp boundaries."""
    rng = np.random.default_rng(36)
    x = (rng.standard_normal((5, 130)) * (9 if dtype == np.int32 else 1)).astype(dtype)
    m = rng.random((5, 130)) < 0.6
    m[2] = False                               # a row with nothing kept
    if dtype == np.int32 and name in ("prod", "max", "sum_initial", "min"):
        x = np.clip(x, -2, 2)                  # a product of 130 small integers stays exact
    check(fn, x, m, rtol=4e-3 if dtype == np.float16 else 1e-5)


def test_a_masked_softmax_is_one_kernel():
    def masked_softmax(x, m):
        e = np.exp(x - x.max(axis=-1, keepdims=True, where=m, initial=-np.inf)) * m
        return e / e.sum(axis=-1, keepdims=True)
    x = f32(64, 256, seed=38)
    m = f32(64, 256, seed=39) > -0.5
    assert len(nm.jit(masked_softmax).lower(x, m).kernels) == 1
    check(masked_softmax, x, m)


def test_reduction_over_size1_axes():
    x = f32(3, 1, 7, seed=33)
    check(lambda x: x.sum(axis=1), x)
    check(lambda x: (x.max(axis=(1, 2), keepdims=True), x.mean(axis=(1, 2))), x)


def test_dependent_reductions_in_one_function():
    x = f32(4, 37, seed=34)
    check(lambda x: (x - x.mean(axis=1, keepdims=True)).max(axis=1) / x.std(axis=1), x)
    check(lambda x: (x - x.mean()).sum() + x.max(), x, rtol=1e-4)


# ==========================================================================================
# hash-consing
# ==========================================================================================

def doubling(x):
    a = x
    for _ in range(24):
        a = a + a
    return a.sum()


def _graph_of_softmax():
    from numbamr.trace import trace
    return trace(lambda v: [np.exp(v[0] - v[0].max(axis=1, keepdims=True))],
                 [("array", ((4, 8), np.dtype(np.float32)))])


def test_every_traced_catalogue_graph_passes_the_graph_verifier():
    from numbamr.graph import verify_graph
    from numbamr.trace import trace
    from programs import PROGRAMS
    rng = np.random.default_rng(35)
    for p in PROGRAMS:
        inputs = p.make(rng, 6, 40)
        specs = [("array", (a.shape, a.dtype)) for a in inputs]
        _, outputs, _ = trace(lambda v: p.fn(*v), specs)
        assert verify_graph(outputs) is outputs


@pytest.mark.parametrize("break_it, why", [
    (lambda g, n: g.node(Op.ADD, n.dtype, n.shape, (n,)), "1 sources, ADD takes 2"),
    (lambda g, n: g.node(Op.EXP, np.int32, n.shape, (n,)), "floating point"),
    (lambda g, n: g.node(Op.LT, n.dtype, n.shape, (n, n)), "comparison of dtype"),
    (lambda g, n: g.node(Op.MUL, n.dtype, (4, 1), (n, n)), "sources of shapes"),
    (lambda g, n: g.node(Op.RESHAPE, n.dtype, (3, 8), (n,), (3, 8)), "reshapes 32"),
    (lambda g, n: g.node(Op.REDUCE, n.dtype, (4, 8), (n,),
                         (ReduceKind.SUM, (1,))), "kept as 1"),
    (lambda g, n: g.node(Op.REDUCE, n.dtype, (4, 1), (n,),
                         (ReduceKind.ARGMAX, (1,))), "not int64"),
    (lambda g, n: g.node(Op.LOAD, n.dtype, n.shape, ()), "lowered value"),
    (lambda g, n: g.node(Op.ARANGE, np.int64, (4, 8), ()), "an arange of shape"),
], ids=["arity", "float-only", "compare", "shapes", "reshape", "reduce-shape", "arg-dtype",
        "lowered-op", "arange"])
def test_graph_verifier_names_what_is_wrong(break_it, why):
    from numbamr.graph import verify_graph
    graph, (out,), _ = _graph_of_softmax()
    verify_graph([out])
    with pytest.raises(VerifyError, match=why):
        verify_graph([break_it(graph, out)])


def test_zeros_of_both_signs_are_two_constants():
    """0.0 == -0.0 in Python, but hash-consing (of graph nodes and of kernel values) must not
    make them one constant: copysign takes the sign of each."""
    def fn(x):
        return np.copysign(x, 0.0), np.copysign(x, -0.0), np.copysign(1.0, x * 0.0 + -0.0)
    x = np.ones((3, 5), np.float32)
    for got, want in zip(nm.jit(fn)(x), fn(x)):
        got = np.asarray(got)
        assert np.array_equal(np.signbit(got), np.signbit(want)) and np.array_equal(got, want)


def test_hash_consing_doubling_trap_is_fast():
    fn = nm.jit(doubling)
    x = np.ones((6, 40), np.float32)
    t0 = time.perf_counter()
    low = fn.lower(x)
    elapsed = time.perf_counter() - t0
    assert elapsed < 1.0, f"tracing + lowering took {elapsed:.2f} s (2**24 paths walked?)"
    assert sum("ADD" in line for line in low.graph_text.splitlines()) == 24
    assert len(low.kernels) == 1


def test_hash_consing_doubling_value():
    x = np.array([[1, 2, 3], [-4, 5, 0.5]], np.float32)
    got = to_host(nm.jit(doubling)(x))
    assert float(got) == 2.0 ** 24 * float(x.astype(np.float64).sum())
    check(doubling, x)


def test_hash_consing_equal_reductions_are_one_node():
    x = f32(3, 20, seed=40)
    fn = nm.jit(lambda x: x.sum(1) + x.sum(1))
    text = fn.lower(x).graph_text
    assert sum("REDUCE" in line for line in text.splitlines()) == 1, text
    got = check(fn.fn, x, jitted=fn)
    np.testing.assert_allclose(got, 2 * x.astype(np.float64).sum(1), rtol=1e-5)


def test_hash_consing_rebuilt_subexpressions():
    """The same expression written twice (new Python objects, equal constants) is one node."""
    x = f32(3, 20, seed=41)
    fn = nm.jit(lambda x: (np.exp(x * 2) / np.exp(x * 2).sum(axis=-1, keepdims=True),
                           (x * 2).max(axis=-1) + (x * 2).max(axis=-1)))
    lines = fn.lower(x).graph_text.splitlines()
    assert sum(" EXP " in line for line in lines) == 1
    assert sum(" MUL " in line for line in lines) == 1
    assert sum("REDUCE" in line for line in lines) == 2
    check(fn.fn, x, jitted=fn)


# ==========================================================================================
# static (non-array) arguments
# ==========================================================================================

def rms_scale(x, eps=1e-5):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)


def test_static_default_and_explicit():
    fn = nm.jit(rms_scale)
    x = f32(4, 24, seed=50)
    default = check(rms_scale, x, jitted=fn)
    explicit = check(rms_scale, x, jitted=fn, eps=5.0)
    positional = to_host(fn(x, 5.0))
    np.testing.assert_array_equal(positional, explicit)
    assert not np.allclose(default, explicit)
    # the default again: cached per static value, not overwritten by the last call
    np.testing.assert_array_equal(to_host(fn(x)), default)
    np.testing.assert_array_equal(to_host(fn(x, eps=1e-5)), default)


def test_static_values_drive_python_code():
    def pick(x, kind="max", axis=1, scale=1):
        r = getattr(x, kind)(axis=axis)
        return r * scale if scale != 1 else r

    fn = nm.jit(pick)
    x = f32(4, 24, seed=51)
    for kw in (dict(), dict(kind="min"), dict(kind="sum", axis=0), dict(axis=-1, scale=3)):
        check(pick, x, jitted=fn, **kw)


def test_static_lower_gives_kernel_sources():
    fn = nm.jit(rms_scale)
    x = f32(4, 24, seed=52)
    low = fn.lower(x)
    assert len(low.kernels) >= 1
    for k in low.kernels:
        assert isinstance(k.source, str) and "cuda" in k.source
        assert k.as_text() == k.source
    text = low.as_text()
    assert isinstance(text, str) and all(k.source in text for k in low.kernels)
    # the static value is baked into the kernel: another eps gives another kernel source
    assert fn.lower(x, eps=0.25).as_text() != text


def test_varargs_and_keyword_arrays():
    def f(x, *ys, w=None):
        total = x
        for y in ys:
            total = total + y
        return total * w if w is not None else total

    fn = nm.jit(f)
    a, b, c, w = f32(3, 10, seed=53), f32(3, 10, seed=54), f32(10, seed=55), f32(3, 1, seed=56)
    check(f, a, b, c, jitted=fn)
    got = to_host(fn(a, b, w=w))
    np.testing.assert_allclose(got, (a.astype(np.float64) + b) * w, rtol=1e-6)


# ==========================================================================================
# several outputs
# ==========================================================================================

def test_tuple_outputs_keep_order():
    x = f32(4, 30, seed=60)
    got = check(lambda x: (x.sum(axis=1), x.max(axis=1), x.min(axis=1)), x)
    assert type(got) is tuple and len(got) == 3
    np.testing.assert_array_less(got[2], got[1] + 1e-7)        # min <= max: not swapped


def test_single_element_tuple_stays_tuple():
    x = f32(4, 30, seed=61)
    got = check(lambda x: (x.mean(axis=1),), x)
    assert type(got) is tuple and len(got) == 1


def test_list_outputs_keep_order():
    x = f32(4, 30, seed=62)
    got = check(lambda x: [x - x.max(axis=1, keepdims=True), x.max(axis=1)], x)
    assert type(got) is list and len(got) == 2
    assert got[0].shape == (4, 30) and got[1].shape == (4,)


def test_dict_outputs_keep_keys_in_order():
    x = f32(4, 30, seed=63)

    def f(x):
        return {"z_max": x.max(axis=1), "a_centered": x - x.mean(axis=1, keepdims=True),
                "m_mean": x.mean(axis=1)}

    got = nm.jit(f)(x)
    assert type(got) is dict and list(got) == ["z_max", "a_centered", "m_mean"]
    ref = f(x.astype(np.float64))
    typed = f(x)
    for k in ref:
        check_outputs(got[k], typed[k], ref[k], 1e-5)
