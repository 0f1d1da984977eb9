"""Tracing: run the user's function on ``Tracer`` arrays and record a DAG of ``Node``s.

A Tracer behaves like a numpy array of known shape and dtype but no values. Operators,
numpy ufuncs (``__array_ufunc__``) and numpy functions (``__array_function__``) build nodes
with numpy's broadcasting and dtype rules. Anything that would need a value at trace time
(``if x.sum() > 0``) or would mutate an input raises a ``TraceError`` naming the user's line.
"""
import math
import numbers
import operator
import warnings

import numpy as np

from . import dtypes
from .errors import (NumbamrError, TraceError, ShapeError, DTypeError, NumericError,
                     ScalarOverflowError, user_loc, raised_by_user_code, mark_users_exception)
from .graph import Graph
from .ops import Op, ReduceKind


class Tracer:
    """A traced array: a node of the graph plus the graph it belongs to."""
    __slots__ = ("graph", "node")
    __array_priority__ = 1000

    def __init__(self, graph, node):
        self.graph, self.node = graph, node

    # ---- array attributes -------------------------------------------------------------
    shape = property(lambda self: self.node.shape)
    dtype = property(lambda self: self.node.dtype)
    ndim = property(lambda self: len(self.node.shape))
    size = property(lambda self: int(np.prod(self.node.shape, dtype=np.int64)))
    T = property(lambda self: self.transpose())

    def __repr__(self):
        return f"Tracer(shape={self.shape}, dtype={self.dtype})"

    def __len__(self):
        if not self.shape:
            raise TraceError("len() of a 0-d traced array", user_loc())
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # ---- things that need values: refused with a clear message ------------------------
    def __bool__(self):
        raise TraceError("Python control flow on a traced array (if/while/and/or/not, or bool()) "
                         "needs its value, which is not known while tracing; use np.where or "
                         "pass the decision as a static (non-array) argument", user_loc())

    def _no_value(self, *_):
        raise TraceError("a traced array has no value at trace time (int()/float()/index use); "
                         "pass such numbers as static (non-array) arguments", user_loc())

    __float__ = __int__ = __index__ = __complex__ = _no_value

    def __array__(self, *_, **__):
        raise TraceError("a traced array cannot be converted to a NumPy array (np.asarray, or a "
                         "numpy function numbamr does not support)", user_loc())

    def __setitem__(self, key, value):
        raise TraceError("in-place assignment (x[...] = v) inside a numbamr function is not "
                         "supported: arrays are immutable while tracing; build a new array with "
                         "np.where", user_loc())

    def _inplace(self, *_):
        raise TraceError("in-place operators (+=, *=, ...) on arrays inside a numbamr function are "
                         "not supported (they would mutate an input); write x = x + y instead",
                         user_loc())

    __iadd__ = __isub__ = __imul__ = __itruediv__ = __ifloordiv__ = __imod__ = __ipow__ = _inplace
    __iand__ = __ior__ = __ixor__ = __imatmul__ = _inplace
    __hash__ = object.__hash__

    # ---- operators ---------------------------------------------------------------------
    def __add__(self, o): return add(self, o)
    def __radd__(self, o): return add(o, self)
    def __sub__(self, o): return subtract(self, o)
    def __rsub__(self, o): return subtract(o, self)
    def __mul__(self, o): return multiply(self, o)
    def __rmul__(self, o): return multiply(o, self)
    def __truediv__(self, o): return true_divide(self, o)
    def __rtruediv__(self, o): return true_divide(o, self)
    def __floordiv__(self, o): return floor_divide(self, o)
    def __rfloordiv__(self, o): return floor_divide(o, self)
    def __mod__(self, o): return remainder(self, o)
    def __rmod__(self, o): return remainder(o, self)
    def __pow__(self, o): return power(self, o)
    def __rpow__(self, o): return power(o, self)
    def __neg__(self): return negative(self)
    def __pos__(self): return self
    def __abs__(self): return absolute(self)
    def __invert__(self): return invert(self)
    def __and__(self, o): return bitwise_and(self, o)
    def __rand__(self, o): return bitwise_and(o, self)
    def __or__(self, o): return bitwise_or(self, o)
    def __ror__(self, o): return bitwise_or(o, self)
    def __xor__(self, o): return bitwise_xor(self, o)
    def __rxor__(self, o): return bitwise_xor(o, self)
    def __lt__(self, o): return less(self, o)
    def __le__(self, o): return less_equal(self, o)
    def __gt__(self, o): return greater(self, o)
    def __ge__(self, o): return greater_equal(self, o)
    def __eq__(self, o): return equal(self, o)
    def __ne__(self, o): return not_equal(self, o)

    def __matmul__(self, o):
        from .composite import matmul
        return matmul(self, o)

    def __rmatmul__(self, o):
        from .composite import matmul
        return matmul(o, self)

    # ---- methods -----------------------------------------------------------------------
    def sum(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return sum_(self, axis, dtype, out, keepdims, **kw)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return prod(self, axis, dtype, out, keepdims, **kw)

    def max(self, axis=None, out=None, keepdims=False, **kw):
        return amax(self, axis, out, keepdims, **kw)

    def min(self, axis=None, out=None, keepdims=False, **kw):
        return amin(self, axis, out, keepdims, **kw)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return mean(self, axis, dtype, out, keepdims, **kw)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return var(self, axis, dtype, out, ddof, keepdims, **kw)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return std(self, axis, dtype, out, ddof, keepdims, **kw)

    def argmax(self, axis=None, out=None, keepdims=False, **kw):
        return argmax(self, axis, out, keepdims=keepdims, **kw)

    def argmin(self, axis=None, out=None, keepdims=False, **kw):
        return argmin(self, axis, out, keepdims=keepdims, **kw)

    def any(self, axis=None, out=None, keepdims=False, **kw):
        return any_(self, axis, out, keepdims, **kw)

    def all(self, axis=None, out=None, keepdims=False, **kw):
        return all_(self, axis, out, keepdims, **kw)

    def copy(self, order="K"):
        return self         # traced values are never written in place: a copy is the value

    def astype(self, dtype, copy=True):
        return astype(self, dtype)

    def reshape(self, *shape, order="C"):
        if order != "C":
            raise TraceError(f"reshape(order={order!r}) is not supported; only order='C'",
                             user_loc())
        if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
            shape = tuple(shape[0])
        return reshape(self, shape)

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], numbers.Integral):
            axes = axes[0]
        return transpose(self, axes if axes else None)

    def swapaxes(self, a, b):
        return swapaxes(self, a, b)

    def flatten(self):
        return reshape(self, (-1,))

    ravel = flatten

    def squeeze(self, axis=None):
        return squeeze(self, axis)

    def clip(self, a_min=None, a_max=None):
        return clip(self, a_min, a_max)

    def __getitem__(self, key):
        return getitem(self, key)

    def __getattr__(self, name):
        # only reached for names a Tracer lacks: name the ndarray method numbamr cannot trace
        if not name.startswith("_") and hasattr(np.ndarray, name):
            raise _UnsupportedAttribute(f"the array method or attribute .{name} is not supported "
                                        "by numbamr", user_loc())
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ---- numpy protocols ---------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__":
            raise TraceError(f"np.{ufunc.__name__}.{method} is not supported; use the "
                             f"array methods (.sum(), .max(), ...)", user_loc())
        fn = UFUNCS.get(ufunc)
        if fn is None:
            raise TraceError(f"the numpy ufunc np.{ufunc.__name__} is not supported by numbamr",
                             user_loc())
        out = kwargs.pop("out", None)
        if out is not None:
            raise TraceError(f"np.{ufunc.__name__}(..., out=...) inside a numbamr function is not "
                             "supported: return the result instead", user_loc())
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("casting", None)
        taken = {k: kwargs.pop(k) for k in getattr(fn, "keywords", ()) if k in kwargs}
        if kwargs:
            raise TraceError(f"np.{ufunc.__name__}: arguments {sorted(kwargs)} are not supported",
                             user_loc())
        result = fn(*inputs, **taken)
        return astype(result, dtype) if dtype is not None else result

    def __array_function__(self, func, types, args, kwargs):
        fn = FUNCTIONS.get(func)
        if fn is None:
            hint = INSTEAD.get(getattr(func, "__name__", ""), "")
            raise TraceError(f"the numpy function {_numpy_name(func)} is not supported by "
                             f"numbamr{hint}", user_loc())
        # NumPy's own "not given" marker (np.sum(x) jitted as a function passes every default)
        return fn(*args, **{k: v for k, v in kwargs.items() if v is not np._NoValue})


