"""Edge cases, each against NumPy's own behaviour: signatures that tell apart what a kernel
tells apart (signed zeros, NaN bits, scalar types, tuples), values frozen at trace time and
the debug line that lists them, and numerical corners (nanvar's ddof, masks and dtypes of
reductions, NumPy scalars beside masks, read-only inputs, nested jitted functions, the
user's own exceptions, integer powers and out-of-range Python integers).
"""
import os
import struct
import warnings

import numpy as np
import pytest

import numbamr as nm
from numbamr.errors import NumericError, ScalarOverflowError
from numbamr.runtime.launch import fast_key
from helpers import check, to_host

X = np.array([[1.5, -2.0, 3.0, 0.5], [-1.0, 4.0, -0.25, 2.0], [0.75, -3.5, 1.0, -1.5]],
             np.float32)
MASK = np.array([[True, False, True, True], [False, True, True, False],
                 [True, True, False, True]])


def nan_with_bits(bits):
    value = struct.unpack("<d", struct.pack("<Q", bits))[0]
    assert value != value
    return value


def numpy_raises(fn, *args, **kwargs):
    """The exception NumPy's own run of ``fn`` raises (failing the test when it raises none)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            fn(*args, **kwargs)
        except Exception as e:
            return e
    pytest.fail("NumPy raised nothing")


def log_lines(captured):
    return [line for line in captured.err.splitlines() if line.startswith("numbamr:")]


# ==========================================================================================
# signatures: static values are keys as the kernel tells them apart
# ==========================================================================================

@pytest.mark.parametrize("fn", [lambda x, s: np.copysign(x, s), lambda x, s: 1 / (x * s)],
                         ids=["copysign", "reciprocal_of_product"])
def test_static_zeros_of_both_signs_are_two_signatures(fn):
    jitted = nm.jit(fn)
    for s in (0.0, -0.0, 0.0, -0.0):
        got = check(fn, X, jitted=jitted, s=s)
        with np.errstate(all="ignore"):
            want = fn(X, s)
        assert np.array_equal(np.signbit(to_host(got)), np.signbit(want)), s
        assert np.array_equal(to_host(jitted(X, s)), want)      # positional: the same
    assert len(jitted._cache) == 2


def test_a_nan_static_finds_its_own_signature_again(monkeypatch, capsys):
    """NaN != NaN in Python: keyed by value, each call's fresh NaN would compile anew."""
    monkeypatch.setenv("NUMBAMR_DEBUG", "1")
    jitted = nm.jit(lambda x, s: x + s)
    for _ in range(3):
        s = float("nan")
        got = check(jitted.fn, X, jitted=jitted, s=s)
        assert np.isnan(to_host(got)).all()
    assert len(jitted._cache) == 1
    assert len(log_lines(capsys.readouterr())) == 1


def test_nans_of_different_bits_are_two_signatures():
    jitted = nm.jit(lambda x, s: np.where(x > 0, x, s))
    for make in [lambda: float("nan"), lambda: nan_with_bits(0x7FF8000000000123)] * 2 + \
            [lambda: np.float32("nan")] * 2:
        check(jitted.fn, X, jitted=jitted, s=make())      # a new object each time
    assert len(jitted._cache) == 3      # two float NaNs and a float32 one


@pytest.mark.parametrize("s", [1.0, np.float32(1.0), np.float64(1.0), np.float16(1.0), 1,
                               np.int8(1), np.int64(1), True, np.bool_(True)],
                         ids=lambda s: type(s).__name__)
def test_scalar_types_give_numpys_dtypes(s):
    for x in (X.astype(np.float16), X.astype(np.int16)):
        check(lambda x, s: x + s, x, s=s)


def test_numpy_scalar_types_are_separate_signatures():
    jitted = nm.jit(lambda x, s: x * s)
    x = X.astype(np.float16)
    values = [1.0, np.float32(1.0), np.float64(1.0), np.float16(1.0), 1, np.int8(1)]
    for s in values + values:
        check(jitted.fn, x, jitted=jitted, s=s)
    assert len(jitted._cache) == len(values)


