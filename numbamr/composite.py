"""NumPy functions written with the traced ones: rounding, products with a vector, einsum,
vector and matrix norms, weighted averages, the ``*_like`` constructors and the NaN-skipping
variance. Each is a composition of the ops in ``trace.py``, so its reductions are scheduled
and fused as the user's own are (``x @ v`` and a weighted average are one kernel each).

``trace.py`` registers them (``UFUNCS``, ``FUNCTIONS``) when it is imported.
"""
import functools
import numbers

import numpy as np

from . import dtypes
from .errors import TraceError, ShapeError, user_loc
from .movement import _traced, broadcast_to, normalize_axis, reshape, transpose
from .nodes import _const
from .operands import _no_out, _wrap
from .reductions import (_count, _finish, _masked_count, _no_kw, _prepare, amax, amin, any_,
                         mean, nan_skipping, normalize_axes, prod, reduction_dtype, sum_, var)
from .tracer import Tracer
from .ufuncs import (_as_float, _float_fmod, absolute, add, astype, copysign, equal, floor,
                     greater, less, less_equal, logical_and, logical_or, multiply, not_equal,
                     power, sqrt, subtract, true_divide, where)


# ---- rounding -------------------------------------------------------------------------
def rint(x):
    """Round half to even (NumPy's rint): the floor, one up where the rest is over a half
    or a half above an odd integer; zeros keep the input's sign (rint(-0.3) is -0.0)."""
    (x,) = _as_float(x)
    r = floor(x)
    rest = subtract(x, r)              # exact: x and its floor share their high digits
    odd = not_equal(_float_fmod(r, 2.0), 0)
    up = logical_or(greater(rest, 0.5), logical_and(equal(rest, 0.5), odd))
    return copysign(where(up, add(r, 1.0), r), x)


def around(a, decimals=0, out=None):
    """NumPy's round: rint of ``a * 10**decimals`` divided back (of the quotient by
    ``10**-decimals``, multiplied back, for negative decimals). Integers stay as they are, or
    round through float64 to negative decimals; bools become float16 (as NumPy's do)."""
    _no_out(out, "round")
    a = _prepare(a, "round")
    if not isinstance(decimals, numbers.Integral) or isinstance(decimals, bool):
        raise TraceError(f"round(decimals={decimals!r}) takes an integer", user_loc())
    if a.dtype == dtypes.BOOL:
        if decimals != 0:
            raise TraceError("round of bools to nonzero decimals: NumPy cannot cast the "
                             "result back to bool either", user_loc())
        return astype(a, np.float16)
    scale = float(10.0 ** abs(decimals))
    if not dtypes.is_float(a.dtype):
        if decimals >= 0:
            return a
        return astype(multiply(rint(true_divide(a, scale)), scale), a.dtype)
    if decimals == 0:
        return rint(a)
    if decimals > 0:
        return true_divide(rint(multiply(a, scale)), scale)
    return multiply(rint(true_divide(a, scale)), scale)


def signbit(x):
    """True where the sign bit is set (-0.0 and NaNs with it included)."""
    x = _traced(x, "signbit")
    if not dtypes.is_float(x.dtype):
        return less(x, 0) if x.dtype.kind != "b" else _like(x, False, dtypes.BOOL)
    return less(copysign(1.0, x), 0)


# ---- products with a vector -----------------------------------------------------------
def _vector_product(a, b, name):
    """``a @ b`` where one operand is a vector: the products summed along the contracted
    axis (the last of ``a``; the second to last of ``b``, or its only one)."""
    a, b = _traced(a, name), _traced(b, name)
    if a.ndim == 0 or b.ndim == 0:
        raise TraceError(f"np.{name} of a 0-d operand: use *", user_loc())
    if a.ndim > 1 and b.ndim > 1:
        raise TraceError(f"np.{name} of two matrices ({a.shape} and {b.shape}) is not a "
                         "reduction kernel; a product with a vector is, e.g. m @ v or "
                         "(v[:, None] * m).sum(0)", user_loc())
    k_axis = -1 if b.ndim == 1 else -2
    if a.shape[-1] != b.shape[k_axis]:
        raise ShapeError(f"np.{name}: shapes {a.shape} and {b.shape} are not aligned "
                         f"({a.shape[-1]} != {b.shape[k_axis]})", user_loc())
    if b.ndim > 1:
        a = reshape(a, (a.shape[0], 1))
    return _summed_products([a, b], (k_axis,))


