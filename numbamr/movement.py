"""Views while tracing: reshape, transpose and its kin, broadcasts and basic indexing."""
import numbers

import numpy as np

from .errors import TraceError, ShapeError, user_loc
from .nodes import broadcast_shapes, expand_node, permute_node, reshape_node
from .operands import _wrap
from .ops import Op
from .tracer import Tracer


def _traced(x, name):
    if not isinstance(x, Tracer):
        raise TraceError(f"{name} expects a traced array here, got {type(x).__name__}", user_loc())
    return x


def reshape(x, shape):
    x = _traced(x, "reshape")
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    shape = [int(s) for s in shape]
    if shape.count(-1) > 1:
        raise ShapeError("reshape: only one dimension can be -1", user_loc())
    known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
    if -1 in shape:
        if known == 0 or x.size % known:
            raise ShapeError(f"cannot reshape an array of size {x.size} into shape "
                             f"{tuple(shape)}", user_loc())
        shape[shape.index(-1)] = x.size // known
    if any(s < 0 for s in shape) or int(np.prod(shape, dtype=np.int64)) != x.size:
        raise ShapeError(f"cannot reshape an array of shape {x.shape} (size {x.size}) into shape "
                         f"{tuple(shape)}", user_loc())
    return _wrap(x.graph, reshape_node(x.graph, x.node, shape))


def normalize_axis(axis, ndim, what="axis"):
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise ShapeError(f"{what} must be an integer, got {axis!r}", user_loc())
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{what} {axis} is out of bounds for an array of dimension {ndim}",
                         user_loc())
    return int(axis) % ndim


def transpose(x, axes=None):
    x = _traced(x, "transpose")
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    axes = tuple(normalize_axis(a, x.ndim) for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ShapeError(f"transpose axes {axes} are not a permutation of the {x.ndim} axes",
                         user_loc())
    return _wrap(x.graph, permute_node(x.graph, x.node, axes))


def swapaxes(x, a, b):
    x = _traced(x, "swapaxes")
    a, b = normalize_axis(a, x.ndim), normalize_axis(b, x.ndim)
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def moveaxis(x, source, destination):
    x = _traced(x, "moveaxis")
    s, d = normalize_axis(source, x.ndim), normalize_axis(destination, x.ndim)
    perm = [i for i in range(x.ndim) if i != s]
    perm.insert(d, s)
    return transpose(x, perm)


def expand_dims(x, axis):
    x = _traced(x, "expand_dims")
    axes = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    ndim = x.ndim + len(axes)
    axes = sorted(normalize_axis(a, ndim) for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return reshape(x, shape)


def squeeze(x, axis=None):
    x = _traced(x, "squeeze")
    if axis is None:
        axes = [i for i, s in enumerate(x.shape) if s == 1]
    else:
        axes = [normalize_axis(a, x.ndim) for a in
                ((axis,) if isinstance(axis, numbers.Integral) else axis)]
        for a in axes:
            if x.shape[a] != 1:
                raise ShapeError(f"cannot squeeze axis {a} of size {x.shape[a]}", user_loc())
    return reshape(x, [s for i, s in enumerate(x.shape) if i not in axes])


def broadcast_to(x, shape):
    x = _traced(x, "broadcast_to")
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    if broadcast_shapes(x.shape, shape) != shape:
        raise ShapeError(f"cannot broadcast shape {x.shape} to {shape}", user_loc())
    return _wrap(x.graph, expand_node(x.graph, x.node, shape))


def getitem(x, key):
    """Basic indexing: integers, slices, None and Ellipsis (views only)."""
    if not isinstance(key, tuple):
        key = (key,)
    for k in key:
        if isinstance(k, (Tracer, np.ndarray, list)) or isinstance(k, bool):
            raise TraceError("advanced indexing (arrays, lists or booleans as indices) is not "
                             "supported; only integers, slices, None and ...", user_loc())
        if not (k is None or k is Ellipsis or isinstance(k, (slice, numbers.Integral))):
            raise TraceError(f"index {k!r} is not supported", user_loc())
    if sum(k is Ellipsis for k in key) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')", user_loc())
    n_real = sum(k is not None and k is not Ellipsis for k in key)
    if n_real > x.ndim:
        raise ShapeError(f"too many indices: array is {x.ndim}-dimensional, but {n_real} were "
                         "indexed", user_loc())
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (x.ndim - n_real) + key[i + 1:]
    else:
        key = key + (slice(None),) * (x.ndim - n_real)
    starts, steps, sizes, out_shape = [], [], [], []
    dim = 0
    for k in key:
        if k is None:
            out_shape.append(1)
            continue
        n = x.shape[dim]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            starts.append(start if count else 0)
            steps.append(step)
            sizes.append(count)
            out_shape.append(count)
        else:
            i = int(k)
            if not -n <= i < n:
                raise ShapeError(f"index {i} is out of bounds for axis {dim} with size {n}",
                                 user_loc())
            starts.append(i % n)
            steps.append(1)
            sizes.append(1)
        dim += 1
    node = x.node
    if any(st != 0 for st in starts) or any(sp != 1 for sp in steps) or tuple(sizes) != x.shape:
        if node.op is Op.CONST:
            node = x.graph.node(Op.CONST, node.dtype, tuple(sizes), (), node.arg, node.loc)
        else:
            node = x.graph.node(Op.SHRINK, node.dtype, tuple(sizes), (node,),
                                (tuple(starts), tuple(steps)), user_loc())
    return _wrap(x.graph, reshape_node(x.graph, node, out_shape))
