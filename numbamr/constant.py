"""NumPy array constants inside a traced function, computed by the kernel from indices.

``np.arange(n)`` (and any array built from it by NumPy before numbamr sees it: reshaped,
broadcast, scaled, offset) is an *affine* constant: each element is ``start + sum_k step_k *
i_k`` of its indices ``i_k``. Such a constant becomes nodes of the graph (an ``ARANGE`` leaf
per axis it varies along, cast, scaled and added in the constant's dtype), so a one-hot
compare ``np.arange(c) == labels[:, None]`` or a position weight ``x * np.arange(n)`` costs
no memory traffic. An array with one value everywhere becomes a broadcast scalar; a bool
array that compares each position with thresholds affine in the other indices (a causal
mask) becomes those comparisons, and an array of two values laid out so (``np.eye``, an
additive mask of 0 and -inf) a select between them. Only a
constant whose every element the nodes reproduce bit for bit is taken; any other array
constant is refused (pass it as an argument).
"""
import itertools

import numpy as np

from . import dtypes
from .errors import user_loc
from .ops import Op
from .nodes import _const, cast_node, expand_node, reshape_node

_INT64_MAX = 2 ** 63 - 1


def constant_node(graph, value):
    """Nodes computing array constant ``value`` (its dtype checked by the caller), or None
    when its values do not follow from their indices."""
    if value.size == 0:
        return None
    first = value.reshape(-1)[:1]
    if np.array_equal(_bits(value), np.broadcast_to(_bits(first), value.shape)):
        return _const(graph, first.item(), value.dtype, value.shape)
    if value.dtype.kind == "b":
        return _bool_mask(graph, value)
    node = None
    if value.dtype.kind in "iu":
        node = _integer_affine(graph, value)
    elif value.dtype in (dtypes.FLOAT16, dtypes.FLOAT32, dtypes.FLOAT64):
        node = _float_affine(graph, value)
    return node if node is not None else _two_values(graph, value)


def _two_values(graph, value):
    """A constant of two values laid out as a mask (``np.eye(n)``, an additive causal mask
    ``np.triu(np.full((n, n), -np.inf), 1)``): a select between them, or None."""
    bits = _bits(value).reshape(-1)
    first = bits[0]
    other = np.flatnonzero(bits != first)
    if not np.all((bits == first) | (bits == bits[other[0]])):
        return None
    mask = _bool_mask(graph, bits.reshape(value.shape) != first)
    if mask is None:
        return None
    a, b = (_const(graph, value.reshape(-1)[i].item(), value.dtype, value.shape)
            for i in (other[0], 0))
    return graph.node(Op.WHERE, value.dtype, value.shape, (mask, a, b), None, user_loc())


# a bool row along one axis as comparisons of the position j with thresholds t (one per
# row), all of which must hold: prefix, suffix, one-hot, all but one, an interval
_COMPARE = {Op.LT: np.less, Op.GE: np.greater_equal, Op.EQ: np.equal, Op.NE: np.not_equal}
_MASK_FORMS = (
    lambda row, n: [(Op.LT, row.sum(-1, keepdims=True))],
    lambda row, n: [(Op.GE, n - row.sum(-1, keepdims=True))],
    lambda row, n: [(Op.EQ, row.argmax(-1)[..., None])],
    lambda row, n: [(Op.NE, row.argmin(-1)[..., None])],
    lambda row, n: [(Op.GE, row.argmax(-1)[..., None]),
                    (Op.LT, row.argmax(-1)[..., None] + row.sum(-1, keepdims=True))],
)


def _bool_mask(graph, value):
    """A bool constant that is ``j < t``, ``j >= t``, ``j == t``, ``j != t`` or ``lo <= j <
    hi`` of the position j along its last varying axis, each threshold an affine function of
    the other indices: padding masks, one-hot rows, causal and banded attention masks
    (``np.arange(m) <= np.arange(n)[:, None]``)."""
    varying = [k for k, n in enumerate(value.shape)
               if n > 1 and not np.array_equal(value, np.take(value, [0], axis=k).repeat(n, k))]
    axis = varying[-1]
    n = value.shape[axis]
    rows = np.moveaxis(value, axis, -1)
    j = np.arange(n, dtype=np.int64)
    for form in _MASK_FORMS:
        conditions = [(op, t.astype(np.int64)) for op, t in form(rows, n)]
        if not np.array_equal(np.logical_and.reduce([_COMPARE[op](j, t)
                                                     for op, t in conditions]), rows):
            continue
        nodes = [_threshold_test(graph, value.shape, axis, op, t) for op, t in conditions]
        if None in nodes:
            continue
        node = nodes[0]
        for other in nodes[1:]:
            node = _binary(graph, Op.AND, node, other)
        return node
    return None


def _threshold_test(graph, shape, axis, op, t):
    """``op(j, t)`` over ``shape`` (j: the position along ``axis``; ``t``: one threshold per
    row, moved to the end), or None when ``t`` is not affine in the row's indices."""
    t = np.moveaxis(t, -1, axis)
    if op in (Op.LT, Op.GE):            # thresholds outside 0..n test the same as at 0 or n
        t = _unclipped(t, shape[axis])
        if t is None:
            return None
    t_node = _integer_rule(graph, t)
    if t_node is None:
        return None
    t_node = expand_node(graph, t_node, shape)
    j = _axis_node(graph, shape, axis, dtypes.INT64)
    return graph.node(op, np.dtype(bool), shape, (j, t_node), None, user_loc())