def _summed_products(operands, axes):
    """The operands' broadcast product summed over ``axes`` (an empty tuple: the product
    itself), in NumPy's dtype for a dot product: the operands' common one (int8 stays int8),
    float16 multiplied and summed in float32, and for bools an any() of their and."""
    res_dt = np.result_type(*[x.dtype for x in operands])
    if res_dt == dtypes.BOOL:
        total = functools.reduce(logical_and, operands)
        return any_(total, axes) if axes else total
    acc = dtypes.compute_dtype(res_dt) if dtypes.is_float(res_dt) else res_dt
    total = functools.reduce(multiply, [astype(x, acc) for x in operands])
    return sum_(total, axes, dtype=res_dt) if axes else astype(total, res_dt)


def vecdot(x1, x2, axis=-1):
    """np.vecdot (and np.linalg.vecdot): the dot product of vectors along ``axis``."""
    return _summed_products([_traced(x1, "vecdot"), _traced(x2, "vecdot")], (axis,))


vecdot.keywords = ("axis",)        # a gufunc keyword numbamr takes (see Tracer.__array_ufunc__)


def matvec(x1, x2):
    """np.matvec: matrices (..., m, n) times vectors (..., n)."""
    x1, x2 = _traced(x1, "matvec"), _traced(x2, "matvec")
    if x1.ndim < 2 or x2.ndim < 1:
        raise ShapeError(f"np.matvec of shapes {x1.shape} and {x2.shape}: a matrix and a "
                         "vector are needed", user_loc())
    return _summed_products([x1, reshape(x2, x2.shape[:-1] + (1, x2.shape[-1]))], (-1,))


def vecmat(x1, x2):
    """np.vecmat: vectors (..., n) times matrices (..., n, m)."""
    x1, x2 = _traced(x1, "vecmat"), _traced(x2, "vecmat")
    if x1.ndim < 1 or x2.ndim < 2:
        raise ShapeError(f"np.vecmat of shapes {x1.shape} and {x2.shape}: a vector and a "
                         "matrix are needed", user_loc())
    return _summed_products([reshape(x1, x1.shape + (1,)), x2], (-2,))


def matmul(a, b, out=None, **kw):
    _no_out(out, "matmul")
    _no_kw(kw, "matmul")
    return _vector_product(a, b, "matmul")


def dot(a, b, out=None):
    _no_out(out, "dot")
    return _vector_product(a, b, "dot")


def inner(a, b):
    a, b = _traced(a, "inner"), _traced(b, "inner")
    if b.ndim != 1:
        raise TraceError("np.inner is supported with a vector as its second operand",
                         user_loc())
    return _vector_product(a, b, "inner")


# ---- einsum ---------------------------------------------------------------------------
def _einsum_subscripts(subscripts, operands):
    """(the operands' letters, the output's) of an einsum, checked as NumPy checks them."""
    if not isinstance(subscripts, str):
        raise TraceError("np.einsum takes its subscripts as a string", user_loc())
    spec = subscripts.replace(" ", "")
    if "." in spec:
        raise TraceError("np.einsum with '...' is not supported: name every axis",
                         user_loc())
    ins, arrow, out = spec.partition("->")
    ins = ins.split(",")
    if len(ins) != len(operands):
        raise TraceError(f"np.einsum: {len(ins)} operand subscripts for {len(operands)} "
                         "operands", user_loc())
    if not arrow:       # implicit: the letters seen once, in alphabetical order
        every = "".join(ins)
        out = "".join(sorted(c for c in set(every) if every.count(c) == 1))
    for subs, x in zip(ins, operands):
        if not subs.isalpha() and subs:
            raise TraceError(f"np.einsum: subscripts {subs!r} are not letters", user_loc())
        if len(subs) != x.ndim:
            raise ShapeError(f"np.einsum: subscripts {subs!r} for an operand of shape "
                             f"{x.shape}", user_loc())
        if len(set(subs)) != len(subs):
            raise TraceError(f"np.einsum: a letter repeated in {subs!r} (a diagonal) is not "
                             "supported", user_loc())
    if len(set(out)) != len(out) or not set(out) <= set("".join(ins)):
        raise TraceError(f"np.einsum: output subscripts {out!r} repeat a letter or name one "
                         "no operand has", user_loc())
    return ins, out


