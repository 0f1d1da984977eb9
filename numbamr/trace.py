"""Tracing: run the user's function on ``Tracer`` arrays and record a DAG of ``Node``s.

A Tracer behaves like a numpy array of known shape and dtype but no values. Operators,
numpy ufuncs (``__array_ufunc__``) and numpy functions (``__array_function__``) build nodes
with numpy's broadcasting and dtype rules. Anything that would need a value at trace time
(``if x.sum() > 0``) or would mutate an input raises a ``TraceError`` naming the user's line.

The traced functions live in the modules below this one: ``tracer`` (the Tracer class and
the tables its operators read), ``nodes`` and ``operands`` (building nodes), ``ufuncs``,
``movement``, ``reductions`` and ``composite``; this module fills the tables and runs a
function under trace.
"""
import numpy as np

from . import composite, dtypes
from .errors import NumbamrError, TraceError, raised_by_user_code, mark_users_exception
from .graph import Graph
from .movement import (broadcast_to, expand_dims, getitem, moveaxis, reshape, squeeze,
                       swapaxes, transpose)
from .nodes import _const
from .ops import Op
from .reductions import (all_, amax, amin, any_, argmax, argmin, count_nonzero, logsumexp,
                         mean, nanmax, nanmean, nanmin, nansum, prod, ptp, softmax, std, sum_,
                         var)
from .tracer import FUNCTIONS, METHODS, UFUNCS, Tracer
from .ufuncs import (absolute, add, arccos, arccosh, arcsin, arcsinh, arctan, arctan2,
                     arctanh, astype, bitwise_and, bitwise_or, bitwise_xor, ceil, clip,
                     copysign, cos, cosh, deg2rad, equal, erf, exp, exp2, expm1, floor,
                     floor_divide, fmax, fmin, fmod, greater, greater_equal, heaviside, hypot,
                     invert, isfinite, isinf, isnan, less, less_equal, log, log10, log1p, log2,
                     logaddexp, logical_and, logical_not, logical_or, logical_xor, maximum,
                     minimum, multiply, negative, not_equal, positive, power, rad2deg,
                     reciprocal, remainder, rsqrt, sigmoid, sign, sin, sinh, sqrt, square,
                     subtract, tan, tanh, true_divide, trunc, where)

# the tracing API, and the traced functions numbamr exports (numbamr/__init__.py)
__all__ = ["trace", "Tracer", "has_tracer", "frozen_names", "flatten_outputs", "exp", "exp2",
           "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf", "where",
           "maximum", "minimum", "logsumexp", "softmax", "isnan", "isfinite", "abs_", "astype",
           "sum_", "amax", "amin", "mean", "var", "std", "prod", "argmax", "argmin", "any_",
           "all_", "reshape", "transpose", "broadcast_to", "clip"]


# ======================================================================================
# tables: numpy ufuncs and functions handled while tracing
# ======================================================================================

UFUNCS.update({
    np.add: add, np.subtract: subtract, np.multiply: multiply, np.true_divide: true_divide,
    np.floor_divide: floor_divide, np.remainder: remainder, np.power: power,
    np.negative: negative, np.positive: positive, np.absolute: absolute, np.maximum: maximum,
    np.minimum: minimum, np.exp: exp, np.exp2: exp2, np.log: log, np.log2: log2,
    np.log10: log10, np.log1p: log1p, np.expm1: expm1, np.sqrt: sqrt, np.square: square,
    np.reciprocal: reciprocal, np.sin: sin, np.cos: cos, np.tanh: tanh, np.floor: floor,
    np.ceil: ceil, np.sign: sign, np.isnan: isnan, np.isinf: isinf, np.isfinite: isfinite,
    np.less: less, np.less_equal: less_equal, np.greater: greater,
    np.greater_equal: greater_equal, np.equal: equal, np.not_equal: not_equal,
    np.logical_and: logical_and, np.logical_or: logical_or, np.logical_xor: logical_xor,
    np.logical_not: logical_not, np.bitwise_and: bitwise_and, np.bitwise_or: bitwise_or,
    np.bitwise_xor: bitwise_xor, np.invert: invert, np.logaddexp: logaddexp,
    np.sinh: sinh, np.cosh: cosh, np.tan: tan, np.arcsin: arcsin, np.arccos: arccos,
    np.arctan: arctan, np.arcsinh: arcsinh, np.arccosh: arccosh, np.arctanh: arctanh,
    np.arctan2: arctan2, np.hypot: hypot, np.fmod: fmod, np.copysign: copysign,
    np.trunc: trunc, np.fmax: fmax, np.fmin: fmin, np.deg2rad: deg2rad, np.radians: deg2rad,
    np.rad2deg: rad2deg, np.degrees: rad2deg, np.heaviside: heaviside,
})

