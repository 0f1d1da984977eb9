"""Which dtypes numbamr computes with, numpy's promotion rules applied to them, and static
values as signature keys."""
import struct

import numpy as np

from .errors import DTypeError

try:        # NumPy has no bfloat16; ml_dtypes gives it one (torch's bfloat16 maps to it)
    import ml_dtypes
    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    BFLOAT16 = None

SUPPORTED = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64)) + ((BFLOAT16,) if BFLOAT16 is not None else ())

BOOL = np.dtype(np.bool_)
INT64 = np.dtype(np.int64)
FLOAT16 = np.dtype(np.float16)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)


def check(dtype, what):
    """Return ``dtype`` as np.dtype, or raise a DTypeError naming ``what`` it belongs to."""
    dt = np.dtype(dtype)
    if dt not in SUPPORTED:
        raise DTypeError(f"{what} has dtype {dt}, which numbamr does not support "
                         f"(supported: bool, integers, float16, float32, float64, and "
                         f"bfloat16 with the ml_dtypes package installed)")
    return dt


def bfloat16_needed(what):
    """The error for a bfloat16 array when ml_dtypes (NumPy's bfloat16) is missing."""
    return DTypeError(f"{what} is bfloat16, which needs the ml_dtypes package for NumPy's "
                      f"bfloat16 dtype: pip install ml_dtypes")


def is_bfloat16(dt):
    return BFLOAT16 is not None and isinstance(dt, np.dtype) and dt == BFLOAT16


def is_float(dt):
    dt = np.dtype(dt)
    return dt.kind == "f" or is_bfloat16(dt)


def is_int(dt):
    return np.dtype(dt).kind in "iu"


def result_type(*operands):
    """numpy's promotion of arrays (given by dtype) and python scalars (given as values).

    bfloat16 promotes as float16 does (as in torch and JAX): with python scalars and small
    integers it stays bfloat16; with float16 it becomes float32. (NumPy with ml_dtypes
    refuses some of these pairs and turns bfloat16 + 2.0 into float64.)"""
    if BFLOAT16 is None or not any(is_bfloat16(_dtype(o)) for o in operands):
        return np.result_type(*operands)
    dts = [_dtype(o) for o in operands]
    has_f16 = any(d == FLOAT16 for d in dts if d is not None)
    out = np.result_type(*[FLOAT16 if is_bfloat16(d) else o for o, d in zip(operands, dts)])
    if out == FLOAT16:
        return FLOAT32 if has_f16 else BFLOAT16
    return out


def _dtype(operand):
    if isinstance(operand, np.dtype):
        return operand
    return operand.dtype if isinstance(operand, np.generic) else None


def float_of(dt):
    """The float dtype a float-only op (exp, sqrt...) on ``dt`` computes in, as numpy does."""
    dt = np.dtype(dt)
    if is_float(dt):
        return dt
    # numpy: bool/int8/uint8 -> float16, int16/uint16 -> float32, larger -> float64
    return np.result_type(dt, np.float16)


def compute_dtype(dt):
    """The dtype values of ``dt`` are held in inside a kernel: float16 and bfloat16 are
    computed as float32."""
    dt = np.dtype(dt)
    return FLOAT32 if dt == FLOAT16 or is_bfloat16(dt) else dt


def sum_dtype(dt):
    """numpy's result dtype of ``sum``/``prod``: small integers and bool widen to 64 bits."""
    dt = np.dtype(dt)
    if dt.kind == "b" or (dt.kind == "i" and dt.itemsize < 8):
        return INT64
    if dt.kind == "u" and dt.itemsize < 8:
        return np.dtype(np.uint64)
    return dt


def identity(kind_name, dt):
    """The identity element of a reduction of that kind in dtype ``dt``."""
    dt = np.dtype(dt)
    if kind_name == "sum":
        return dt.type(0)
    if kind_name == "prod":
        return dt.type(1)
    if kind_name in ("max", "argmax"):
        if is_float(dt):
            return dt.type(-np.inf)
        return dt.type(False) if dt.kind == "b" else dt.type(np.iinfo(dt).min)
    if kind_name in ("min", "argmin"):
        if is_float(dt):
            return dt.type(np.inf)
        return dt.type(True) if dt.kind == "b" else dt.type(np.iinfo(dt).max)
    raise ValueError(kind_name)


def static_key(value):
    """A static argument's value as a signature key that tells apart what a kernel does.

    Python's ``==`` does not: ``0.0 == -0.0`` (``np.copysign(x, s)`` and ``1 / (x * s)``
    differ) and ``nan != nan`` (a dict lookup of a NaN key misses, so every call would
    compile again). So floats are keyed by their bits (with their repr, for the debug log),
    NumPy scalars by their dtype and bytes, and the elements of tuples and frozensets each
    with its type (``(1, True) == (True, 1)`` in Python)."""
    if isinstance(value, np.generic):           # before float: np.float64 is a float
        return (value.dtype.name, repr(value), value.tobytes())
    if isinstance(value, float):
        return ("float", repr(value), _float_bits(value))
    if isinstance(value, complex):
        return ("complex", repr(value), _float_bits(value.real), _float_bits(value.imag))
    if isinstance(value, tuple):
        return tuple((type(v).__name__, static_key(v)) for v in value)
    if isinstance(value, frozenset):
        return frozenset((type(v).__name__, static_key(v)) for v in value)
    return value


def _float_bits(value):
    return struct.unpack("<Q", struct.pack("<d", value))[0]
