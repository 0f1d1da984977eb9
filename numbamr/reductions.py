"""Reductions while tracing: sum, prod, max, min, any, all and argmax/argmin as REDUCE
nodes; mean, var, std, logsumexp, ptp, count_nonzero and the NaN-skipping ones composed of
them, with NumPy's ``where=`` masks and ``initial=`` values."""
import warnings

import numpy as np

from . import dtypes
from .errors import TraceError, ShapeError, user_loc
from .movement import _traced, normalize_axis, reshape
from .nodes import _check_dtype, _const, broadcast_shapes, cast_node, reshape_node
from .operands import _no_out, _operand, _wrap
from .ops import Op, ReduceKind
from .tracer import Tracer
from .ufuncs import (add, astype, exp, isfinite, isnan, log, logical_and, logical_not,
                     maximum, minimum, multiply, not_equal, sqrt, subtract, true_divide, where)


def normalize_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    out = tuple(normalize_axis(a, ndim) for a in axes)
    if len(set(out)) != len(out):
        raise ShapeError(f"duplicate value in axis {axis!r}", user_loc())
    return tuple(sorted(out))


def _finish(graph, node, axes, keepdims):
    if keepdims:
        return _wrap(graph, node)
    shape = [s for i, s in enumerate(node.shape) if i not in axes]
    return _wrap(graph, reshape_node(graph, node, shape))


def _reduce_node(graph, node, kind, axes):
    """REDUCE over ``axes`` (keepdims shape); reducing nothing or size-1 axes is a no-op,
    but for a float sum, which NumPy starts from +0 (a sum of one -0.0 is 0.0)."""
    axes = tuple(a for a in axes if node.shape[a] != 1)
    if not axes:
        if kind is ReduceKind.SUM and node.dtype.kind == "f":
            zero = _const(graph, 0.0, node.dtype, node.shape)
            return graph.node(Op.ADD, node.dtype, node.shape, (node, zero), None, user_loc())
        return node
    shape = tuple(1 if i in axes else s for i, s in enumerate(node.shape))
    if node.op is Op.CONST and kind in (ReduceKind.MAX, ReduceKind.MIN):
        return graph.node(Op.CONST, node.dtype, shape, (), node.arg, node.loc)
    return graph.node(Op.REDUCE, node.dtype, shape, (node,), (kind, axes), user_loc())


def _prepare(x, name):
    x = _traced(x, name)
    dtypes.check(x.dtype, f"the input of {name}")
    return x


def _empty_check(x, axes, name):
    if any(x.shape[a] == 0 for a in axes):
        raise ShapeError(f"zero-size array to reduction operation {name} which has no identity",
                         user_loc())


# ---- masks (where=) and starting values (initial=), as NumPy's reductions take them ------
def _masked(x, mask, fill, name):
    """``x`` where the ``where=`` mask is true and ``fill`` elsewhere."""
    mask = checked_mask(x, mask, name)
    return x if mask is True else where(mask, x, fill)


def checked_mask(x, mask, name):
    """The ``where=`` mask of reduction ``name`` of ``x``: a traced bool array that broadcasts
    to ``x``'s shape (or an array constant numbamr.constant computes), or a bool. Any other
    dtype is a TypeError (a TraceError), as NumPy raises it: it casts no mask to bool."""
    if mask is True:
        return mask
    if isinstance(mask, np.ndarray) and mask.ndim == 0:
        mask = mask[()]
    if isinstance(mask, np.ndarray):
        mask = _wrap(x.graph, _operand(mask, x.graph, f"the mask of {name}"))
    if isinstance(mask, (Tracer, np.generic)) and mask.dtype.kind != "b":
        raise TraceError(f"{name}(where=...): the mask has dtype {mask.dtype}; it must be "
                         "bool", user_loc())
    if isinstance(mask, Tracer):
        if broadcast_shapes(mask.shape, x.shape) != x.shape:
            raise ShapeError(f"{name}(where=...): a mask of shape {mask.shape} does not "
                             f"broadcast to the array's shape {x.shape}", user_loc())
    elif not isinstance(mask, (bool, np.bool_)):
        raise TraceError(f"{name}(where=...) takes a traced bool array or a bool, not "
                         f"{type(mask).__name__}", user_loc())
    return True if mask is np.True_ else mask


