"""Operands of a traced function: Tracers, Python and NumPy scalars and array constants
turned into nodes of the trace's graph, and nodes wrapped back into Tracers."""
import numpy as np

from .constant import constant_node
from .errors import TraceError, DTypeError, user_loc
from .nodes import _check_dtype, _const
from .tracer import Tracer


def _graph_of(values):
    for v in values:
        if isinstance(v, Tracer):
            return v.graph
    return None


def _operand(value, graph, what="operand"):
    """A Tracer's node, or ('weak', python scalar), or a CONST node for numpy scalars."""
    if isinstance(value, Tracer):
        if value.graph is not graph:
            raise TraceError("a traced array from another call was used (arrays leaked out of a "
                             "numbamr function through globals?)", user_loc())
        return value.node
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        return ("weak", value)
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        dt = _check_dtype(value.dtype, what)
        return _const(graph, value.item(), dt, ())
    if isinstance(value, np.ndarray):
        _check_dtype(value.dtype, what)
        node = constant_node(graph, value)
        if node is None:
            raise TraceError(f"a NumPy array constant of shape {value.shape} is used inside a "
                             "numbamr function; pass it as an argument instead (only array "
                             "constants whose values follow from their indices, such as "
                             "np.arange(n)[:, None] * 2 + 1, are computed in the kernel)",
                             user_loc())
        return node
    if isinstance(value, complex):
        raise DTypeError("complex numbers are not supported by numbamr", user_loc())
    raise TraceError(f"{what} of type {type(value).__name__} is not an array or a number",
                     user_loc())


def _wrap(graph, node):
    return Tracer(graph, node)


def _no_out(out, name):
    if out is not None:
        raise TraceError(f"{name}(out=...) inside a numbamr function is not supported: return "
                         "the result instead", user_loc())
