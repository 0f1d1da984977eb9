"""Every misuse raises a numbamr error (a ``numbamr.NumbamrError``) that says what is wrong.

Errors raised while tracing carry the user's line (``err.loc``); those tests check that it
points at the offending line of this file, marked with a ``# at:<name>`` comment.
"""
import os

import numpy as np
import pytest

import numbamr as nm

X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
IDX = np.zeros((3, 1), np.int64)        # indices for np.take_along_axis
# a numpy array captured from the enclosing scope, its values not a function of its index
CONST = np.array([1.0, 3.0, 2.0, 5.0], np.float32)


def line_of(marker):
    """The line number of this file that carries ``# at:<marker>``."""
    tag = f"# at:{marker}"
    with open(__file__) as f:
        hits = [i for i, line in enumerate(f, 1) if line.rstrip().endswith(tag)]
    assert len(hits) == 1, f"marker {tag!r} found on lines {hits}"
    return hits[0]


def assert_loc(err, marker):
    """``err`` names this file and the line marked ``marker``."""
    loc = err.loc
    assert loc is not None, f"{type(err).__name__} has no source location: {err}"
    assert os.path.samefile(loc.filename, __file__), loc
    assert loc.lineno == line_of(marker), f"{loc} is not the line marked {marker!r}"
    assert str(loc.lineno) in str(err)          # the message shows the line too


def lower(fn, *args, **kwargs):
    return nm.jit(fn).lower(*args, **kwargs)


# ==========================================================================================
# errors raised while tracing: (marker, fn, error class, message regex)
# ==========================================================================================

