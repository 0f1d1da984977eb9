"""Elementwise functions while tracing: numpy's ufuncs with their dtype rules, constant
folding, and the ones composed of others (``square``, ``fmod``, ``logaddexp``, ...)."""
import math
import numbers
import operator

import numpy as np

from . import dtypes
from .errors import TraceError, DTypeError, NumericError, user_loc
from .nodes import _check_dtype, _const, _result_type, _to, broadcast_shapes, cast_node
from .operands import _graph_of, _operand, _wrap
from .ops import Op
from .tracer import Tracer


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
