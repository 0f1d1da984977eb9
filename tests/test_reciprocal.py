"""Division by a row-level value becomes a multiplication by its reciprocal (computed once per
row): within about one ulp of the quotient for every divisor, including those whose plain
reciprocal would overflow or be subnormal, and the same infinities and NaNs as division."""
import numpy as np
import pytest

import numbamr as nm
from numbamr.lowering.linearize import RECIP_SCALE
from numbamr.ops import Op


def divide_by_row_sum(x, d):
    return x / d.sum(axis=-1, keepdims=True)


def _ulps(got, want):
    """Distance in units of the last place of ``want`` (its dtype's spacing)."""
    want = want.astype(got.dtype)
    with np.errstate(all="ignore"):
        return np.abs(got.astype(np.float64) - want.astype(np.float64)) / \
            np.spacing(np.abs(want)).astype(np.float64)


def _divisor_rows(dt):
    """One divisor per row, across the whole range: plain values, values whose reciprocal
    overflows (subnormal) or would be subnormal (near the largest finite), zero, inf, NaN."""
    fi = np.finfo(dt)
    tiny_sub = fi.smallest_subnormal
    return np.array([3.0, -7.25, 1e-3, float(fi.tiny), float(fi.tiny) / 4, float(tiny_sub),
                     float(tiny_sub) * 5, float(fi.max), -float(fi.max) / 3,
                     2.0 ** 126 * 1.5 if dt == np.float32 else 2.0 ** 1022 * 1.5,
                     0.0, -0.0, np.inf, -np.inf, np.nan, 1.0], dtype=dt)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_quotients_within_one_ulp_across_the_divisor_range(dt):
    d = _divisor_rows(dt)
    x = _numerators(dt, (len(d), 64))
    dsum = np.zeros((len(d), 3), dt)
    dsum[:, 0] = d                                      # the row sum is d itself
    fn = nm.jit(divide_by_row_sum)
    got = fn(x, dsum)
    with np.errstate(all="ignore"):
        want = x / dsum.sum(axis=-1, keepdims=True)     # (-0.0 + 0 + 0 is +0.0)
    _assert_like_division(got, want)


def _numerators(dt, shape):
    """Normal values, and in the first 8 columns numerators of every size, so that the
    quotients overflow, underflow and in between."""
    fi = np.finfo(dt)
    x = np.random.default_rng(0).standard_normal(shape).astype(dt)
    x[:, :8] *= np.array([1e30, 1e-30, float(fi.max) / 2, float(fi.tiny), 0.0, -0.0, np.inf,
                          np.nan], dtype=dt)
    return x


def _assert_like_division(got, want):
    """Within one ulp of ``want``, with its NaNs and infinities (a subnormal quotient within
    one subnormal step)."""
    fi = np.finfo(want.dtype)
    assert got.dtype == want.dtype
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), "NaNs differ from division"
    inf = np.isinf(want)
    assert np.array_equal(got[inf], want[inf]), "infinities differ from division"
    finite = ~nan & ~inf
    # subnormal quotients: within one spacing of the smallest normal's neighbourhood
    ulps = _ulps(got[finite], want[finite])
    sub = np.abs(want[finite]) < fi.tiny
    assert ulps[~sub].max(initial=0) <= 1.0, f"{ulps[~sub].max()} ulps from the quotient"
    assert np.abs(got[finite][sub].astype(np.float64) -
                  want[finite][sub].astype(np.float64)).max(initial=0) <= float(
                      fi.smallest_subnormal), "a subnormal quotient is off by more than one step"


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_constant_divisors_divide_as_numpy(dt):
    """A constant divisor is divided, not multiplied by its reciprocal: the quotients are
    NumPy's bit for bit (so a constant row's mean is exactly its value), across the range."""
    x = _numerators(dt, (4, 64))
    for d in _divisor_rows(dt):
        def divide(x):
            return x / d
        with np.errstate(all="ignore"):
            want = x / d
        np.testing.assert_array_equal(nm.jit(divide)(x), want, err_msg=f"x / {d!r}")