def test_floats_inside_nested_tuples_are_told_apart():
    def fn(x, s):
        return np.copysign(x, s[1][0]) * s[0]
    jitted = nm.jit(fn)
    for s in [(2, (0.0,)), (2, (-0.0,)), (2, (0.0,)), (2.0, (-0.0,))]:
        got = check(fn, X, jitted=jitted, s=s)
        assert np.array_equal(np.signbit(to_host(got)), np.signbit(fn(X, s)))
    assert len(jitted._cache) == 3


def test_tuples_of_bools_and_ints_are_told_apart():
    """(True, 1) == (1, True) in Python; bool + True is a bool array, bool + 1 an int64 one."""
    def fn(b, s):
        return b + s[0], b + s[1]
    jitted = nm.jit(fn)
    b = X > 0
    for s in [(True, 1), (1, True)]:
        check(fn, b, jitted=jitted, s=s)
    assert len(jitted._cache) == 2


def test_the_fast_path_key_tells_float_statics_apart_by_their_bits():
    assert fast_key((0.0,)) != fast_key((-0.0,))
    assert fast_key((float("nan"),)) == fast_key((float("nan"),))
    assert fast_key((float("nan"),)) != fast_key((nan_with_bits(0x7FF8000000000123),))
    assert fast_key((1,)) == fast_key((1,)) and fast_key((1,)) != fast_key((1.0,))


# ==========================================================================================
# values read while tracing are frozen: the debug log lists the globals
# ==========================================================================================

SCALE = 2.0
TABLE = {"shift": 0.5}
OFFSETS = (1.0, 2.0)


def _helper(v):
    return v


def softmax_scaled(x):
    e = np.exp((x - x.max(axis=-1, keepdims=True)) * SCALE)
    shift = [TABLE["shift"] for _ in range(1)][0]       # read in a nested code object
    return _helper(e / e.sum(axis=-1, keepdims=True)) + shift


def ref_softmax_scaled(x, scale, shift):
    e = np.exp((x - x.max(axis=-1, keepdims=True)) * scale)
    return e / e.sum(axis=-1, keepdims=True) + shift


def test_debug_lists_the_globals_a_trace_read(monkeypatch, capsys):
    monkeypatch.setenv("NUMBAMR_DEBUG", "1")
    nm.jit(softmax_scaled)(X)
    lines = log_lines(capsys.readouterr())
    assert lines == ["numbamr: compiling softmax_scaled: first call; kernels for these shapes",
                     "numbamr: softmax_scaled read globals at trace time (frozen): SCALE, TABLE"]


def test_debug_lists_closure_variables_and_not_functions_or_modules(monkeypatch, capsys):
    monkeypatch.setenv("NUMBAMR_DEBUG", "1")
    k = 3.0
    exp = np.exp

    def scaled(x):
        return exp(x * k + OFFSETS[0]) + _helper(x)
    check(scaled, X, jitted=nm.jit(scaled))
    lines = log_lines(capsys.readouterr())
    assert lines[1:] == [
        "numbamr: scaled read globals at trace time (frozen): OFFSETS",
        "numbamr: scaled read closure variables at trace time (frozen): k"]


def test_no_debug_no_lines(monkeypatch, capsys):
    monkeypatch.delenv("NUMBAMR_DEBUG", raising=False)
    nm.jit(softmax_scaled)(X)
    assert log_lines(capsys.readouterr()) == []


def test_globals_are_frozen_at_the_first_trace(monkeypatch):
    """What the README says: a later change of a global is not seen by a compiled signature,
    and a new signature's trace sees the value of its time."""
    jitted = nm.jit(softmax_scaled)
    first = to_host(jitted(X))
    monkeypatch.setitem(globals(), "SCALE", 5.0)
    again = to_host(jitted(X))
    np.testing.assert_allclose(first, ref_softmax_scaled(X.astype(np.float64), 2.0, 0.5),
                               rtol=1e-5)
    np.testing.assert_array_equal(again, first)
    x64 = X.astype(np.float64)
    np.testing.assert_allclose(to_host(jitted(x64)), ref_softmax_scaled(x64, 5.0, 0.5),
                               rtol=1e-12)


# ==========================================================================================
# nanvar and nanstd: NaN where ddof or fewer values are not NaN
# ==========================================================================================