# what to write instead of an unsupported NumPy function, where a fused form exists
INSTEAD = {
    "take_along_axis": "; to pick one element a row, compare positions with the indices: "
                       "np.where(np.arange(n) == idx[:, None], x, 0).sum(axis=-1) (an index "
                       "out of range picks nothing instead of raising IndexError)",
}


class _UnsupportedAttribute(TraceError, AttributeError):
    """An ndarray method or attribute a Tracer does not have (still an AttributeError, so
    hasattr() keeps working)."""


def _numpy_name(func):
    """np.cumsum, np.fft.fft, np.linalg.norm: a numpy function as the user would write it."""
    mod = getattr(func, "__module__", None) or "numpy"
    parts = [p for p in mod.split(".")[1:] if not p.startswith("_")] \
        if mod.split(".")[0] == "numpy" else []
    return ".".join(["np", *parts, getattr(func, "__name__", repr(func))])


def _no_out(out, name):
    if out is not None:
        raise TraceError(f"{name}(out=...) inside a numbamr function is not supported: return "
                         "the result instead", user_loc())


# ======================================================================================
# turning operands into nodes
# ======================================================================================

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
        from .constant import constant_node     # it builds its nodes with this module's
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


def _wrap(graph, node):
    return Tracer(graph, node)


# ======================================================================================
# elementwise
# ======================================================================================