def _is_matrix_product(ins, out):
    """Two operands or more that each keep an output letter another lacks, and a letter
    summed away: a matrix product, which is no reduction kernel."""
    summed = set("".join(ins)) - set(out)
    own = [s for s in ins if any(c in out and any(c not in t for t in ins) for c in s)]
    return bool(summed) and len(own) >= 2


def einsum(subscripts, *operands, optimize=False, **kw):
    """np.einsum without '...' or repeated letters in one operand: every operand broadcast
    over all the letters, multiplied, summed over the letters the output lacks."""
    _no_kw(kw, "einsum")
    operands = [_traced(x, "einsum") for x in operands]
    ins, out = _einsum_subscripts(subscripts, operands)
    if _is_matrix_product(ins, out):
        raise TraceError(f"np.einsum({subscripts!r}) is a matrix product, not a reduction "
                         "kernel; a product with a vector is (e.g. 'ij,j->i')", user_loc())
    letters = sorted(set("".join(ins)), key="".join(ins).index)
    size = {}           # each letter's size other than 1 (size 1 broadcasts)
    for subs, x in zip(ins, operands):
        for c, n in zip(subs, x.shape):
            if n != 1 and size.setdefault(c, n) != n:
                raise ShapeError(f"np.einsum: letter {c!r} has sizes {size[c]} and {n}",
                                 user_loc())
    spread = []         # each operand over every letter (1 where it lacks one)
    for subs, x in zip(ins, operands):
        ordered = sorted(subs, key=letters.index)
        x = transpose(x, [subs.index(c) for c in ordered])
        spread.append(reshape(x, [x.shape[ordered.index(c)] if c in subs else 1
                                  for c in letters]))
    # every letter's size is some operand's, so the product has the full shape
    r = _summed_products(spread, tuple(i for i, c in enumerate(letters) if c not in out))
    kept = [c for c in letters if c in out]
    return transpose(r, [kept.index(c) for c in out]) if kept != list(out) else r