NANS = np.array([[1.0, np.nan, 3.0, np.nan, 2.0], [np.nan, np.nan, np.nan, 2.0, np.nan],
                 [1.0, 2.0, 3.0, 4.0, 5.5], [np.nan] * 5])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ddof", [0, 1, 2, 3, 4, 6])
@pytest.mark.parametrize("name", ["nanvar", "nanstd"])
def test_nanvar_with_ddof_at_or_above_the_count_is_nan(name, ddof, dtype):
    fn = {"nanvar": lambda x, ddof: (np.nanvar(x, axis=1, ddof=ddof),
                                     np.nanvar(x, ddof=ddof * 4)),
          "nanstd": lambda x, ddof: (np.nanstd(x, axis=1, ddof=ddof),
                                     np.nanstd(x, ddof=ddof * 4))}[name]
    check(fn, NANS.astype(dtype), ddof=ddof)


@pytest.mark.parametrize("ddof", [1, 2, 3])
def test_masked_nanvar_with_ddof_is_numpys(ddof):
    mask = np.array([[True, True, False, True, True], [True] * 5,
                     [False, True, True, False, False], [True] * 5])
    check(lambda x, m, ddof: (np.nanvar(x, axis=1, ddof=ddof, where=m),
                              np.nanstd(x, axis=1, ddof=ddof, where=m)),
          NANS.astype(np.float32), mask, ddof=ddof)


def test_nanvar_of_integers_is_var_as_in_numpy():
    """Integers have no NaN: NumPy's nanvar is its var, inf where ddof reaches the count."""
    ints = np.array([[1, 5, 2], [3, 3, 3]], np.int32)
    check(lambda x: (np.nanvar(x, axis=1, ddof=3), np.nanstd(x, axis=1, ddof=4),
                     np.nanvar(x, axis=1, ddof=1)), ints)


# ==========================================================================================
# where= masks of other dtypes: a TypeError, as NumPy raises it
# ==========================================================================================

WHERE_REDUCTIONS = {
    "nansum": lambda x, m: np.nansum(x, axis=1, where=m),
    "nanprod": lambda x, m: np.nanprod(x, axis=1, where=m),
    "nanmax": lambda x, m: np.nanmax(x, axis=1, where=m, initial=-10.0),
    "nanmin": lambda x, m: np.nanmin(x, axis=1, where=m, initial=10.0),
    "nanmean": lambda x, m: np.nanmean(x, axis=1, where=m),
    "nanvar": lambda x, m: np.nanvar(x, axis=1, where=m),
    "nanstd": lambda x, m: np.nanstd(x, axis=1, where=m),
    "sum": lambda x, m: np.sum(x, axis=1, where=m),
    "max": lambda x, m: x.max(axis=1, where=m, initial=-10.0),
    "mean": lambda x, m: x.mean(axis=1, where=m),
    "var": lambda x, m: np.var(x, axis=1, where=m),
    "any": lambda x, m: np.any(x, axis=1, where=m),
}


@pytest.mark.parametrize("mask_dtype", [np.int64, np.int8, np.uint8, np.float32])
@pytest.mark.parametrize("name", list(WHERE_REDUCTIONS))
def test_a_mask_that_is_not_bool_is_a_type_error(name, mask_dtype):
    fn = WHERE_REDUCTIONS[name]
    mask = MASK.astype(mask_dtype)
    assert isinstance(numpy_raises(fn, X, mask), TypeError)
    with pytest.raises(TypeError, match=rf"where=.*mask has dtype {np.dtype(mask_dtype)}.*bool"
                       ) as info:
        nm.jit(fn).lower(X, mask)
    assert isinstance(info.value, nm.NumbamrError)


@pytest.mark.parametrize("name", ["nansum", "nanmean", "nanvar", "sum"])
def test_an_integer_mask_computed_inside_is_a_type_error(name):
    fn = WHERE_REDUCTIONS[name]
    with pytest.raises(nm.TraceError, match=r"mask has dtype int8"):
        nm.jit(lambda x, m: fn(x, m.astype(np.int8))).lower(X, MASK)


@pytest.mark.parametrize("name", ["nansum", "nanmax", "nanmean", "nanvar"])
def test_bool_masks_of_the_nan_reductions_are_numpys(name):
    x = X.copy()
    x[0, 2] = x[1, 1] = np.nan
    check(WHERE_REDUCTIONS[name], x, MASK)