def test_division_kept_when_the_option_is_off():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 256)).astype(np.float32)
    dsum = np.zeros((8, 3), np.float32)
    dsum[:, 0] = rng.uniform(0.5, 2.0, 8)           # row sums exact: one nonzero term
    on = nm.jit(divide_by_row_sum)
    off = nm.jit(divide_by_row_sum, reciprocal=0)
    assert "rc_r" in on.lower(x, dsum).as_text()
    assert "rc_r" not in off.lower(x, dsum).as_text()
    want = x / dsum.sum(axis=-1, keepdims=True)
    assert np.array_equal(off(x, dsum), want)       # division, correctly rounded
    assert _ulps(on(x, dsum), want).max() <= 1.0


def test_element_level_divisor_is_divided():
    """x / y with y varying along the row keeps the division (no reciprocal per element)."""
    def ratio(x, y):
        return x / y + x.sum(axis=-1, keepdims=True)
    x = np.ones((4, 128), np.float32)
    text = nm.jit(ratio).lower(x, x).as_text()
    assert "rc_r" not in text


def test_scale_constants_are_powers_of_two_in_range():
    for dt, (tiny, big, scale) in RECIP_SCALE.items():
        fi = np.finfo(dt)
        assert tiny == float(fi.tiny)
        assert 1.0 / big >= float(fi.tiny)               # 1 / d normal up to ``big``
        assert np.log2(scale) == int(np.log2(scale))
        # a rescaled divisor's reciprocal is normal at both ends of the range
        assert float(fi.smallest_subnormal) * scale * float(fi.max) > 1.0
        assert float(fi.max) / scale < 1.0 / float(fi.tiny)


def _distance_to_variance(x):
    return np.abs(x - np.var(x, axis=-1, keepdims=True))           # divides by a constant


def _scaled_by_row_max(x):
    return x / np.abs(x).max(axis=-1, keepdims=True)               # by a broadcast value


@pytest.mark.slow
@pytest.mark.parametrize("values", [_distance_to_variance, _scaled_by_row_max],
                         ids=["by_constant", "by_row_max"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_a_quotient_recomputed_in_two_kernels_is_the_same_in_both(dt, values):
    """A division is lowered from the program alone, not from the kernel it lands in. ``d``
    is needed in a row kernel (for ``d.min()``) and again in a column kernel (for the mean
    over rows), where the row-level divisor is read per element; rounded two ways,
    ``d - d.min()`` could turn negative and its square root NaN."""
    def distance_to_row_min_over_rows(x):
        d = values(x)
        return np.sqrt(d - d.min(axis=-1, keepdims=True)).mean(axis=0)
    x = np.random.default_rng(2).standard_normal((96, 127)).astype(dt)
    jf = nm.jit(distance_to_row_min_over_rows)
    assert len(jf.lower(x).kernels) >= 2
    got = jf(x)
    want = distance_to_row_min_over_rows(x.astype(np.float64))
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-4 if dt == np.float32 else 1e-10)


def _rms_scaled(x, s):
    return x / np.sqrt((s * s).sum(axis=-1, keepdims=True) + 1e-5)


def _layernorm(x, w, b):
    d = x - x.mean(axis=-1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5) * w + b


def _zscore(x):
    d = x - x.mean(axis=-1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True))


def _by_signed_sum(x, s):                 # the sum may be negative: sqrt(s + eps) may be tiny
    return x / np.sqrt(s.sum(axis=-1, keepdims=True) + 1e-5)


def _subnormal_eps(x, s):                 # eps below the smallest normal: no lower bound
    return x / np.sqrt((s * s).sum(axis=-1, keepdims=True) + 1e-40)