def _unclipped(t, n):
    """An affine threshold array whose values clipped to 0..n are ``t`` (a band's edges stop
    at the row's ends), or None. Each axis's step is its largest difference between
    neighbours (clipped stretches differ by less), the start is fixed by an unclipped
    element."""
    if np.all(t == t.reshape(-1)[0]):
        return t
    steps = []
    for k, m in enumerate(t.shape):
        d = np.diff(t, axis=k) if m > 1 else np.zeros(1, np.int64)
        steps.append(int(d.reshape(-1)[np.abs(d).argmax()]))
    inside = np.argwhere((t > 0) & (t < n))
    if not len(inside):
        return None
    at = inside[0]
    grid = np.indices(t.shape, dtype=np.int64)
    start = int(t[tuple(at)]) - sum(s * int(i) for s, i in zip(steps, at))
    if abs(start) + sum(abs(s) * m for s, m in zip(steps, t.shape)) > _INT64_MAX:
        return None
    full = start + sum(s * g for s, g in zip(steps, grid))
    return full if np.array_equal(np.clip(full, 0, n), t) else None


def _integer_rule(graph, t):
    """Nodes (int64) computing integer array ``t``: one value, or affine in its indices."""
    first = t.reshape(-1)[0]
    if np.all(t == first):
        return _const(graph, int(first), t.dtype, t.shape)
    return _integer_affine(graph, t)


def _bits(a):
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def _unit(value, k):
    """The element one step along axis ``k`` from the first."""
    return value[tuple(1 if j == k else 0 for j in range(value.ndim))]


def _axis_values(n, k, ndim, dtype):
    """0, 1, ..., n-1 along axis ``k`` of an ``ndim``-dimensional array (host side)."""
    return np.arange(n, dtype=np.int64).astype(dtype).reshape(
        tuple(n if j == k else 1 for j in range(ndim)))


def _integer_affine(graph, value):
    start = int(value.reshape(-1)[0])
    steps = [int(_unit(value, k)) - start if n > 1 else 0 for k, n in enumerate(value.shape)]
    if abs(start) + sum(abs(s) * (n - 1) for s, n in zip(steps, value.shape)) > _INT64_MAX:
        return None                     # the int64 sums could overflow
    want = np.full(value.shape, start, np.int64)
    for k, (s, n) in enumerate(zip(steps, value.shape)):
        want = want + _axis_values(n, k, value.ndim, np.int64) * s
    if not np.array_equal(want, value.astype(np.int64)) or \
            not np.array_equal(want.astype(value.dtype), value):
        return None
    int64 = dtypes.INT64
    node = None if start == 0 else _const(graph, start, int64, value.shape)
    for k, s in enumerate(steps):
        if s:
            term = _axis_node(graph, value.shape, k, int64)
            if s != 1:
                term = _binary(graph, Op.MUL, term, s)
            node = term if node is None else _binary(graph, Op.ADD, node, term)
    return cast_node(graph, node, value.dtype)


def _float_affine(graph, value):
    """start + i_0 * step_0 + i_1 * step_1 + ..., each operation rounded to the constant's
    dtype (as NumPy's arithmetic in that dtype and the kernel's both round it). A step is
    not known exactly from rounded values: the difference of the first two elements and
    the mean difference over the axis are tried."""
    dt = value.dtype
    start = value.reshape(-1)[0]
    if not np.isfinite(start):
        return None
    options = [_step_candidates(value, k, start) for k in range(value.ndim)]
    for steps in itertools.islice(itertools.product(*options), 16):
        if _reproduces(value, start, steps):
            break
    else:
        return None
    node = _const(graph, start.item(), dt, value.shape)
    for k, s in enumerate(steps):
        if s != 0:
            term = cast_node(graph, _axis_node(graph, value.shape, k, dtypes.INT64), dt)
            node = _binary(graph, Op.ADD, node, _binary(graph, Op.MUL, term, s.item()))
    return node


def _step_candidates(value, k, start):
    n, dt = value.shape[k], value.dtype
    if n == 1:
        return [dt.type(0)]
    last = value[tuple(n - 1 if j == k else 0 for j in range(value.ndim))]
    with np.errstate(all="ignore"):
        found = [_unit(value, k) - start,
                 dt.type((np.float64(last) - np.float64(start)) / (n - 1))]
    return [s for i, s in enumerate(found) if np.isfinite(s) and s not in found[:i]]


def _reproduces(value, start, steps):
    dt = value.dtype
    with np.errstate(all="ignore"):
        want = np.full(value.shape, start, dt)
        for k, (s, n) in enumerate(zip(steps, value.shape)):
            if s != 0:
                want = want + _axis_values(n, k, value.ndim, dt) * s
    return np.array_equal(_bits(want), _bits(value))


def _axis_node(graph, shape, k, dtype):
    """0, 1, ..., shape[k]-1 along axis ``k``, broadcast to ``shape``."""
    n = shape[k]
    node = graph.node(Op.ARANGE, dtype, (n,), (), None, user_loc())
    node = reshape_node(graph, node, tuple(n if j == k else 1 for j in range(len(shape))))
    return expand_node(graph, node, shape)


def _binary(graph, op, node, other):
    """``op`` of ``node`` and ``other`` (a node of its shape and dtype, or a number)."""
    if not hasattr(other, "op"):
        other = _const(graph, other, node.dtype, node.shape)
    return graph.node(op, node.dtype, node.shape, (node, other), None, user_loc())