def _elementwise(op, values, dtype_rule, name):
    graph = _graph_of(values)
    if graph is None:                        # no traced operand: plain numpy
        return getattr(np, name)(*values)
    operands = [_operand(v, graph) for v in values]
    for o in operands:
        if not isinstance(o, tuple):
            dtypes.check(o.dtype, f"the operand of {name}")
    common = _result_type(operands)
    in_dtype, out_dtype = dtype_rule(common, operands)
    shape = broadcast_shapes(*[o.shape for o in operands if not isinstance(o, tuple)])
    if dtype_rule is _compare_rule and in_dtype.kind in "iu":
        known = _compared_outside_range(op, operands, in_dtype)
        if known is not None:
            return _wrap(graph, _const(graph, known, dtypes.BOOL, shape))
    srcs = [_to(graph, o, in_dtype, shape) for o in operands]
    if op is None:                           # identity (e.g. positive)
        return _wrap(graph, srcs[0])
    if all(s.op is Op.CONST for s in srcs) and op not in (Op.CAST,):
        folded = _fold(op, [s.arg for s in srcs], in_dtype, out_dtype)
        if folded is not None:
            return _wrap(graph, _const(graph, folded, out_dtype, shape))
    return _wrap(graph, graph.node(op, out_dtype, shape, srcs, None, user_loc()))


def _fold(op, args, in_dtype, out_dtype):
    """Constant folding through numpy (same rules as the kernel would apply)."""
    fn = _NUMPY_OF.get(op)
    if fn is None:
        return None
    with np.errstate(all="ignore"):
        vals = [np.array(a, dtype=in_dtype) for a in args]
        return np.asarray(fn(*vals)).astype(out_dtype).item()


def _same(common, operands):
    return common, common


def _float_rule(common, operands):
    f = dtypes.float_of(common)
    return f, f


