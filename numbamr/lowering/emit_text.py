"""Source text of values for the emitter: numba type names, casts (bfloat16 as its bits,
through float32 rounded to odd), ALU ops, reduce updates and arg-reduce choices, literals.

Every choice is written as ``select(c, a, b)``, an LLVM select, not as a branch (see
numbamr.lowering.emit).
"""
import numpy as np

from .. import dtypes
from ..ops import Op, ReduceKind
from .linearize import const_literal, exchange_dtype as _xdt

FULL_MASK = "0xFFFFFFFF"


def dtype_name(dt):
    """The numba type of values of ``dt`` (bfloat16 values are their bits, a uint16)."""
    dt = np.dtype(dt)
    if dtypes.is_bfloat16(dt):
        return "uint16"
    return "boolean" if dt.kind == "b" else dt.name


def cast_text(text, to_dt, from_dt=None):
    to_dt = np.dtype(to_dt)
    if from_dt is not None and dtypes.is_bfloat16(from_dt):
        text, from_dt = f"bf16_to_f32({text})", dtypes.FLOAT32
        if to_dt == dtypes.FLOAT32:
            return text
    if dtypes.is_bfloat16(to_dt):
        return f"f32_to_bf16({to_float32_for_bfloat16(text, from_dt)})"
    if to_dt.kind == "b":
        return f"({text} != 0)"
    return f"{dtype_name(to_dt)}({text})"


def shuffle_dtype(dt):
    """The dtype ``dt`` crosses a warp shuffle in: numba shuffles only int32, int64, float32
    and float64, so unsigned integers go as the signed integer of their width (numba's casts
    between them keep the bits) and narrower values as shared memory holds them."""
    xdt = _xdt(dt)
    if xdt.kind == "u":
        return np.dtype(f"int{8 * xdt.itemsize}")
    return np.dtype(np.float32) if xdt == np.float16 else xdt


def integer_partial(dt):
    return np.dtype(dt).kind in "biu"


def to_float32_for_bfloat16(text, from_dt):
    """``text`` as a float32 that rounds to the bfloat16 nearest its value: float64 (and
    integers, through float64 as ml_dtypes casts them) rounded to odd, so the one rounding to
    bfloat16 is the only one (see intrinsics.f64_to_f32_odd)."""
    from_dt = None if from_dt is None else np.dtype(from_dt)
    if from_dt == dtypes.FLOAT32:
        return text
    if from_dt == np.dtype(np.float64):
        return f"f64_to_f32_odd({text})"
    if from_dt is not None and from_dt.kind in "iu":
        return f"f64_to_f32_odd(float64({text}))"
    return f"float32({text})"


def _narrow(dt):
    """numba widens integer arithmetic to 64 bits; results of narrower ints are cast back."""
    dt = np.dtype(dt)
    return dt.kind in "iu" and dt.itemsize < 8


def _wrap(text, dt):
    return cast_text(text, dt) if _narrow(dt) else text


def nan_minmax(op_max, dt, a, b, native):
    """NaN-propagating max/min of texts ``a``, ``b`` (numpy's): one ``max.NaN`` instruction
    where ``native`` (float32 on sm_80 and newer), else compare, NaN test and select."""
    if native and np.dtype(dt) == np.float32:
        return f"{'fmax_nan' if op_max else 'fmin_nan'}({a}, {b})"
    cmp = ">" if op_max else "<"
    return f"select(({a} {cmp} {b}) | ({a} != {a}), {a}, {b})"


# ops that are one function of the target's ``math`` (numba's on the GPU, runtime.simmath in
# the simulator), on all their operands
MATH_FUNCTIONS = {
    Op.EXP: "exp", Op.LOG: "log", Op.LOG2: "log2", Op.SQRT: "sqrt", Op.SIN: "sin",
    Op.COS: "cos", Op.TANH: "tanh", Op.ERF: "erf", Op.LOG1P: "log1p", Op.EXPM1: "expm1",
    Op.SINH: "sinh", Op.COSH: "cosh", Op.TAN: "tan", Op.ASIN: "asin", Op.ACOS: "acos",
    Op.ATAN: "atan", Op.ASINH: "asinh", Op.ACOSH: "acosh", Op.ATANH: "atanh",
    Op.ATAN2: "atan2", Op.HYPOT: "hypot", Op.FMOD: "fmod", Op.COPYSIGN: "copysign",
}