def _softmax(x, y=None):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_float32(x, y=None):          # a float16 row, its softmax taken in float32
    y = x.astype(np.float32)
    e = np.exp(y - y.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(x.dtype)


def _exp_below_another_max(x, y):         # no term need be 1: the sum may be tiny
    e = np.exp(x - y.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _exp_above_the_min(x, y=None):        # terms of at least 1, unbounded above
    e = np.exp(x - x.min(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _max_with_initial(x, y=None):         # the max may be 0, above every term's source
    e = np.exp(x - x.max(axis=-1, keepdims=True, initial=0.0))
    return e / e.sum(axis=-1, keepdims=True)


def _max_rounded_to_half(x, y=None):      # the max rounded: the term at it may not be 1
    e = np.exp(x - x.max(axis=-1, keepdims=True).astype(np.float16))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("fn,scaled,dt", [
    (_rms_scaled, False, np.float32), (_layernorm, False, np.float32),
    (_zscore, True, np.float32), (_by_signed_sum, True, np.float32),
    (_subnormal_eps, True, np.float32), (_softmax, False, np.float32),
    (_softmax, False, np.float64), (_softmax, False, np.float16),
    (_softmax_float32, False, np.float16), (_exp_below_another_max, True, np.float32),
    (_exp_above_the_min, True, np.float32), (_max_with_initial, True, np.float32),
    (_max_rounded_to_half, True, np.float32)])
def test_the_scale_is_dropped_only_for_divisors_provably_in_range(fn, scaled, dt):
    """``sqrt(nonnegative + eps)`` lies in [sqrt(eps), sqrt(max)] or is inf or NaN, and a
    softmax's ``sum(exp(x - max(x)))`` in [1, row length] or is 0 or NaN, so their
    reciprocals never need the power-of-two scale; a divisor without such bounds keeps it."""
    x = np.ones((4, 128), dt)
    args = (x, x, x)[:fn.__code__.co_argcount]
    text = nm.jit(fn).lower(*args).as_text()
    assert "rc_r" in text
    assert ("rc_q" in text) == scaled


_SOFTMAX_FORMS = [dict(threads_per_row=128, upcast=8), dict(upcast=0), dict(upcast=0, online=0),
                  dict(split=4), dict(split=3, online=0)]


@pytest.mark.parametrize("options", _SOFTMAX_FORMS,
                         ids=["resident", "streamed", "streamed_two_pass", "split",
                              "split_two_pass"])
def test_softmax_without_the_scale_divides_like_numpy_at_the_extremes(options):
    """Softmax rows whose denominator is exactly 1 (one finite value among -inf, or one far
    above the rest), the row's length (equal values), NaN (a NaN, +inf, or only -inf),
    and plain rows, in every form of the two reduces (in registers, streamed with the
    one-pass max-sum or in two passes, split across blocks): NumPy's NaNs and
    infinities, and the float64 softmax within a few float32 ulps."""
    dt, n = np.float32, 1001
    rng = np.random.default_rng(5)
    x = rng.standard_normal((12, n)).astype(dt) * 4
    x[0] = -np.inf
    x[0, 7] = 3.0                                        # one term: the sum is exactly 1
    x[1] = -1e30
    x[1, 999] = 1e30                                     # every other term underflows
    x[2] = 2.5                                           # n equal terms
    x[3, 10] = np.nan
    x[4, 500] = np.inf
    x[5] = -np.inf                                       # -inf - -inf: NaN
    x[6, ::2] = -np.inf
    x[7] = np.float32(3e38) * np.sign(x[7])
    x[8] *= np.float32(1e-40)                            # subnormal spread: all terms ~1
    jf = nm.jit(_softmax, **options)
    assert "rc_q" not in jf.lower(x).as_text()
    got = jf(x)
    with np.errstate(all="ignore"):
        want = _softmax(x.astype(np.float64)).astype(dt)
    assert np.array_equal(np.isnan(got), np.isnan(want)), "NaNs differ from NumPy's"
    finite = ~np.isnan(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=4e-6, atol=1e-45)
    assert np.array_equal(got[0] == 1, np.arange(n) == 7)


def test_in_range_divisors_divide_within_one_ulp_at_the_extremes():
    """Rows whose divisor is sqrt(eps) (zero rows), whose square underflows or overflows
    (the divisor inf: quotients 0), NaN, and plain: like division, within one ulp. One
    nonzero term a row keeps the sum exact, so NumPy's float32 divisor is the kernel's."""
    dt = np.float32
    s0 = np.array([0.0, 1e-30, 3e-3, -2.5, 1e18, 1.5e19, 3e19, np.inf, np.nan, 1.0], dt)
    s = np.zeros((len(s0), 5), dt)
    s[:, 0] = s0
    x = _numerators(dt, (len(s0), 64))
    jf = nm.jit(_rms_scaled)
    assert "rc_q" not in jf.lower(x, s).as_text()
    with np.errstate(all="ignore"):
        want = x / np.sqrt((s * s).sum(axis=-1, keepdims=True) + dt(1e-5))
    _assert_like_division(jf(x, s), want)


@pytest.mark.parametrize("dt", list(RECIP_SCALE))
def test_square_roots_stay_below_the_scaled_range(dt):
    """The bound the dropped scale relies on: every finite square root is below ``big``,
    and the square root of anything at least ``tiny`` is at least ``tiny``."""
    tiny, big, _ = RECIP_SCALE[dt]
    fi = np.finfo(dt)
    assert np.sqrt(fi.max) < big
    assert np.sqrt(dt.type(tiny)) >= tiny


_SPECIALS = np.array([-np.inf, -3.4e38, -1.0, -1.2e-38, -1e-45, -0.0, 0.0, 1e-45, 1.2e-38,
                      1e-5, 1.0, 3.0, 3.4e38, np.inf, np.nan], np.float32)
_RULED = [Op.ABS, Op.EXP, Op.SQRT, Op.NEG, Op.MUL, Op.ADD, Op.SUB, Op.DIV, Op.MIN, Op.MAX]


def _random_value(rng, vb, leaves, depth):
    """A random float32 Val over ``leaves`` (LOADs) and constants, and its values there."""
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.5:
            return leaves[rng.integers(len(leaves))]
        c = float(_SPECIALS[rng.integers(len(_SPECIALS))])
        return vb.make(Op.CONST, np.float32, (), c), np.float32(c)
    op = _RULED[rng.integers(len(_RULED))]
    a, va = _random_value(rng, vb, leaves, depth - 1)
    if op in (Op.ABS, Op.EXP, Op.SQRT, Op.NEG):
        f = {Op.ABS: np.abs, Op.EXP: np.exp, Op.SQRT: np.sqrt, Op.NEG: np.negative}[op]
        return vb.make(op, np.float32, (a,)), f(va)
    b, vb_ = (a, va) if rng.random() < 0.2 else _random_value(rng, vb, leaves, depth - 1)
    f = {Op.MUL: np.multiply, Op.ADD: np.add, Op.SUB: np.subtract, Op.DIV: np.divide,
         Op.MIN: np.minimum, Op.MAX: np.maximum}[op]        # (NaN-propagating, as numbamr's)
    return vb.make(op, np.float32, (a, b)), f(va, vb_)


def test_range_facts_hold_for_every_value_including_the_extremes():
    """Random expressions over float32 values at every extreme (zeros of both signs,
    subnormals, the largest finite, infinities, NaN): where ``ranges`` says a value is
    nonnegative, at least the smallest normal, or a divisor in range, every value computed
    by NumPy in float32 is so (or NaN)."""
    from numbamr.lowering.evaluate import ValBuilder
    from numbamr.lowering import ranges
    tiny, big, _ = RECIP_SCALE[np.dtype(np.float32)]
    x, y = np.meshgrid(_SPECIALS, _SPECIALS)
    vb = ValBuilder()
    leaves = [(vb.make(Op.LOAD, np.float32, (), (i, i)), v) for i, v in enumerate((x, y))]
    rng = np.random.default_rng(7)
    proven = 0
    with np.errstate(all="ignore"):
        for _ in range(3000):
            val, got = _random_value(rng, vb, leaves, 4)
            got = np.broadcast_to(np.asarray(got, np.float32), x.shape)
            ok = np.isnan(got)
            if ranges.nonneg(val):
                assert (ok | (got >= 0)).all(), val
            if ranges.at_least(val, tiny):
                assert (ok | (got >= tiny)).all(), val
            if ranges.reciprocal_in_range(val, tiny, big):
                mag = np.abs(got)
                assert (ok | (mag == 0) | np.isinf(mag) | ((mag >= tiny) & (mag <= big))).all()
                proven += 1
    assert proven > 50         # the sweep reaches the cases it is about
