"""NumPy array constants inside a traced function, computed by the kernel from indices.

``np.arange(n)`` (and any array built from it by NumPy before numbamr sees it: reshaped,
broadcast, scaled, offset) is an *affine* constant: each element is ``start + sum_k step_k *
i_k`` of its indices ``i_k``. Such a constant becomes nodes of the graph (an ``ARANGE`` leaf
per axis it varies along, cast, scaled and added in the constant's dtype), so a one-hot
compare ``np.arange(c) == labels[:, None]`` or a position weight ``x * np.arange(n)`` costs
no memory traffic. An array with one value everywhere becomes a broadcast scalar. Only a
constant whose every element the nodes reproduce bit for bit is taken; any other array
constant is refused (pass it as an argument).
"""
import itertools

import numpy as np

from . import dtypes
from .ops import Op

_INT64_MAX = 2 ** 63 - 1


def constant_node(graph, value, loc):
    """Nodes computing array constant ``value`` (its dtype checked by the caller), or None
    when its values are not an affine function of their indices."""
    if value.size == 0:
        return None
    first = value.reshape(-1)[:1]
    if np.array_equal(_bits(value), np.broadcast_to(_bits(first), value.shape)):
        return graph.node(Op.CONST, value.dtype, value.shape, (), first.item(), loc)
    if value.dtype.kind in "iu":
        return _integer_affine(graph, value, loc)
    if value.dtype in (dtypes.FLOAT16, dtypes.FLOAT32, dtypes.FLOAT64):
        return _float_affine(graph, value, loc)
    return None


def _bits(a):
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def _unit(value, k):
    """The element one step along axis ``k`` from the first."""
    return value[tuple(1 if j == k else 0 for j in range(value.ndim))]


def _axis_values(n, k, ndim, dtype):
    """0, 1, ..., n-1 along axis ``k`` of an ``ndim``-dimensional array (host side)."""
    return np.arange(n, dtype=np.int64).astype(dtype).reshape(
        tuple(n if j == k else 1 for j in range(ndim)))


def _integer_affine(graph, value, loc):
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
    node = graph.node(Op.CONST, int64, value.shape, (), start, loc)
    for k, s in enumerate(steps):
        if s:
            term = _axis_node(graph, value.shape, k, int64, loc)
            if s != 1:
                term = _binary(graph, Op.MUL, term, s, loc)
            node = graph.node(Op.ADD, int64, value.shape, (node, term), None, loc)
    return node if value.dtype == int64 else \
        graph.node(Op.CAST, value.dtype, value.shape, (node,), value.dtype, loc)


def _float_affine(graph, value, loc):
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
    node = graph.node(Op.CONST, dt, value.shape, (), start.item(), loc)
    for k, s in enumerate(steps):
        if s != 0:
            term = graph.node(Op.CAST, dt, value.shape,
                              (_axis_node(graph, value.shape, k, dtypes.INT64, loc),), dt, loc)
            term = _binary(graph, Op.MUL, term, s.item(), loc)
            node = graph.node(Op.ADD, dt, value.shape, (node, term), None, loc)
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


def _axis_node(graph, shape, k, dtype, loc):
    """0, 1, ..., shape[k]-1 along axis ``k``, broadcast to ``shape``."""
    n = shape[k]
    node = graph.node(Op.ARANGE, dtype, (n,), (), None, loc)
    column = tuple(n if j == k else 1 for j in range(len(shape)))
    if column != (n,):
        node = graph.node(Op.RESHAPE, dtype, column, (node,), column, loc)
    if column != tuple(shape):
        node = graph.node(Op.EXPAND, dtype, tuple(shape), (node,), tuple(shape), loc)
    return node


def _binary(graph, op, node, scalar, loc):
    c = graph.node(Op.CONST, node.dtype, node.shape, (), scalar, loc)
    return graph.node(op, node.dtype, node.shape, (node, c), None, loc)