# ==========================================================================================
# dtype= of reductions: complex and other unsupported dtypes are refused naming the argument
# ==========================================================================================

DTYPE_REDUCTIONS = {
    "sum": lambda x, dt: x.sum(dtype=dt),
    "prod": lambda x, dt: np.prod(x, axis=1, dtype=dt),
    "mean": lambda x, dt: np.mean(x, dtype=dt),
    "var": lambda x, dt: x.var(axis=0, dtype=dt),
    "std": lambda x, dt: np.std(x, dtype=dt),
    "nansum": lambda x, dt: np.nansum(x, axis=1, dtype=dt),
    "nanprod": lambda x, dt: np.nanprod(x, dtype=dt),
    "nanmean": lambda x, dt: np.nanmean(x, dtype=dt),
    "nanvar": lambda x, dt: np.nanvar(x, axis=1, dtype=dt),
    "nanstd": lambda x, dt: np.nanstd(x, dtype=dt),
}


@pytest.mark.parametrize("dt", [np.complex64, complex, np.complex128], ids=str)
@pytest.mark.parametrize("name", list(DTYPE_REDUCTIONS))
def test_a_complex_dtype_of_a_reduction_is_refused(name, dt):
    fn = DTYPE_REDUCTIONS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.asarray(fn(X, dt)).dtype.kind == "c"        # NumPy computes it
    with pytest.raises(nm.DTypeError, match=rf"dtype= argument of {name} .*complex") as info:
        nm.jit(fn).lower(X, dt)
    assert info.value.loc is not None and os.path.samefile(info.value.loc.filename, __file__)


@pytest.mark.parametrize("dt,match", [(object, r"object"), ("U3", r"<U3"),
                                      ("no such dtype", r"not understood")],
                         ids=["object", "str", "unknown"])
def test_other_unsupported_reduction_dtypes_are_refused(dt, match):
    with pytest.raises(nm.DTypeError, match=r"dtype= argument of sum.*" + match):
        nm.jit(lambda x: x.sum(axis=1, dtype=dt)).lower(X)


@pytest.mark.parametrize("dt", [np.float64, np.int64, np.float16, bool])
def test_supported_reduction_dtypes_are_numpys(dt):
    check(lambda x: (x.sum(axis=1, dtype=dt), np.mean(x, axis=0, dtype=np.float64),
                     np.nansum(x, dtype=dt)), X, rtol=1e-3 if dt is np.float16 else 1e-5)


# ==========================================================================================
# NumPy scalars beside traced where= masks
# ==========================================================================================

SCALAR_CASES = {
    "sum_f32": lambda x, m: np.sum(x, where=m, initial=np.float32(0)),
    "sum_f64_axis": lambda x, m: np.sum(x, axis=1, where=m, initial=np.float64(1.5)),
    "max_f64_neg_inf": lambda x, m: x.max(where=m, initial=np.float64(-np.inf)),
    "max_f64_axis": lambda x, m: x.max(axis=0, where=m, initial=np.float64(-np.inf)),
    "min_i64": lambda x, m: x.min(axis=1, where=m, initial=np.int64(100)),
    "prod_f16": lambda x, m: np.prod(x, axis=1, where=m, initial=np.float16(2)),
    "nanmax_f32": lambda x, m: np.nanmax(x, axis=1, where=m, initial=np.float32(-1)),
    "nansum_u8": lambda x, m: np.nansum(x, axis=1, where=m, initial=np.uint8(3)),
    "sum_int_i8": lambda x, m: np.sum(x.astype(np.int32), axis=1, where=m, initial=np.int8(5)),
    "max_int_f64": lambda x, m: np.max(x.astype(np.int32), axis=1, where=m,
                                       initial=np.float64(5.5)),
    "max_nan": lambda x, m: np.max(x, axis=1, where=m, initial=np.float64(np.nan)),
    "mask_and_np_bool": lambda x, m: np.mean(x, axis=1, where=m & np.bool_(True)),
    "np_bool_mask": lambda x, m: np.sum(x, axis=1, where=np.bool_(False), initial=np.float32(3)),
    "zero_d_mask": lambda x, m: np.mean(x, axis=1, where=np.array(True)),
    "zero_d_initial": lambda x, m: np.sum(x, axis=1, where=m, initial=np.array(3.0)),
    "scaled_by_np_scalar": lambda x, m: np.sum(x * np.float32(2), axis=1, where=m),
}