def alu_text(op, dt, a, native=False):
    """Source text of an ALU op on operand texts ``a`` with result dtype ``dt`` (``native``:
    see nan_minmax)."""
    dt = np.dtype(dt)
    f = dt.kind == "f"
    one = f"{dtype_name(dt)}(1.0)" if f else None
    x = a[0]
    simple = {
        Op.ADD: lambda: f"{a[0]} + {a[1]}", Op.SUB: lambda: f"{a[0]} - {a[1]}",
        Op.MUL: lambda: f"{a[0]} * {a[1]}", Op.DIV: lambda: f"{a[0]} / {a[1]}",
        Op.MUL_RN: lambda: f"mul_rn({a[0]}, {a[1]})",
        Op.LT: lambda: f"{a[0]} < {a[1]}", Op.LE: lambda: f"{a[0]} <= {a[1]}",
        Op.GT: lambda: f"{a[0]} > {a[1]}", Op.GE: lambda: f"{a[0]} >= {a[1]}",
        Op.EQ: lambda: f"{a[0]} == {a[1]}", Op.NE: lambda: f"{a[0]} != {a[1]}",
        Op.AND: lambda: f"{a[0]} & {a[1]}", Op.OR: lambda: f"{a[0]} | {a[1]}",
        Op.XOR: lambda: f"{a[0]} ^ {a[1]}", Op.WHERE: lambda: f"select({a[0]}, {a[1]}, {a[2]})",
        Op.NEG: lambda: f"-{x}", Op.ABS: lambda: f"abs({x})",
        Op.ISNAN: lambda: f"{x} != {x}",
    }
    if op in simple:
        text = simple[op]()
        return _wrap(text, dt) if op not in (Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE,
                                             Op.ISNAN) else text
    if op is Op.NOT:
        return f"not {x}" if dt.kind == "b" else _wrap(f"~{x}", dt)
    if op in (Op.MAX, Op.MIN):
        if f:          # numpy propagates NaN through maximum/minimum
            return nan_minmax(op is Op.MAX, dt, a[0], a[1], native)
        cmp = ">" if op is Op.MAX else "<"
        return f"select({a[0]} {cmp} {a[1]}, {a[0]}, {a[1]})"
    if op is Op.FLOORDIV and not f:     # floats: Emitter.float_divmod
        return cast_text(f"{a[0]} // {a[1]} if {a[1]} != 0 else 0", dt)
    if op is Op.MOD and not f:
        return cast_text(f"{a[0]} % {a[1]} if {a[1]} != 0 else 0", dt)
    if op is Op.POW:
        return cast_text(f"{a[0]} ** {a[1]}", dt)
    if op in MATH_FUNCTIONS:
        return f"math.{MATH_FUNCTIONS[op]}({', '.join(a)})"
    if op is Op.EXP2:
        return f"{dtype_name(dt)}(2.0) ** {x}"
    if op is Op.RSQRT:
        return f"{one} / math.sqrt({x})"
    if op is Op.SIGMOID:
        return f"{one} / ({one} + math.exp(-{x}))"
    if op is Op.RECIP:
        return f"{one} / {x}" if f else cast_text(f"1 // {x} if {x} != 0 else 0", dt)
    if op in (Op.FLOOR, Op.CEIL):
        fn = "math.floor" if op is Op.FLOOR else "math.ceil"
        return cast_text(f"{fn}({x})", dt) if f else x
    raise NotImplementedError(op)


def update_text(kind, dt, acc, v, native=False):
    """Text of ``acc`` combined with ``v`` for a reduce of ``kind`` (NaN-propagating max/min;
    ``native``: see nan_minmax)."""
    if kind is ReduceKind.SUM:
        return _wrap(f"{acc} + {v}", dt)
    if kind is ReduceKind.PROD:
        return _wrap(f"{acc} * {v}", dt)
    cmp = ">" if kind is ReduceKind.MAX else "<"
    if np.dtype(dt).kind == "f":
        return nan_minmax(kind is ReduceKind.MAX, dt, v, acc, native)
    if np.dtype(dt).kind == "b":
        return f"{acc} | {v}" if kind is ReduceKind.MAX else f"{acc} & {v}"
    return f"select({v} {cmp} {acc}, {v}, {acc})"


def arg_take(kind, av, ai, bv, bi, first):
    """Condition for an arg-reduce to take (bv, bi) over (av, ai): NaN first, then value,
    then the smaller index (numpy returns the first maximum)."""
    cmp = ">" if kind is ReduceKind.ARGMAX else "<"
    if first:       # in-thread: positions grow, so only a strictly better value moves
        return (f"({bv} {cmp} {av}) | (({bv} != {bv}) & ({av} == {av})) | "
                f"({ai} == {1 << 62})")
    return (f"(({bv} != {bv}) & (({av} == {av}) | ({bi} < {ai}))) | "
            f"(({av} == {av}) & (({bv} {cmp} {av}) | (({bv} == {av}) & ({bi} < {ai}))))")


def literal(value, dt):
    return const_literal(value, dt)


def zero_text(dt):
    dt = np.dtype(dt)
    return "False" if dt.kind == "b" else f"{dtype_name(dt)}(0)"