def _initial(initial, dt, reduction, name):
    """``initial`` as a scalar of ``dt``, or the error NumPy's ``reduction`` raises for it."""
    if isinstance(initial, np.ndarray) and initial.ndim == 0:
        initial = initial[()]
    if not isinstance(initial, (bool, int, float, np.generic)):
        raise TraceError(f"{name}(initial=...) takes a number, not {type(initial).__name__}",
                         user_loc())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reduction(np.zeros(1, dt), initial=initial)
            return np.asarray(initial).astype(dt)[()]
    except (TypeError, ValueError, OverflowError) as e:
        raise TraceError(f"{name}(initial={initial!r}): {e}", user_loc()) from None


def _accumulate(x, axis, dtype, keepdims, kind, name, mask=True, initial=None):
    """sum/prod: small integers and bool widen as numpy does; float16 accumulates in float32;
    masked values count as 0 (sum) or 1 (prod), ``initial`` joins the result."""
    x = _prepare(x, name)
    axes = normalize_axes(axis, x.ndim)
    res_dt = reduction_dtype(dtype, name) if dtype is not None else dtypes.sum_dtype(x.dtype)
    acc_dt = dtypes.compute_dtype(res_dt)
    x = _masked(x, mask, 0 if kind is ReduceKind.SUM else 1, name)
    g = x.graph
    r = _wrap(g, _reduce_node(g, cast_node(g, x.node, acc_dt), kind, axes))
    if initial is not None:
        start = _initial(initial, acc_dt, np.sum if kind is ReduceKind.SUM else np.prod, name)
        r = (add if kind is ReduceKind.SUM else multiply)(r, start)
    return _finish(g, cast_node(g, r.node, res_dt), axes, keepdims)


def sum_(x, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True, **kw):
    _no_out(out, "sum")
    _no_kw(kw, "sum")
    return _accumulate(x, axis, dtype, keepdims, ReduceKind.SUM, "sum", where, initial)


def prod(x, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True, **kw):
    _no_out(out, "prod")
    _no_kw(kw, "prod")
    return _accumulate(x, axis, dtype, keepdims, ReduceKind.PROD, "prod", where, initial)


def _minmax(x, axis, keepdims, kind, name, mask=True, initial=None):
    """max/min; with ``initial``, masked values and empty axes give it (NumPy's rules: a
    mask needs an ``initial``)."""
    x = _prepare(x, name)
    axes = normalize_axes(axis, x.ndim)
    g = x.graph
    op = maximum if kind is ReduceKind.MAX else minimum
    if initial is None:
        if mask is not True:
            raise TraceError(f"reduction operation '{op.__name__}' does not have an identity, "
                             "so to use a where mask one has to specify 'initial'", user_loc())
        _empty_check(x, axes, op.__name__)
    else:
        start = _initial(initial, x.dtype, np.max if kind is ReduceKind.MAX else np.min, name)
        x = _masked(x, mask, start, name)
        if any(x.shape[a] == 0 for a in axes):
            return _finish(g, _const(g, start.item(), x.dtype, _kept_shape(x.shape, axes)),
                           axes, keepdims)
    acc_dt = dtypes.compute_dtype(x.dtype)
    r = _wrap(g, cast_node(g, _reduce_node(g, cast_node(g, x.node, acc_dt), kind, axes),
                           x.dtype))
    if initial is not None:
        r = op(r, start)
    return _finish(g, r.node, axes, keepdims)


def amax(x, axis=None, out=None, keepdims=False, initial=None, where=True, **kw):
    _no_out(out, "max")
    _no_kw(kw, "max")
    return _minmax(x, axis, keepdims, ReduceKind.MAX, "max", where, initial)


def amin(x, axis=None, out=None, keepdims=False, initial=None, where=True, **kw):
    _no_out(out, "min")
    _no_kw(kw, "min")
    return _minmax(x, axis, keepdims, ReduceKind.MIN, "min", where, initial)


def _logical_reduce(x, axis, keepdims, kind, name, empty, mask=True):
    """any/all: max/min over bools; over an empty axis, ``empty`` (as numpy); masked values
    count as ``empty``."""
    x = _prepare(x, name)
    axes = normalize_axes(axis, x.ndim)
    g = x.graph
    if any(x.shape[a] == 0 for a in axes):
        return _finish(g, _const(g, empty, dtypes.BOOL, _kept_shape(x.shape, axes)), axes,
                       keepdims)
    b = _masked(_wrap(g, cast_node(g, x.node, dtypes.BOOL)), mask, empty, name)
    return _finish(g, _reduce_node(g, b.node, kind, axes), axes, keepdims)