def _true_div_rule(common, operands):
    f = common if dtypes.is_float(common) else dtypes.FLOAT64
    return f, f


def _compare_rule(common, operands):
    return common, dtypes.BOOL


_PY_COMPARE = {Op.LT: operator.lt, Op.LE: operator.le, Op.GT: operator.gt, Op.GE: operator.ge,
               Op.EQ: operator.eq, Op.NE: operator.ne}


def _compared_outside_range(op, operands, dtype):
    """The outcome of comparing integers of ``dtype`` with a Python int outside its range,
    the same for every element (NumPy 2 compares them exactly: ``int8 array < 1000`` is
    all True); None when no operand is such an int."""
    info = np.iinfo(dtype)
    for i, o in enumerate(operands):
        if isinstance(o, tuple) and isinstance(o[1], int) and not info.min <= o[1] <= info.max:
            sides = [0, 0]                  # any element of the array: inside the range
            sides[i] = math.inf if o[1] > info.max else -math.inf
            return _PY_COMPARE[op](*sides)
    return None


def _bool_rule(common, operands):
    return dtypes.BOOL, dtypes.BOOL


def _int_or_bool_rule(common, operands):
    if common.kind not in "biu":
        raise DTypeError(f"bitwise/logical operators need bool or integer operands, got {common}",
                         user_loc())
    return common, common


def _numeric_rule(name):
    def rule(common, operands):
        if common.kind == "b":
            raise DTypeError(f"np.{name} is not supported for bool arrays (numpy refuses it too)",
                             user_loc())
        return common, common
    return rule


def _make_binary(op, rule, name):
    def fn(a, b):
        return _elementwise(op, (a, b), rule, name)
    fn.__name__ = name
    return fn


def _make_unary(op, rule, name):
    def fn(x):
        return _elementwise(op, (x,), rule, name)
    fn.__name__ = name
    return fn


def _add_rule(common, operands):
    return common, common


def add(a, b):
    if _result_type_of(a, b) == dtypes.BOOL:
        return _elementwise(Op.OR, (a, b), _bool_rule, "add")
    return _elementwise(Op.ADD, (a, b), _same, "add")


def multiply(a, b):
    if _result_type_of(a, b) == dtypes.BOOL:
        return _elementwise(Op.AND, (a, b), _bool_rule, "multiply")
    return _elementwise(Op.MUL, (a, b), _same, "multiply")


def _result_type_of(*values):
    graph = _graph_of(values)
    if graph is None:
        return None
    return _result_type([_operand(v, graph) for v in values])


subtract = _make_binary(Op.SUB, _numeric_rule("subtract"), "subtract")
true_divide = _make_binary(Op.DIV, _true_div_rule, "true_divide")
floor_divide = _make_binary(Op.FLOORDIV, _numeric_rule("floor_divide"), "floor_divide")
remainder = _make_binary(Op.MOD, _numeric_rule("remainder"), "remainder")
maximum = _make_binary(Op.MAX, _same, "maximum")
minimum = _make_binary(Op.MIN, _same, "minimum")
less = _make_binary(Op.LT, _compare_rule, "less")
less_equal = _make_binary(Op.LE, _compare_rule, "less_equal")
greater = _make_binary(Op.GT, _compare_rule, "greater")
greater_equal = _make_binary(Op.GE, _compare_rule, "greater_equal")
equal = _make_binary(Op.EQ, _compare_rule, "equal")
not_equal = _make_binary(Op.NE, _compare_rule, "not_equal")
bitwise_and = _make_binary(Op.AND, _int_or_bool_rule, "bitwise_and")
bitwise_or = _make_binary(Op.OR, _int_or_bool_rule, "bitwise_or")
bitwise_xor = _make_binary(Op.XOR, _int_or_bool_rule, "bitwise_xor")
logical_and = _make_binary(Op.AND, _bool_rule, "logical_and")
logical_or = _make_binary(Op.OR, _bool_rule, "logical_or")
logical_xor = _make_binary(Op.XOR, _bool_rule, "logical_xor")
logical_not = _make_unary(Op.NOT, _bool_rule, "logical_not")
invert = _make_unary(Op.NOT, _int_or_bool_rule, "invert")
negative = _make_unary(Op.NEG, _numeric_rule("negative"), "negative")
absolute = _make_unary(Op.ABS, _same, "absolute")
exp = _make_unary(Op.EXP, _float_rule, "exp")
exp2 = _make_unary(Op.EXP2, _float_rule, "exp2")
log = _make_unary(Op.LOG, _float_rule, "log")
log2 = _make_unary(Op.LOG2, _float_rule, "log2")
sqrt = _make_unary(Op.SQRT, _float_rule, "sqrt")
rsqrt = _make_unary(Op.RSQRT, _float_rule, "rsqrt")
sin = _make_unary(Op.SIN, _float_rule, "sin")
cos = _make_unary(Op.COS, _float_rule, "cos")
tanh = _make_unary(Op.TANH, _float_rule, "tanh")
sigmoid = _make_unary(Op.SIGMOID, _float_rule, "sigmoid")
erf = _make_unary(Op.ERF, _float_rule, "erf")
_reciprocal = _make_unary(Op.RECIP, _same, "reciprocal")
floor = _make_unary(Op.FLOOR, _same, "floor")
ceil = _make_unary(Op.CEIL, _same, "ceil")


