"""The one op enum of the traced graph, and the op families as sets.

Every node of the traced DAG (``graph.Node``) and every per-element value of a
lowered kernel (``lowering.kernel.Val``) carries one of these ops.
"""
from enum import Enum, auto


class Op(Enum):
    # leaves
    INPUT = auto()      # an argument array; arg = argument position
    BUFFER = auto()     # an intermediate written by an earlier kernel; arg = its name ("t0")
    CONST = auto()      # a scalar broadcast to the node's shape; arg = python value
    ARANGE = auto()     # 0, 1, ..., n-1 (int64) along its one axis (numbamr.constant)
    # unary
    NEG = auto(); ABS = auto(); NOT = auto(); EXP = auto(); EXP2 = auto(); LOG = auto()
    LOG2 = auto(); SQRT = auto(); RSQRT = auto(); SIN = auto(); COS = auto(); TANH = auto()
    SIGMOID = auto(); ERF = auto(); ISNAN = auto(); RECIP = auto(); FLOOR = auto(); CEIL = auto()
    LOG1P = auto(); EXPM1 = auto(); SINH = auto(); COSH = auto(); TAN = auto(); ASIN = auto()
    ACOS = auto(); ATAN = auto(); ASINH = auto(); ACOSH = auto(); ATANH = auto()
    CAST = auto()       # arg = target dtype (the node's dtype)
    # binary
    ADD = auto(); SUB = auto(); MUL = auto(); DIV = auto(); FLOORDIV = auto(); MOD = auto()
    POW = auto(); MAX = auto(); MIN = auto(); ATAN2 = auto(); HYPOT = auto(); FMOD = auto()
    COPYSIGN = auto()
    LT = auto(); LE = auto(); GT = auto(); GE = auto(); EQ = auto(); NE = auto()
    AND = auto(); OR = auto(); XOR = auto()
    # ternary
    WHERE = auto()
    # reduction: arg = (ReduceKind, axes); the result keeps the reduced axes as size 1
    REDUCE = auto()
    # movement (views): arg is the new shape / permutation / (starts, steps)
    RESHAPE = auto(); PERMUTE = auto(); EXPAND = auto(); SHRINK = auto()
    # lowered values only (lowering.kernel.Val): memory reads, index values, reduce results
    LOAD = auto()       # arg = (buffer position, address Expr)
    INDEX = auto()      # arg = an index Expr used as a value (argmax positions)
    REDUCED = auto()    # arg = the ReduceInstance whose combined result this is
    MUL_RN = auto()     # a product rounded on its own: never fused with an add into an FMA


class ReduceKind(Enum):
    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    ARGMAX = "argmax"
    ARGMIN = "argmin"


UNARY = {Op.NEG, Op.ABS, Op.NOT, Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.SQRT, Op.RSQRT, Op.SIN,
         Op.COS, Op.TANH, Op.SIGMOID, Op.ERF, Op.ISNAN, Op.RECIP, Op.FLOOR, Op.CEIL, Op.CAST,
         Op.LOG1P, Op.EXPM1, Op.SINH, Op.COSH, Op.TAN, Op.ASIN, Op.ACOS, Op.ATAN, Op.ASINH,
         Op.ACOSH, Op.ATANH}
BINARY = {Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.FLOORDIV, Op.MOD, Op.POW, Op.MAX, Op.MIN,
          Op.ATAN2, Op.HYPOT, Op.FMOD, Op.COPYSIGN,
          Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE, Op.AND, Op.OR, Op.XOR}
TERNARY = {Op.WHERE}
ALU = UNARY | BINARY | TERNARY
COMPARE = {Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE, Op.ISNAN}
MOVEMENT = {Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SHRINK}
LEAF = {Op.INPUT, Op.BUFFER, Op.CONST, Op.ARANGE}
# unary ops computed in floating point only (integers are cast first, as numpy does)
FLOAT_ONLY = {Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.SQRT, Op.RSQRT, Op.SIN, Op.COS, Op.TANH,
              Op.SIGMOID, Op.ERF, Op.RECIP, Op.LOG1P, Op.EXPM1, Op.SINH, Op.COSH, Op.TAN,
              Op.ASIN, Op.ACOS, Op.ATAN, Op.ASINH, Op.ACOSH, Op.ATANH}