@pytest.mark.parametrize("name", list(SCALAR_CASES))
def test_numpy_scalars_with_traced_masks_are_numpys(name):
    check(SCALAR_CASES[name], X, MASK)


def test_a_numpy_scalar_initial_out_of_range_is_refused_naming_it():
    fn = lambda x, m: x.astype(np.int8).min(axis=1, where=m, initial=np.int64(300))  # noqa
    assert type(numpy_raises(fn, X, MASK)) is OverflowError
    with pytest.raises(nm.TraceError, match=r"min\(initial=np.int64\(300\)\): .*out of bounds "
                       r"for int8"):
        nm.jit(fn).lower(X, MASK)


# ==========================================================================================
# read-only inputs and broadcast views
# ==========================================================================================

def rows_centered(x):
    return x - x.max(axis=1, keepdims=True), x.sum(axis=0)


def test_read_only_input():
    x = X.copy()
    x.setflags(write=False)
    check(rows_centered, x)
    check(rows_centered, x[:, ::-1])
    assert not x.flags.writeable and np.array_equal(x, X)


@pytest.mark.parametrize("view", [
    lambda: np.broadcast_to(np.arange(4, dtype=np.float32), (3, 4)),
    lambda: np.broadcast_to(np.arange(3, dtype=np.float32)[:, None], (3, 4)),
    lambda: np.broadcast_to(np.float32(2.5), (3, 4)),
], ids=["rows", "columns", "scalar"])
def test_broadcast_views(view):
    check(rows_centered, view())
    check(lambda x, y: (x * y).sum(axis=1), X, view())


# ==========================================================================================
# a jitted function calling another: traced inline
# ==========================================================================================

@nm.jit
def centered(x, axis=1):
    return x - x.mean(axis=axis, keepdims=True)


@nm.jit
def variance_of_centered(x):
    c = centered(x)
    return (c * c).sum(axis=1) / x.shape[1], centered(x=x, axis=0).max(axis=0)


def test_a_jitted_function_calls_another_inline():
    check(variance_of_centered.fn, X, jitted=variance_of_centered,
          ref=lambda x: (x.var(axis=1), (x - x.mean(axis=0)).max(axis=0)))
    assert len(centered._cache) == 0           # traced as part of the caller, not compiled
    check(centered.fn, X, jitted=centered)      # and still a function of its own
    assert len(centered._cache) == 1


def test_an_inline_call_is_fused_into_the_callers_kernel():
    @nm.jit
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def log_softmax_sum(x):
        return np.log(softmax(x)).sum(axis=-1)
    jitted = nm.jit(log_softmax_sum)
    assert len(jitted.lower(X).kernels) == 1
    check(log_softmax_sum, X, jitted=jitted,
          ref=lambda x: (x - x.max(-1, keepdims=True) - np.log(
              np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True))).sum(-1))


# ==========================================================================================
# the user's own exceptions surface as themselves
# ==========================================================================================

LOOKUP = {"a": 2.0}


def raises_value_error(x, kind):
    if kind == "bad":
        raise ValueError("bad kind")  # at:value_error
    return x * LOOKUP[kind]  # at:key_error


def line_of(marker):
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# at:{marker}"))


@pytest.mark.parametrize("kind,error,marker", [("bad", ValueError, "value_error"),
                                               ("missing", KeyError, "key_error")])
@pytest.mark.parametrize("how", ["call", "lower"])
def test_the_users_exception_surfaces_as_itself(kind, error, marker, how):
    jitted = nm.jit(raises_value_error)
    with pytest.raises(error) as info:
        (jitted if how == "call" else jitted.lower)(X, kind)
    e = info.value
    assert type(e) is error and not isinstance(e, nm.NumbamrError)
    assert type(numpy_raises(raises_value_error, X, kind)) is error     # as NumPy's run
    note = "\n".join(getattr(e, "__notes__", []))
    assert "raises_value_error" in note and f"{__file__}:{line_of(marker)}" in note, note