def any_(x, axis=None, out=None, keepdims=False, *, where=True, **kw):
    _no_out(out, "any")
    _no_kw(kw, "any")
    return _logical_reduce(x, axis, keepdims, ReduceKind.MAX, "any", False, where)


def all_(x, axis=None, out=None, keepdims=False, *, where=True, **kw):
    _no_out(out, "all")
    _no_kw(kw, "all")
    return _logical_reduce(x, axis, keepdims, ReduceKind.MIN, "all", True, where)


def _kept_shape(shape, axes):
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _count(x, axes):
    return int(np.prod([x.shape[a] for a in axes], dtype=np.int64))


def reduction_dtype(dtype, name):
    """A reduction's ``dtype=`` argument as a dtype numbamr computes in, or a DTypeError
    naming the argument (complex, object, strings, unknown names)."""
    return None if dtype is None else _check_dtype(dtype, f"the dtype= argument of {name}")


def _mean_dtype(x, dtype, name):
    """numpy's result dtype of mean/var/std: the one asked for, else floats keep theirs and
    integers and bools give float64."""
    if dtype is not None:
        return reduction_dtype(dtype, name)
    return x.dtype if dtypes.is_float(x.dtype) else dtypes.FLOAT64


def _masked_count(x, axes, mask):
    """How many values along ``axes`` the mask keeps (a number without a mask, else a traced
    int64 array with the axes kept as 1)."""
    if mask is True:
        return _count(x, axes)
    every = _wrap(x.graph, _const(x.graph, True, dtypes.BOOL, x.shape))
    return sum_(_masked(every, mask, False, "mean"), axes, keepdims=True)


def mean(x, axis=None, dtype=None, out=None, keepdims=False, *, where=True, **kw):
    _no_out(out, "mean")
    _no_kw(kw, "mean")
    x = _prepare(x, "mean")
    axes = normalize_axes(axis, x.ndim)
    res_dt = _mean_dtype(x, dtype, "mean")
    acc_dt = dtypes.compute_dtype(res_dt)
    s = sum_(astype(x, acc_dt), axes, keepdims=True, where=where)
    m = true_divide(s, astype(_masked_count(x, axes, where), acc_dt))
    return _finish(x.graph, cast_node(x.graph, astype(m, res_dt).node, res_dt), axes, keepdims)


def _nan_to(x, value):
    """``x`` with its NaNs replaced by ``value`` (integers and bools have none)."""
    return where(isnan(x), value, x) if dtypes.is_float(x.dtype) else x


def not_nan(x, mask=True):
    """Where ``x`` is not NaN (and ``mask`` holds): the mask of the NaN-skipping reductions."""
    keep = logical_not(isnan(x))
    return keep if mask is True else logical_and(keep, mask)


def nan_skipping(x, mask, name, out, kw):
    """(``x`` checked as the input of ``name``, the mask that skips its NaNs): the common
    start of the NaN-skipping reductions, after refusing ``out=`` and unknown keywords."""
    _no_out(out, name)
    _no_kw(kw, name)
    x = _prepare(x, name)
    mask = checked_mask(x, mask, name)      # before it joins the NaN test, which would cast it
    return x, (not_nan(x, mask) if dtypes.is_float(x.dtype) else mask)


def nansum(x, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True,
           **kw):
    x, mask = nan_skipping(x, where, "nansum", out, kw)
    return sum_(x, axis, reduction_dtype(dtype, "nansum"), keepdims=keepdims, initial=initial,
                where=mask)


def _nan_minmax(x, axis, keepdims, name, fill, reduce, initial, mask, out, kw):
    """NaN only where every value along the axes is NaN (NumPy warns there); with an
    ``initial``, NaNs are skipped like masked values and such rows give ``initial``."""
    x, keep = nan_skipping(x, mask, name, out, kw)
    if initial is not None or not dtypes.is_float(x.dtype):
        return reduce(x, axis, keepdims=keepdims, initial=initial, where=keep)
    r = reduce(_nan_to(x, fill), axis, keepdims=keepdims, where=mask)   # a mask raises here
    return where(all_(isnan(x), axis, keepdims=keepdims), np.nan, r)


def nanmax(x, axis=None, out=None, keepdims=False, initial=None, where=True, **kw):
    return _nan_minmax(x, axis, keepdims, "nanmax", -np.inf, amax, initial, where, out, kw)


def nanmin(x, axis=None, out=None, keepdims=False, initial=None, where=True, **kw):
    return _nan_minmax(x, axis, keepdims, "nanmin", np.inf, amin, initial, where, out, kw)