TRACE_CASES = [
    # unsupported numpy functions and methods name the function
    ("fft", lambda x: np.fft.fft(x), nm.TraceError, r"np\.fft\.fft\b.*not supported"),  # at:fft
    ("cumsum", lambda x: np.cumsum(x, axis=1), nm.TraceError, r"np\.cumsum\b"),  # at:cumsum
    ("sort", lambda x: np.sort(x), nm.TraceError, r"np\.sort\b"),  # at:sort
    ("take_along", lambda x: np.take_along_axis(x, IDX, axis=1),  # at:take_along
     nm.TraceError, r"np\.take_along_axis\b.*np\.where\(np\.arange\(n\) == idx"),
    ("concatenate", lambda x: np.concatenate([x, x]), nm.TraceError,  # at:concatenate
     r"np\.concatenate\b"),
    ("linalg", lambda x: np.linalg.svd(x), nm.TraceError, r"np\.linalg\.svd\b"),  # at:linalg
    ("norm_2", lambda x: np.linalg.norm(x, 2), nm.TraceError,  # at:norm_2
     r"matrix norm ord=2 needs singular values"),
    ("norm_axes", lambda x: np.linalg.norm(x, axis=(1, 1)), nm.ShapeError,  # at:norm_axes
     r"neither one axis nor two distinct"),
    ("norm_str", lambda x: np.linalg.norm(x, "fro", axis=1), nm.TraceError,  # at:norm_str
     r"ord='fro' is not a vector norm"),
    ("matvec_shapes", lambda x: x @ x[0, :3], nm.ShapeError,  # at:matvec_shapes
     r"\(3, 4\) and \(3,\) are not aligned"),
    ("average_axis", lambda x: np.average(x, weights=x[0]), nm.TraceError,  # at:average_axis
     r"axis must be specified"),
    ("average_len", lambda x: np.average(x, axis=0, weights=x[0]), nm.ShapeError,  # at:average_len
     r"length of weights"),
    ("round_bool", lambda x: np.round(x > 0, 1), nm.TraceError, r"bools"),  # at:round_bool
    ("einsum_mm", lambda x: np.einsum("ij,kj->ik", x, x), nm.TraceError,  # at:einsum_mm
     r"matrix product"),
    ("einsum_diag", lambda x: np.einsum("ii->i", x[:, :3]), nm.TraceError,  # at:einsum_diag
     r"repeated in 'ii'"),
    ("einsum_dots", lambda x: np.einsum("...j->...", x), nm.TraceError,  # at:einsum_dots
     r"'\.\.\.' is not supported"),
    ("einsum_rank", lambda x: np.einsum("ijk->i", x), nm.ShapeError,  # at:einsum_rank
     r"subscripts 'ijk' for an operand of shape \(3, 4\)"),
    ("einsum_sizes", lambda x: np.einsum("ij,ij->i", x, x[:, :3]), nm.ShapeError,  # at:einsum_sizes
     r"letter 'j' has sizes 4 and 3"),
    ("einsum_out", lambda x: np.einsum("ij->k", x), nm.TraceError,  # at:einsum_out
     r"output subscripts 'k'"),
    ("dot", lambda x: np.dot(x, x.T), nm.TraceError, r"np\.dot\b"),  # at:dot
    ("method", lambda x: x.cumsum(axis=1), nm.TraceError, r"\.cumsum\b"),  # at:method
    ("ufunc_reduce", lambda x: np.add.reduce(x, axis=1), nm.TraceError,  # at:ufunc_reduce
     r"np\.add\.reduce"),
    ("ufunc_out", lambda x: np.exp(x, out=x), nm.TraceError, r"out="),  # at:ufunc_out
    ("sum_out", lambda x: x.sum(axis=1, out=x[:, 0]), nm.TraceError, r"out="),  # at:sum_out
    ("where_1arg", lambda x: np.where(x > 0), nm.TraceError, r"np\.where"),  # at:where_1arg
    ("ptp_out", lambda x: np.ptp(x, axis=1, out=x[:, 0]), nm.TraceError, r"out="),  # at:ptp_out
    ("unsupported_ufunc", lambda x: np.nextafter(x, x), nm.TraceError,  # at:unsupported_ufunc
     r"np\.nextafter\b"),
    # matmul
    ("matmul", lambda x: x @ x.T, nm.TraceError, r"matmul"),  # at:matmul
    ("np_matmul", lambda x: np.matmul(x, x.T), nm.TraceError, r"np\.matmul\b"),  # at:np_matmul
    # shapes that do not broadcast name both shapes
    ("bcast_rows", lambda x: x + x[:2], nm.ShapeError,  # at:bcast_rows
     r"\(3, 4\).*\(2, 4\).*broadcast"),
    ("bcast_cols", lambda x: x * x[:, :3], nm.ShapeError,  # at:bcast_cols
     r"\(3, 4\).*\(3, 3\).*broadcast"),
    ("bcast_rank", lambda x: x[:, None] - x[:, :3], nm.ShapeError,  # at:bcast_rank
     r"\(3, 1, 4\).*\(3, 3\)"),
    ("bcast_where", lambda x: np.where(x > 0, x, x[:, :2]), nm.ShapeError,  # at:bcast_where
     r"\(3, 2\)"),
    ("broadcast_to", lambda x: np.broadcast_to(x, (5, 4)), nm.ShapeError,  # at:broadcast_to
     r"\(3, 4\).*\(5, 4\)"),
    # axes
    ("axis_2", lambda x: x.sum(axis=2), nm.ShapeError,  # at:axis_2
     r"axis 2 .*out of bounds.*dimension 2"),
    ("axis_neg", lambda x: x.max(axis=-3), nm.ShapeError,  # at:axis_neg
     r"axis -3 .*out of bounds"),
    ("axis_tuple", lambda x: np.mean(x, axis=(0, 2)), nm.ShapeError,  # at:axis_tuple
     r"axis 2 .*out of bounds"),
    ("axis_var", lambda x: x.var(axis=5), nm.ShapeError, r"axis 5 .*out of bounds"),  # at:axis_var
    ("axis_argmax", lambda x: x.argmax(axis=2), nm.ShapeError,  # at:axis_argmax
     r"axis 2 .*out of bounds"),
    ("axis_logsumexp", lambda x: nm.logsumexp(x, axis=-4), nm.ShapeError,  # at:axis_logsumexp
     r"axis -4"),
    ("axis_float", lambda x: x.sum(axis=1.0), nm.ShapeError, r"integer"),  # at:axis_float
    ("dup_axes", lambda x: x.sum(axis=(1, -1)), nm.ShapeError, r"duplicate"),  # at:dup_axes
    ("dup_axes_same", lambda x: np.max(x, axis=(0, 0)), nm.ShapeError,  # at:dup_axes_same
     r"duplicate"),
    # reshape and other movement
    ("reshape_size", lambda x: x.reshape(5, -1), nm.ShapeError,  # at:reshape_size
     r"cannot reshape.*12.*\(5, -1\)"),
    ("reshape_shape", lambda x: x.reshape(2, 2), nm.ShapeError,  # at:reshape_shape
     r"cannot reshape.*\(3, 4\).*\(2, 2\)"),
    ("reshape_two_minus1", lambda x: x.reshape(-1, -1), nm.ShapeError,  # at:reshape_two_minus1
     r"one dimension can be -1"),
    ("np_reshape", lambda x: np.reshape(x, (7,)), nm.ShapeError, r"\(7,\)"),  # at:np_reshape
    ("transpose_perm", lambda x: x.transpose(0, 0), nm.ShapeError,  # at:transpose_perm
     r"permutation"),
    ("squeeze", lambda x: np.squeeze(x, axis=0), nm.ShapeError, r"squeeze"),  # at:squeeze
    ("expand_dims", lambda x: np.expand_dims(x, 3), nm.ShapeError,  # at:expand_dims
     r"axis 3"),
    ("index_oob", lambda x: x[3], nm.ShapeError, r"index 3 .*out of bounds"),  # at:index_oob
    ("index_oob_col", lambda x: x[:, -5], nm.ShapeError, r"index -5"),  # at:index_oob_col
    ("too_many_idx", lambda x: x[0, 1, 2], nm.ShapeError, r"too many indices"),  # at:too_many_idx
    ("two_ellipsis", lambda x: x[..., 0, ...], nm.ShapeError, r"ellipsis"),  # at:two_ellipsis
    ("fancy_index", lambda x: x[[0, 2]], nm.TraceError, r"advanced indexing"),  # at:fancy_index
    ("bool_index", lambda x: x[x > 0], nm.TraceError, r"advanced indexing"),  # at:bool_index
    # dtypes of values made inside the function
    ("complex_scalar", lambda x: x * 1j, nm.DTypeError, r"complex"),  # at:complex_scalar
    ("complex_np_scalar", lambda x: x + np.complex64(1), nm.DTypeError,  # at:complex_np_scalar
     r"complex64"),
    ("astype_complex", lambda x: x.astype(np.complex64), nm.DTypeError,  # at:astype_complex
     r"complex64"),
    ("astype_object", lambda x: x.astype(object), nm.DTypeError, r"object"),  # at:astype_object
    ("astype_str", lambda x: nm.astype(x, "U3"), nm.DTypeError, r"<U3"),  # at:astype_str
    ("bool_subtract", lambda x: (x > 0) - (x > 1), nm.DTypeError,  # at:bool_subtract
     r"subtract.*bool"),
    ("float_bitand", lambda x: x & x, nm.DTypeError, r"bool or integer"),  # at:float_bitand
    ("string_operand", lambda x: x + "a", nm.TraceError, r"str"),  # at:string_operand
    # values that are not known while tracing
    ("float", lambda x: float(x.sum()), nm.TraceError, r"no value"),  # at:float
    ("int_index", lambda x: x[:, int(x.max())], nm.TraceError, r"no value"),  # at:int_index
    ("item", lambda x: x.sum().item(), nm.TraceError, r"\.item\b"),  # at:item
    ("bool", lambda x: x * bool(x.sum()), nm.TraceError, r"control flow"),  # at:bool
    ("and", lambda x: (x > 0) and (x < 1), nm.TraceError, r"control flow"),  # at:and
    ("not", lambda x: x if not x.any() else -x, nm.TraceError, r"control flow"),  # at:not
    ("asarray", lambda x: np.asarray(x) + 1, nm.TraceError, r"NumPy array"),  # at:asarray
    # keywords of reductions: masks, starting values, and ones numbamr does not know
    ("max_where", lambda x: x.max(axis=1, where=x > 0), nm.TraceError,  # at:max_where
     r"'maximum' does not have an identity.*initial"),
    ("nanmax_where", lambda x: np.nanmax(x, axis=1, where=x > 0), nm.TraceError,  # at:nanmax_where
     r"'maximum' does not have an identity.*initial"),
    ("where_float", lambda x: x.sum(axis=1, where=x), nm.TraceError,  # at:where_float
     r"sum\(where=\.\.\.\): the mask has dtype float32; it must be bool"),
    ("where_shape", lambda x: x.mean(axis=1, where=(x > 0)[:, :2]), nm.ShapeError,  # at:where_shape
     r"\(3, 2\).*\(3, 4\)"),
    ("where_list", lambda x: np.sum(x, where=[True] * 4), nm.TraceError,  # at:where_list
     r"sum\(where=\.\.\.\) takes a traced bool array or a bool, not list"),
    ("initial_int8", lambda x: x.astype(np.int8).min(initial=300), nm.TraceError,  # at:initial_int8
     r"min\(initial=300\): .*out of bounds for int8"),
    ("initial_array", lambda x: x.sum(initial=x[0]), nm.TraceError,  # at:initial_array
     r"initial=\.\.\.\) takes a number, not Tracer"),
    ("method_kw", lambda x: x.sum(axis=1, foo=3), nm.TraceError,  # at:method_kw
     r"sum: arguments \['foo'\] are not supported"),
    ("argmax_kw", lambda x: x.argmax(axis=1, where=x > 0), nm.TraceError,  # at:argmax_kw
     r"argmax: arguments \['where'\]"),
    # (an exception of the function's own code is raised as itself: test_edge_cases.py)
    # numpy array constants from the enclosing scope
    ("const", lambda x: x + CONST, nm.TraceError, r"constant of shape \(4,\)"),  # at:const
    ("const_left", lambda x: CONST * x, nm.TraceError, r"constant"),  # at:const_left
    ("const_where", lambda x: np.where(x > 0, x, CONST), nm.TraceError,  # at:const_where
     r"constant"),
]