@pytest.mark.parametrize("fn,error", [
    (lambda x: [][x.ndim], IndexError),
    (lambda x: x.reshape(12, foo=1), TypeError),
    (lambda x: x.sum(axis=1) / {}["k"], KeyError),
], ids=["index", "unknown_keyword", "dict"])
def test_python_errors_are_the_same_as_numpys(fn, error):
    assert type(numpy_raises(fn, X)) is error
    with pytest.raises(error) as info:
        nm.jit(fn)(X)
    assert type(info.value) is error


def test_an_exception_in_an_inline_call_names_the_outer_function():
    @nm.jit
    def inner(x):
        raise ValueError("inner failed")

    def outer(x):
        return inner(x).sum()
    with pytest.raises(ValueError, match="inner failed") as info:
        nm.jit(outer)(X)
    assert "tracing outer" in "\n".join(info.value.__notes__)


# ==========================================================================================
# integer powers and Python integers out of range
# ==========================================================================================

INTS = np.array([[1, 2, -3, 4], [0, 5, 2, -1]], np.int32)


@pytest.mark.parametrize("power", [
    lambda x: x ** -1, lambda x: x ** -2, lambda x: np.power(x, -1),
    lambda x: x ** np.int64(-1), lambda x: x ** np.int8(-3), lambda x: x ** np.array(-1),
    lambda x: x ** np.full(4, -2), lambda x: (x > 0) ** -1, lambda x: x.astype(np.int8) ** -1,
    lambda x: x.astype(np.uint16) ** np.int8(-1),
], ids=["py", "py2", "np_power", "int64", "int8", "zero_d", "uniform", "bool", "int8_base",
        "uint16_base"])
def test_an_integer_to_a_constant_negative_power_raises_as_numpy(power):
    want = numpy_raises(power, INTS)
    assert type(want) is ValueError
    with pytest.raises(ValueError, match=r"^Integers to negative integer powers are not "
                       r"allowed\.") as info:
        nm.jit(power).lower(INTS)
    assert isinstance(info.value, NumericError) and str(want) in str(info.value)


def test_a_static_negative_exponent_raises_as_numpy():
    fn = lambda x, e: x ** e  # noqa: E731
    assert type(numpy_raises(fn, INTS, -1)) is ValueError
    with pytest.raises(ValueError, match=r"negative integer powers"):
        nm.jit(fn)(INTS, -1)
    check(fn, INTS, e=3)
    check(fn, INTS, e=-1.0)                 # a float exponent: float results


def test_integer_powers_numpy_computes():
    exps = np.array([[0, 3, 2, 1], [4, 0, 1, 5]], np.int64)
    check(lambda x, e: (x ** e, x ** 0, x ** 3, 2 ** np.abs(x), x ** np.uint8(2),
                        x.astype(np.float32) ** -1), INTS, exps)


def test_unsigned_to_a_negative_python_int_overflows_first_as_numpy():
    fn = lambda x: x.astype(np.uint8) ** -1  # noqa: E731
    assert type(numpy_raises(fn, INTS)) is OverflowError
    with pytest.raises(OverflowError, match=r"-1 out of bounds for uint8") as info:
        nm.jit(fn).lower(INTS)
    assert isinstance(info.value, ScalarOverflowError)


@pytest.mark.parametrize("fn", [lambda x: x.astype(np.uint8) + 300,
                                lambda x: x.astype(np.int8) * 200,
                                lambda x: np.maximum(x.astype(np.uint16), -1)],
                         ids=["uint8_add", "int8_mul", "uint16_maximum"])
def test_python_ints_out_of_range_overflow_as_numpy(fn):
    assert type(numpy_raises(fn, INTS)) is OverflowError
    with pytest.raises(OverflowError, match=r"out of bounds") as info:
        nm.jit(fn).lower(INTS)
    assert isinstance(info.value, nm.NumbamrError)


def test_comparisons_with_python_ints_out_of_range_are_numpys():
    check(lambda x: (x.astype(np.int8) < 1000, 1000 > x.astype(np.int8),
                     x.astype(np.int8) == -1000, x.astype(np.uint8) >= -1,
                     x.astype(np.uint8) != 256, -1 < x.astype(np.uint16),
                     x.astype(np.int8) <= 127), INTS)