def _isnan_rule(common, operands):
    return common, dtypes.BOOL


_isnan = _make_unary(Op.ISNAN, _isnan_rule, "isnan")


def isnan(x):
    if _graph_of([x]) is not None and not dtypes.is_float(_result_type_of(x)):
        return _wrap(x.graph, _const(x.graph, False, dtypes.BOOL, x.shape))
    return _isnan(x)


def power(a, b):
    graph = _graph_of((a, b))
    if graph is not None and isinstance(b, (int, float)) and not isinstance(b, bool):
        if b == 2:
            return multiply(a, a)
        if b == 1:
            return positive(a)
        if b == 0.5 and dtypes.is_float(_result_type_of(a, b)):
            return sqrt(a)
    return _elementwise(Op.POW, (a, b), _power_rule, "power")


def _power_rule(common, operands):
    """An integer to a constant negative integer power is refused, as NumPy refuses it. An
    array exponent's negative values cannot be refused (a kernel does not raise): there the
    kernel computes what numba's integer power gives, where NumPy raises ValueError."""
    _numeric_rule("power")(common, operands)
    exponent = operands[1]
    weak = isinstance(exponent, tuple)
    value = exponent[1] if weak else exponent.arg if exponent.op is Op.CONST else None
    # an unsigned result with a negative Python int: the int overflows first (as in NumPy)
    if common.kind == "i" or (common.kind == "u" and not weak):
        if isinstance(value, numbers.Real) and value < 0:
            raise NumericError("Integers to negative integer powers are not allowed.",
                               user_loc())
    return common, common


def positive(x):
    return _elementwise(None, (x,), _same, "positive")


def _bool_as_int8(x):
    """numpy's square and reciprocal have no bool loop: bool promotes to int8."""
    if isinstance(x, Tracer) and x.dtype == dtypes.BOOL:
        return astype(x, np.int8)
    return x


def square(x):
    x = _bool_as_int8(x)
    return multiply(x, x)


def reciprocal(x):
    x = _bool_as_int8(x)
    if isinstance(x, Tracer) and dtypes.is_int(x.dtype):
        # numpy truncates 1 / x toward zero: only 1 and -1 give a nonzero result
        return where(equal(absolute(x), 1), x, 0)
    return _reciprocal(x)


def log10(x):
    return multiply(log(x), float(1.0 / np.log(10.0)))      # a weak python float: keeps float32