def nanmean(x, axis=None, dtype=None, out=None, keepdims=False, *, where=True, **kw):
    """The mean of the values that are not NaN (NaN where there are none)."""
    x, mask = nan_skipping(x, where, "nanmean", out, kw)
    return mean(x, axis, reduction_dtype(dtype, "nanmean"), keepdims=keepdims, where=mask)


def var(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, **kw):
    _no_out(out, "var")
    _no_kw(kw, "var")
    x = _prepare(x, "var")
    axes = normalize_axes(axis, x.ndim)
    res_dt = _mean_dtype(x, dtype, "var")
    acc_dt = dtypes.compute_dtype(res_dt)
    xf = astype(x, acc_dt)
    d = subtract(xf, mean(xf, axes, keepdims=True, where=where))
    n = _masked_count(x, axes, where)
    n = max(n - ddof, 0) if where is True else astype(maximum(subtract(n, ddof), 0), acc_dt)
    v = true_divide(sum_(multiply(d, d), axes, keepdims=True, where=where), n)
    return _finish(x.graph, astype(v, res_dt).node, axes, keepdims)


def std(x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, **kw):
    _no_out(out, "std")
    _no_kw(kw, "std")
    v = var(x, axis, reduction_dtype(dtype, "std"), ddof=ddof, keepdims=True, where=where)
    acc = sqrt(astype(v, dtypes.compute_dtype(v.dtype)))
    axes = normalize_axes(axis, x.ndim)
    return _finish(x.graph, astype(acc, v.dtype).node, axes, keepdims)


def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) computed stably: the row max is subtracted first (as scipy does)."""
    x = _prepare(x, "logsumexp")
    axes = normalize_axes(axis, x.ndim)
    _empty_check(x, axes, "logsumexp")
    dt = dtypes.float_of(x.dtype)
    acc = dtypes.compute_dtype(dt)
    xf = astype(x, acc)
    m = amax(xf, axes, keepdims=True)
    m = where(isfinite(m), m, 0.0)
    r = add(log(sum_(exp(subtract(xf, m)), axes, keepdims=True)), m)
    return _finish(x.graph, astype(r, dt).node, axes, keepdims)


def ptp(x, axis=None, out=None, keepdims=False):
    """max - min (NumPy's peak to peak)."""
    _no_out(out, "ptp")
    return subtract(amax(x, axis, keepdims=keepdims), amin(x, axis, keepdims=keepdims))


def count_nonzero(x, axis=None, *, keepdims=False):
    return sum_(not_equal(x, 0), axis, dtype=np.int64, keepdims=keepdims)


def _arg_reduce(x, axis, keepdims, kind, name):
    x = _prepare(x, name)
    g = x.graph
    if axis is None:
        if x.size == 0:
            raise ShapeError(f"attempt to get {name} of an empty sequence", user_loc())
        flat = reshape(x, (-1,))
        n = _arg_node(g, flat.node, kind, 0)
        if keepdims:
            return _wrap(g, reshape_node(g, n, (1,) * x.ndim))
        return _wrap(g, reshape_node(g, n, ()))
    a = normalize_axis(axis, x.ndim)
    if x.shape[a] == 0:
        raise ShapeError(f"attempt to get {name} of an empty sequence", user_loc())
    n = _arg_node(g, x.node, kind, a)
    return _finish(g, n, (a,), keepdims)


def _arg_node(g, node, kind, axis):
    node = cast_node(g, node, dtypes.compute_dtype(node.dtype))
    shape = _kept_shape(node.shape, (axis,))
    if node.shape[axis] == 1:
        return _const(g, 0, dtypes.INT64, shape)
    return g.node(Op.REDUCE, dtypes.INT64, shape, (node,), (kind, (axis,)), user_loc())


def argmax(x, axis=None, out=None, keepdims=False, **kw):
    _no_out(out, "argmax")
    _no_kw(kw, "argmax")
    return _arg_reduce(x, axis, keepdims, ReduceKind.ARGMAX, "argmax")


def argmin(x, axis=None, out=None, keepdims=False, **kw):
    _no_out(out, "argmin")
    _no_kw(kw, "argmin")
    return _arg_reduce(x, axis, keepdims, ReduceKind.ARGMIN, "argmin")


def _no_kw(kw, name):
    if kw:
        raise TraceError(f"{name}: arguments {sorted(kw)} are not supported", user_loc())


def softmax(x, axis=-1):
    m = amax(x, axis, keepdims=True)
    e = exp(subtract(x, m))
    return true_divide(e, sum_(e, axis, keepdims=True))