@pytest.mark.parametrize("marker,fn,error,match", TRACE_CASES, ids=[c[0] for c in TRACE_CASES])
def test_trace_error(marker, fn, error, match):
    with pytest.raises(error, match=match) as info:
        lower(fn, X)
    assert isinstance(info.value, nm.NumbamrError)
    assert_loc(info.value, marker)


def test_unsupported_method_still_an_attribute_error_for_hasattr():
    def f(x):
        return x * 2 if hasattr(x, "cumsum") else x - 1

    with pytest.raises(nm.TraceError, match=r"\.cumsum"):
        lower(lambda x: x.cumsum(), X)
    got = nm.jit(f)(X)
    np.testing.assert_array_equal(got, X - 1)


# ==========================================================================================
# control flow and in-place mutation (statements, so written as functions)
# ==========================================================================================

def if_on_value(x):
    if x.sum() > 0:  # at:if
        return x
    return -x


def while_on_value(x):
    while x.max() > 1:  # at:while
        x = x / 2
    return x


def assert_on_value(x):
    assert (x > -100).all()  # at:assert
    return x


def setitem(x):
    x[0] = 1  # at:setitem
    return x


def setitem_slice(x):
    x[:, 1:] = 0.0  # at:setitem_slice
    return x


def iadd(x):
    x += 1  # at:iadd
    return x