# their own ops, not log(1 + x) and exp(x) - 1: those lose every digit of a small x that
# 1 + x rounds away (NumPy's are accurate there)
log1p = _make_unary(Op.LOG1P, _float_rule, "log1p")
expm1 = _make_unary(Op.EXPM1, _float_rule, "expm1")
sinh = _make_unary(Op.SINH, _float_rule, "sinh")
cosh = _make_unary(Op.COSH, _float_rule, "cosh")
tan = _make_unary(Op.TAN, _float_rule, "tan")
arcsin = _make_unary(Op.ASIN, _float_rule, "arcsin")
arccos = _make_unary(Op.ACOS, _float_rule, "arccos")
arctan = _make_unary(Op.ATAN, _float_rule, "arctan")
arcsinh = _make_unary(Op.ASINH, _float_rule, "arcsinh")
arccosh = _make_unary(Op.ACOSH, _float_rule, "arccosh")
arctanh = _make_unary(Op.ATANH, _float_rule, "arctanh")
arctan2 = _make_binary(Op.ATAN2, _float_rule, "arctan2")
hypot = _make_binary(Op.HYPOT, _float_rule, "hypot")
_float_fmod = _make_binary(Op.FMOD, _float_rule, "fmod")
copysign = _make_binary(Op.COPYSIGN, _float_rule, "copysign")


def fmod(a, b):
    """The remainder with the dividend's sign (C's fmod); integers stay integers, and a
    zero divisor gives 0, as NumPy gives them."""
    a, b = _bool_as_int8(a), _bool_as_int8(b)
    common = _result_type_of(a, b)
    if common is None or not dtypes.is_int(common):
        return _float_fmod(a, b)
    r = remainder(a, b)             # the divisor's sign; 0 where b is 0
    return where(logical_and(not_equal(r, 0), not_equal(less(r, 0), less(a, 0))),
                 subtract(r, b), r)


def trunc(x):
    return where(less(x, 0), ceil(x), floor(x))


def _skipping_nan(pick, name):
    """``pick`` (maximum or minimum) taking the other operand where one is NaN (NaN only
    where both are): np.fmax, np.fmin."""
    def fn(a, b):
        return where(isnan(b), a, where(isnan(a), b, pick(a, b)))
    fn.__name__ = name
    return fn


fmax = _skipping_nan(maximum, "fmax")
fmin = _skipping_nan(minimum, "fmin")


def _as_float(*values):
    """``values`` in the float dtype a float-only ufunc computes them in (int8 -> float16,
    int32 -> float64, as NumPy picks its loop)."""
    common = _result_type_of(*values)
    if common is None:
        return values
    f = dtypes.float_of(common)
    return tuple(astype(v, f) if isinstance(v, Tracer) else v for v in values)


def deg2rad(x):
    (x,) = _as_float(x)
    return multiply(x, float(np.pi / 180.0))


def rad2deg(x):
    (x,) = _as_float(x)
    return multiply(x, float(180.0 / np.pi))


def heaviside(x, h):
    x, h = _as_float(x, h)
    return where(isnan(x), x, where(less(x, 0), 0.0, where(greater(x, 0), 1.0, h)))


def isinf(x):
    return equal(absolute(x), np.inf)


def isfinite(x):
    return logical_not(logical_or(isnan(x), isinf(x)))


def sign(x):
    s = subtract(astype(greater(x, 0), _dt(x)), astype(less(x, 0), _dt(x)))
    return where(isnan(x), x, s) if np.dtype(_dt(x)).kind == "f" else s    # NaN stays NaN


def _dt(x):
    return x.dtype if isinstance(x, Tracer) else np.asarray(x).dtype


def logaddexp(a, b):
    m = maximum(a, b)
    spread = add(m, log1p(exp(negative(absolute(subtract(a, b))))))
    # equal arguments apart, as NumPy takes them: two equal infinities give that infinity
    # (their difference is NaN)
    return where(equal(a, b), add(m, float(np.log(2.0))), spread)