FUNCTIONS.update({
    np.sum: sum_, np.prod: prod, np.max: amax, np.amax: amax, np.min: amin, np.amin: amin,
    np.mean: mean, np.var: var, np.std: std, np.argmax: argmax, np.argmin: argmin,
    np.any: any_, np.all: all_, np.where: where, np.clip: clip, np.reshape: reshape,
    np.transpose: transpose, np.swapaxes: swapaxes, np.moveaxis: moveaxis,
    np.expand_dims: expand_dims, np.squeeze: squeeze, np.broadcast_to: broadcast_to,
    np.nansum: nansum, np.nanmax: nanmax, np.nanmin: nanmin, np.nanmean: nanmean,
    np.copy: lambda x, order="K", subok=False: x, np.ptp: ptp, np.count_nonzero: count_nonzero,
    np.ravel: lambda x, order="C": reshape(x, (-1,)),
    np.shape: lambda x: x.shape, np.ndim: lambda x: x.ndim, np.size: lambda x: x.size,
})
METHODS.update({"astype": astype, "getitem": getitem})
# the NumPy functions composed of the ones above
UFUNCS.update(composite.UFUNCS)
FUNCTIONS.update(composite.FUNCTIONS)


# ======================================================================================
# running a function under trace
# ======================================================================================

def trace(call, specs):
    """Trace ``call(values)`` with one Tracer per array spec in ``values``.

    ``specs`` is a list of (kind, value) where kind is 'array' (value = (shape, dtype)) or
    'static' (value passed through). Returns (graph, output nodes, output structure).
    """
    graph = Graph()
    args = []
    for pos, (kind, value) in enumerate(specs):
        if kind == "array":
            shape, dt = value
            node = graph.node(Op.INPUT, dt, shape, (), pos, None)
            graph.inputs[pos] = node
            args.append(Tracer(graph, node))
        else:
            args.append(value)
    try:
        result = call(args)
    except NumbamrError:
        raise
    except Exception as e:      # raised in the user's code: theirs, not a bug of numbamr
        loc = raised_by_user_code(e)
        if loc is not None:
            mark_users_exception(e, loc)
        raise
    return graph, *flatten_outputs(graph, result)


def has_tracer(args, kwargs):
    """Whether a call's arguments hold a traced array: a jitted function called by one being
    traced, whose trace it then joins (its Python function runs on the Tracers)."""
    return any(_holds_tracer(a) for a in args) or any(_holds_tracer(v) for v in kwargs.values())


def _holds_tracer(value):
    if isinstance(value, (tuple, list)):
        return any(_holds_tracer(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_tracer(v) for v in value.values())
    return isinstance(value, Tracer)


def frozen_names(fn):
    """(globals, closure variables) that ``fn``'s code reads and that hold data rather than
    modules or callables: their values at trace time are compiled into the kernel and later
    changes are not seen (NUMBAMR_DEBUG=1 lists them). Found from the code objects (``fn``'s
    and those nested in it: lambdas, comprehensions), not from a run, so a name read only on
    a path the trace did not take is listed too."""
    fn = getattr(fn, "func", fn)                    # functools.partial
    code = getattr(fn, "__code__", None)
    if code is None:
        return [], []
    scope = getattr(fn, "__globals__", {})
    names = [n for c in _code_objects(code) for n in c.co_names
             if n in scope and _is_data(scope[n])]
    cells = zip(code.co_freevars, getattr(fn, "__closure__", None) or ())
    closure = [n for n, cell in cells if _is_data(_cell_value(cell))]
    return list(dict.fromkeys(names)), closure


def _code_objects(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, type(code)):
            yield from _code_objects(c)


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:              # a variable not yet assigned
        return None


def _is_data(value):
    return value is not None and not callable(value) and not isinstance(value, type(np))


def flatten_outputs(graph, result):
    """Output nodes and a structure tag to rebuild the user's tuple/list/dict."""
    if isinstance(result, dict):
        keys = list(result)
        return [_output_node(graph, result[k], f"output {k!r}") for k in keys], ("dict", keys)
    if isinstance(result, (tuple, list)):
        kind = "tuple" if isinstance(result, tuple) else "list"
        return ([_output_node(graph, r, f"output {i}") for i, r in enumerate(result)],
                (kind, len(result)))
    return [_output_node(graph, result, "the output")], ("single", None)


def _output_node(graph, value, what):
    if isinstance(value, Tracer):
        if value.graph is not graph:
            raise TraceError(f"{what} is a traced array from another call", None)
        return value.node
    if isinstance(value, (bool, int, float, np.generic)):
        dt = np.result_type(value) if isinstance(value, np.generic) else \
            np.asarray(value).dtype
        return _const(graph, value, dtypes.check(dt, what), ())
    raise TraceError(f"{what} is a {type(value).__name__}; a numbamr function must return arrays "
                     "(or a tuple/list/dict of arrays)", None)


abs_ = absolute
