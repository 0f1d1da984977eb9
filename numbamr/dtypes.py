"""Which dtypes numbamr computes with, and numpy's promotion rules applied to them."""
import numpy as np

from .errors import DTypeError

SUPPORTED = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64))

BOOL = np.dtype(np.bool_)
INT64 = np.dtype(np.int64)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)


def check(dtype, what):
    """Return ``dtype`` as np.dtype, or raise a DTypeError naming ``what`` it belongs to."""
    dt = np.dtype(dtype)
    if dt not in SUPPORTED:
        raise DTypeError(f"{what} has dtype {dt}, which numbamr does not support "
                         f"(supported: bool, integers, float16, float32, float64)")
    return dt


def is_float(dt):
    return np.dtype(dt).kind == "f"


def is_int(dt):
    return np.dtype(dt).kind in "iu"


def result_type(*operands):
    """numpy's promotion of arrays (given by dtype) and python scalars (given as values)."""
    return np.result_type(*operands)


def float_of(dt):
    """The float dtype a float-only op (exp, sqrt...) on ``dt`` computes in, as numpy does."""
    dt = np.dtype(dt)
    if dt.kind == "f":
        return dt
    # numpy: bool/int8/uint8 -> float16, int16/uint16 -> float32, larger -> float64
    return np.result_type(dt, np.float16)


def compute_dtype(dt):
    """The dtype values of ``dt`` are held in inside a kernel: float16 is computed as float32."""
    dt = np.dtype(dt)
    return FLOAT32 if dt == np.float16 else dt


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
        if dt.kind == "f":
            return dt.type(-np.inf)
        return dt.type(False) if dt.kind == "b" else dt.type(np.iinfo(dt).min)
    if kind_name in ("min", "argmin"):
        if dt.kind == "f":
            return dt.type(np.inf)
        return dt.type(True) if dt.kind == "b" else dt.type(np.iinfo(dt).max)
    raise ValueError(kind_name)