def where(cond, a=None, b=None):
    if a is None or b is None:
        raise TraceError("np.where(cond) with one argument (indices) is not supported; "
                         "use np.where(cond, a, b)", user_loc())
    graph = _graph_of((cond, a, b))
    if graph is None:
        return np.where(cond, a, b)
    c, x, y = (_operand(v, graph) for v in (cond, a, b))
    dt = _result_type([x, y])
    shape = broadcast_shapes(*[o.shape for o in (c, x, y) if not isinstance(o, tuple)])
    c = _to(graph, c, dtypes.BOOL, shape)
    x, y = _to(graph, x, dt, shape), _to(graph, y, dt, shape)
    if c.op is Op.CONST:
        return _wrap(graph, x if c.arg else y)
    return _wrap(graph, graph.node(Op.WHERE, dt, shape, (c, x, y), None, user_loc()))


def clip(x, a_min=None, a_max=None):
    if a_min is not None:
        x = maximum(x, a_min)
    if a_max is not None:
        x = minimum(x, a_max)
    return x


def astype(x, dtype):
    if not isinstance(x, Tracer):
        return np.asarray(x).astype(dtype)
    dt = _check_dtype(dtype, "astype's target dtype")
    return _wrap(x.graph, cast_node(x.graph, x.node, dt))


# ======================================================================================
# movement
# ======================================================================================

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


# ======================================================================================
# reductions
# ======================================================================================

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


# ======================================================================================
# tables: numpy ufuncs and functions handled while tracing
# ======================================================================================

UFUNCS = {
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
}

FUNCTIONS = {
    np.sum: sum_, np.prod: prod, np.max: amax, np.amax: amax, np.min: amin, np.amin: amin,
    np.mean: mean, np.var: var, np.std: std, np.argmax: argmax, np.argmin: argmin,
    np.any: any_, np.all: all_, np.where: where, np.clip: clip, np.reshape: reshape,
    np.transpose: transpose, np.swapaxes: swapaxes, np.moveaxis: moveaxis,
    np.expand_dims: expand_dims, np.squeeze: squeeze, np.broadcast_to: broadcast_to,
    np.nansum: nansum, np.nanmax: nanmax, np.nanmin: nanmin, np.nanmean: nanmean,
    np.copy: lambda x, order="K", subok=False: x, np.ptp: ptp, np.count_nonzero: count_nonzero,
    np.ravel: lambda x, order="C": reshape(x, (-1,)),
    np.shape: lambda x: x.shape, np.ndim: lambda x: x.ndim, np.size: lambda x: x.size,
}

# numpy implementations used for constant folding (same semantics as the kernels)
_NUMPY_OF = {
    Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.true_divide,
    Op.FLOORDIV: np.floor_divide, Op.MOD: np.remainder, Op.POW: np.power, Op.MAX: np.maximum,
    Op.MIN: np.minimum, Op.LT: np.less, Op.LE: np.less_equal, Op.GT: np.greater,
    Op.GE: np.greater_equal, Op.EQ: np.equal, Op.NE: np.not_equal, Op.NEG: np.negative,
    Op.ABS: np.absolute, Op.EXP: np.exp, Op.LOG: np.log, Op.SQRT: np.sqrt, Op.SIN: np.sin,
    Op.COS: np.cos, Op.TANH: np.tanh, Op.FLOOR: np.floor, Op.CEIL: np.ceil,
    Op.LOG1P: np.log1p, Op.EXPM1: np.expm1, Op.SINH: np.sinh, Op.COSH: np.cosh, Op.TAN: np.tan,
    Op.ASIN: np.arcsin, Op.ACOS: np.arccos, Op.ATAN: np.arctan, Op.ASINH: np.arcsinh,
    Op.ACOSH: np.arccosh, Op.ATANH: np.arctanh, Op.ATAN2: np.arctan2, Op.HYPOT: np.hypot,
    Op.FMOD: np.fmod, Op.COPYSIGN: np.copysign,
}


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


def _register_composites():
    """The NumPy functions composed of the ones above (composite.py imports this module)."""
    from . import composite
    UFUNCS.update(composite.UFUNCS)
    FUNCTIONS.update(composite.FUNCTIONS)


_register_composites()