# ---- norms ----------------------------------------------------------------------------
def _vector_norm(x, ord, axis, keepdims):
    ax = absolute(x)
    if ord is None or ord == 2:
        return sqrt(sum_(multiply(x, x), axis, keepdims=keepdims))
    if ord == np.inf:
        return amax(ax, axis, keepdims=keepdims)
    if ord == -np.inf:
        return amin(ax, axis, keepdims=keepdims)
    if ord == 0:
        return sum_(astype(not_equal(x, 0), x.dtype), axis, keepdims=keepdims)
    if ord == 1:
        return sum_(ax, axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise TraceError(f"np.linalg.norm: ord={ord!r} is not a vector norm", user_loc())
    return power(sum_(power(ax, float(ord)), axis, keepdims=keepdims), float(1.0 / ord))


def _matrix_norm(x, ord, axes, keepdims):
    rows, cols = axes
    if ord in (None, "fro"):
        return sqrt(sum_(multiply(x, x), axes, keepdims=keepdims))
    if ord not in (1, -1, np.inf, -np.inf):
        raise TraceError(f"np.linalg.norm: the matrix norm ord={ord!r} needs singular values "
                         "and is not supported (ord=None, 'fro', 1, -1, inf, -inf are)",
                         user_loc())
    summed, over = (rows, cols) if ord in (1, -1) else (cols, rows)
    pick = amax if ord > 0 else amin
    r = pick(sum_(absolute(x), summed, keepdims=True), over, keepdims=True)
    return r if keepdims else reshape(r, [s for i, s in enumerate(r.shape) if i not in axes])


def _norm_input(x, name):
    """``x`` as NumPy's norms take it: floats as they are, integers and bools as float64."""
    x = _prepare(x, name)
    return x if dtypes.is_float(x.dtype) else astype(x, dtypes.FLOAT64)


def vector_norm(x, axis=None, keepdims=False, ord=2):
    """np.linalg.vector_norm: over ``axis`` (an int, a tuple, or None for everything)."""
    return _vector_norm(_norm_input(x, "vector_norm"), ord, axis, keepdims)


def matrix_norm(x, keepdims=False, ord="fro"):
    """np.linalg.matrix_norm: over the last two axes."""
    x = _norm_input(x, "matrix_norm")
    if x.ndim < 2:
        raise ShapeError(f"np.linalg.matrix_norm of shape {x.shape}: at least two dimensions "
                         "are needed", user_loc())
    return _matrix_norm(x, ord, (x.ndim - 2, x.ndim - 1), keepdims)


def norm(x, ord=None, axis=None, keepdims=False):
    """np.linalg.norm: vector norms along one axis, matrix norms over two (Frobenius, 1,
    inf and their negatives), the 2-norm of everything for axis=None and ord=None."""
    x = _norm_input(x, "norm")
    if axis is None and ord is None:
        return sqrt(sum_(multiply(x, x), None, keepdims=keepdims))
    if axis is None:
        axis = tuple(range(x.ndim))
    axes = tuple(normalize_axis(a, x.ndim) for a in
                 ((axis,) if isinstance(axis, numbers.Integral) else axis))
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) == 2 and axes[0] != axes[1]:
        return _matrix_norm(x, ord, axes, keepdims)
    raise ShapeError(f"np.linalg.norm: axes {axis} are neither one axis nor two distinct "
                     "ones", user_loc())


# ---- weighted averages ----------------------------------------------------------------
def _weights_along(a, w, axis):
    """``w`` broadcast to ``a``'s shape: the same shape, or 1-D along an integer ``axis``."""
    if w.shape == a.shape:
        return w
    if axis is None:
        raise TraceError("np.average: axis must be specified when shapes of a and weights "
                         "differ", user_loc())
    if w.ndim != 1 or not isinstance(axis, numbers.Integral):
        raise TraceError("np.average: 1D weights expected along one axis when shapes of a "
                         "and weights differ", user_loc())
    axis = normalize_axis(axis, a.ndim)
    if w.shape[0] != a.shape[axis]:
        raise ShapeError("np.average: length of weights not compatible with specified axis",
                         user_loc())
    return broadcast_to(reshape(w, [a.shape[axis] if i == axis else 1
                                    for i in range(a.ndim)]), a.shape)


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """np.average. A zero sum of weights gives inf or NaN (NumPy raises: no value is known
    while tracing)."""
    a = _prepare(a, "average")
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        scale = _like(avg, _count(a, normalize_axes(axis, a.ndim)), avg.dtype)
    else:
        w = _weights_along(a, _traced(weights, "average"), axis)
        res_dt = np.result_type(a.dtype, w.dtype, *([] if dtypes.is_float(a.dtype) else
                                                    [dtypes.FLOAT64]))
        scale = sum_(astype(w, res_dt), axis, dtype=res_dt, keepdims=keepdims)
        total = sum_(multiply(astype(a, res_dt), astype(w, res_dt)), axis, keepdims=keepdims)
        avg = true_divide(total, scale)
    return (avg, scale) if returned else avg


# ---- constructors shaped like an array ------------------------------------------------
def _like(x, value, dtype, shape=None):
    shape = x.shape if shape is None else ((shape,) if isinstance(shape, numbers.Integral)
                                           else tuple(shape))
    return _wrap(x.graph, _const(x.graph, value, np.dtype(dtype), shape))


