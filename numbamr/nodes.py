"""Graph nodes built from nodes: constants, casts, broadcasts, reshapes, permutations, and
the dtype and shape rules that combine operands (NumPy's)."""
import numpy as np

from . import dtypes
from .errors import ShapeError, DTypeError, ScalarOverflowError, user_loc
from .ops import Op


def _check_dtype(dtype, what):
    """dtypes.check, with the user's line on the error (and unknown dtype names refused)."""
    try:
        return dtypes.check(dtype, what)
    except DTypeError as e:
        raise DTypeError(e.plain_message, user_loc()) from None
    except TypeError as e:
        raise DTypeError(f"{what}: {e}", user_loc()) from None


def _const(graph, value, dtype, shape):
    dt = np.dtype(dtype)
    return graph.node(Op.CONST, dt, shape, (), dt.type(value).item(), user_loc())


def _dtype_of(operand):
    return operand[1] if isinstance(operand, tuple) else operand.dtype


def _result_type(operands):
    try:
        return dtypes.result_type(*[_dtype_of(o) for o in operands])
    except (TypeError, OverflowError) as e:
        raise DTypeError(f"no common dtype for these operands: {e}", user_loc()) from None


def broadcast_shapes(*shapes):
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise ShapeError("shapes " + ", ".join(str(tuple(s)) for s in shapes) +
                             " do not broadcast together", user_loc())
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _to(graph, operand, dtype, shape):
    """Node of ``operand`` cast to ``dtype`` and broadcast to ``shape``."""
    if isinstance(operand, tuple):          # weak python scalar
        try:
            return _const(graph, operand[1], dtype, shape)
        except OverflowError as e:          # a Python int outside an integer dtype (NumPy 2)
            raise ScalarOverflowError(str(e), user_loc()) from None
    n = cast_node(graph, operand, dtype)
    return expand_node(graph, n, shape)


def cast_node(graph, n, dtype):
    dtype = np.dtype(dtype)
    if n.dtype == dtype:
        return n
    if n.op is Op.CONST:
        return _const(graph, _cast_value(n.arg, dtype), dtype, n.shape)
    return graph.node(Op.CAST, dtype, n.shape, (n,), dtype, user_loc())


def _cast_value(value, dtype):
    with np.errstate(all="ignore"):
        return np.array(value).astype(dtype).item()


def expand_node(graph, n, shape):
    shape = tuple(shape)
    if n.shape == shape:
        return n
    if len(n.shape) < len(shape):
        n = reshape_node(graph, n, (1,) * (len(shape) - len(n.shape)) + n.shape)
    if n.shape == shape:
        return n
    if n.op is Op.CONST:
        return graph.node(Op.CONST, n.dtype, shape, (), n.arg, n.loc)
    return graph.node(Op.EXPAND, n.dtype, shape, (n,), shape, user_loc())


def reshape_node(graph, n, shape):
    shape = tuple(shape)
    if n.shape == shape:
        return n
    if n.op is Op.CONST:
        return graph.node(Op.CONST, n.dtype, shape, (), n.arg, n.loc)
    if n.op is Op.RESHAPE:
        n = n.srcs[0]
        if n.shape == shape:
            return n
    return graph.node(Op.RESHAPE, n.dtype, shape, (n,), shape, user_loc())


def permute_node(graph, n, perm):
    perm = tuple(perm)
    if perm == tuple(range(len(perm))):
        return n
    shape = tuple(n.shape[p] for p in perm)
    if n.op is Op.CONST:
        return graph.node(Op.CONST, n.dtype, shape, (), n.arg, n.loc)
    return graph.node(Op.PERMUTE, n.dtype, shape, (n,), perm, user_loc())