def imul_derived(x):
    y = x * 2
    y *= x  # at:imul_derived
    return y


@pytest.mark.parametrize("fn,marker,match", [
    (if_on_value, "if", r"control flow.*np\.where"),
    (while_on_value, "while", r"control flow"),
    (assert_on_value, "assert", r"control flow"),
    (setitem, "setitem", r"in-place assignment"),
    (setitem_slice, "setitem_slice", r"in-place assignment"),
    (iadd, "iadd", r"in-place operators"),
    (imul_derived, "imul_derived", r"in-place operators"),
], ids=["if", "while", "assert", "setitem", "setitem_slice", "iadd", "imul_derived"])
def test_control_flow_and_mutation(fn, marker, match):
    with pytest.raises(nm.TraceError, match=match) as info:
        lower(fn, X)
    assert_loc(info.value, marker)
    with pytest.raises(nm.TraceError):           # calling fails the same way
        nm.jit(fn)(X.copy())


def test_mutation_never_touches_the_input():
    x = X.copy()
    with pytest.raises(nm.TraceError):
        nm.jit(setitem)(x)
    with pytest.raises(nm.TraceError):
        nm.jit(iadd)(x)
    np.testing.assert_array_equal(x, X)


def test_traced_array_leaked_from_another_call():
    leaked = []

    def keep(x):
        leaked.append(x)
        return x * 2

    def use(x):
        return x + leaked[0]  # at:leaked

    nm.jit(keep).lower(X)
    with pytest.raises(nm.TraceError, match=r"another call") as info:
        lower(use, X)
    assert_loc(info.value, "leaked")


@pytest.mark.parametrize("result,match", [
    ("text", r"str"), (None, r"NoneType"), ([1, "x"], r"output 1"), ({"a": object()}, r"'a'")],
    ids=["str", "None", "list_with_str", "dict_with_object"])
def test_returning_non_arrays(result, match):
    with pytest.raises(nm.TraceError, match=match):
        lower(lambda x: result, X)


# ==========================================================================================
# arguments
# ==========================================================================================

def two_args(x, y):
    return x + y