def _like_maker(value, name):
    def fn(a, dtype=None, order="K", subok=True, shape=None, **kw):
        _no_kw(kw, name)
        a = _traced(a, name)
        return _like(a, value, a.dtype if dtype is None else dtypes.check(dtype, name), shape)
    fn.__name__ = name
    return fn


zeros_like = _like_maker(0, "zeros_like")
ones_like = _like_maker(1, "ones_like")
empty_like = _like_maker(0, "empty_like")       # uninitialized in NumPy: zeros here


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kw):
    _no_kw(kw, "full_like")
    a = _traced(a, "full_like")
    dt = a.dtype if dtype is None else dtypes.check(dtype, "full_like")
    if isinstance(fill_value, Tracer):
        return astype(broadcast_to(fill_value, a.shape if shape is None else shape), dt)
    return _like(a, np.asarray(fill_value).astype(dt).item(), dt, shape)


# ---- NaN-skipping reductions -----------------------------------------------------------
def nanprod(x, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True,
            **kw):
    x, mask = nan_skipping(x, where, "nanprod", out, kw)
    return prod(x, axis, reduction_dtype(dtype, "nanprod"), keepdims=keepdims, initial=initial,
                where=mask)


def nanvar(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, **kw):
    """The variance of the values that are not NaN: NaN where ddof or fewer are, as NumPy's
    nanvar gives it (np.var divides by max(n - ddof, 0): inf there, or NaN for a zero sum,
    and so does nanvar of integers, which have no NaN to skip)."""
    x, mask = nan_skipping(x, where, "nanvar", out, kw)
    dtype = reduction_dtype(dtype, "nanvar")
    if not dtypes.is_float(x.dtype):
        return var(x, axis, dtype, ddof=ddof, keepdims=keepdims, where=mask)
    axes = normalize_axes(axis, x.ndim)
    v = var(x, axes, dtype, ddof=ddof, keepdims=True, where=mask)
    return _finish(x.graph, _nan_where_few(v, _masked_count(x, axes, mask), ddof).node, axes,
                   keepdims)


def _nan_where_few(v, count, ddof):
    """``v`` with NaN where ``count`` (a number or a traced array) is at most ``ddof``."""
    return where(less_equal(count, ddof), np.nan, v)


def nanstd(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, **kw):
    _no_out(out, "nanstd")
    _no_kw(kw, "nanstd")
    v = nanvar(x, axis, reduction_dtype(dtype, "nanstd"), ddof=ddof, keepdims=keepdims,
               where=where)
    return astype(sqrt(astype(v, dtypes.compute_dtype(v.dtype))), v.dtype)


UFUNCS = {np.rint: rint, np.signbit: signbit, np.matmul: matmul}
# NumPy 2's vector gufuncs, where this NumPy has them
UFUNCS.update({getattr(np, name): fn for name, fn in
               (("vecdot", vecdot), ("matvec", matvec), ("vecmat", vecmat))
               if hasattr(np, name)})

FUNCTIONS = {
    np.round: around, np.around: around, np.dot: dot, np.inner: inner, np.einsum: einsum,
    np.linalg.norm: norm, np.average: average, np.zeros_like: zeros_like,
    np.ones_like: ones_like, np.empty_like: empty_like, np.full_like: full_like,
    np.nanprod: nanprod, np.nanvar: nanvar, np.nanstd: nanstd,
}
FUNCTIONS.update({getattr(np.linalg, name): fn for name, fn in
                  (("vecdot", vecdot), ("vector_norm", vector_norm),
                   ("matrix_norm", matrix_norm)) if hasattr(np.linalg, name)})

__all__ = ["rint", "around", "signbit", "matmul", "dot", "inner", "einsum", "vecdot", "matvec",
           "vecmat", "norm", "vector_norm", "matrix_norm", "average",
           "zeros_like", "ones_like", "empty_like", "full_like", "nanprod", "nanvar", "nanstd"]