@pytest.mark.parametrize("args,kwargs,match", [
    ((X,), {}, r"missing.*'y'"),
    ((X, X, X), {}, r"too many"),
    ((X, X), {"z": X}, r"unexpected keyword.*'z'"),
    ((X, X), {"x": X}, r"multiple values.*'x'"),
    ((), {}, r"missing"),
], ids=["too_few", "too_many", "unknown_keyword", "twice", "none"])
def test_wrong_number_of_arguments(args, kwargs, match):
    fn = nm.jit(two_args)
    with pytest.raises(nm.ArgumentError, match=r"two_args\(\): .*" + match):
        fn(*args, **kwargs)
    with pytest.raises(nm.ArgumentError, match=r"two_args\(\): .*" + match):
        fn.lower(*args, **kwargs)


def scaled(x, scale):
    return x * len(scale)


@pytest.mark.parametrize("value", [[1, 2], {"a": 1}, {1, 2}], ids=["list", "dict", "set"])
def test_unhashable_static_argument(value):
    fn = nm.jit(scaled)
    with pytest.raises(nm.ArgumentError, match=r"'scale'.*" + type(value).__name__):
        fn(X, value)
    with pytest.raises(nm.ArgumentError, match=r"'scale'"):
        fn(X, scale=value)


@pytest.mark.parametrize("bad,match", [
    (np.array([[1, "a"]], dtype=object), r"argument 'x'.*object"),
    (np.array(["a", "bc"]), r"argument 'x'.*<U2"),
    (np.ones((2, 3), np.complex64), r"argument 'x'.*complex64"),
    (np.ones(3, np.complex128), r"argument 'x'.*complex128"),
    (np.array(["2020-01-01"], dtype="datetime64[D]"), r"argument 'x'.*datetime64"),
], ids=["object", "str", "complex64", "complex128", "datetime"])
def test_non_numeric_argument_dtype(bad, match):
    fn = nm.jit(lambda x, y: x.sum() + y.sum())
    with pytest.raises(nm.DTypeError, match=match):
        fn(bad, X)
    with pytest.raises(nm.DTypeError, match=match.replace("'x'", "'y'")):
        fn.lower(X, bad)


def test_strides_not_a_multiple_of_the_itemsize():
    buf = np.zeros(64, np.uint8)
    odd = np.ndarray((3,), dtype=np.float32, buffer=buf, offset=0, strides=(6,))
    with pytest.raises(nm.ArgumentError, match=r"'x'.*stride of 6 bytes"):
        nm.jit(lambda x: x * 2)(odd)


# ==========================================================================================
# the decorator and kernel options
# ==========================================================================================

OPTION_CASES = [
    (dict(threads_per_row=3), r"threads_per_row.*power of two.*3"),
    (dict(threads_per_row=0), r"threads_per_row"),
    (dict(threads_per_row=2048), r"threads_per_row"),
    (dict(threads_per_row=2.0), r"threads_per_row.*integer"),
    (dict(threads_per_row=True), r"threads_per_row.*integer"),
    (dict(rows_per_block=0), r"rows_per_block.*at least 1.*0"),
    (dict(rows_per_block=-2), r"rows_per_block"),
    (dict(threads_per_row=64, rows_per_block=32), r"1024"),
    (dict(layout="diag"), r"layout.*'row' or 'col'.*'diag'"),
    (dict(layout=1), r"layout"),
    (dict(vector=3), r"vector.*3"),
    (dict(upcast=-1), r"upcast"),
    (dict(unroll=0), r"unroll"),
]


@pytest.mark.parametrize("options,match", OPTION_CASES,
                         ids=["-".join(f"{k}={v}" for k, v in o.items()) for o, _ in OPTION_CASES])
def test_invalid_kernel_options(options, match):
    with pytest.raises(nm.ArgumentError, match=match):
        nm.jit(**options)
    with pytest.raises(nm.ArgumentError, match=match):
        nm.jit(lambda x: x.sum(), **options)


def test_jit_of_a_non_function():
    with pytest.raises(nm.ArgumentError, match=r"expects a function.*int"):
        nm.jit(5)


def test_every_error_class_is_a_numbamr_error():
    for cls in (nm.TraceError, nm.ShapeError, nm.DTypeError, nm.ArgumentError, nm.FusionError,
                nm.CompileError):
        assert issubclass(cls, nm.NumbamrError)
    # and the matching builtin, so generic handlers keep working
    assert issubclass(nm.ShapeError, ValueError) and issubclass(nm.TraceError, TypeError)
    assert issubclass(nm.DTypeError, TypeError) and issubclass(nm.ArgumentError, TypeError)
